// Command demo shows digestpin at work without any set-up: it starts a
// registry on loopback, pushes an image for every image of an example
// stream, runs digestpin on the stream through --registry-mirror (so the
// output keeps the example's registry name), then pushes a new image under
// one tag and runs digestpin again to show that exactly the pod templates
// using it change.
//
// Usage: go run ./internal/cmd/demo DIGESTPIN-BINARY EXAMPLE.yaml
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// exampleRegistry is the registry host the example stream names.
const exampleRegistry = "registry.example"

var imageLine = regexp.MustCompile(`(?m)^\s*image:\s*["']?` + regexp.QuoteMeta(exampleRegistry) + `/([^"'\s]+)`)

func main() {
	if err := demo(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func demo(args []string) (err error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) != 2 {
		return fmt.Errorf("usage: demo DIGESTPIN-BINARY EXAMPLE.yaml")
	}
	bin, example := args[0], args[1]
	in, err := os.ReadFile(example)
	if err != nil {
		return fmt.Errorf("reading example: %w", err)
	}
	tb := &testregistry.Fatal{}
	defer tb.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	reg := testregistry.New(tb)
	var repos []string
	for _, m := range imageLine.FindAllSubmatch(in, -1) {
		repo := string(m[1])
		reg.PushImage(tb, repo)
		repos = append(repos, repo)
	}
	if len(repos) == 0 {
		return fmt.Errorf("%s names no image on %s", example, exampleRegistry)
	}
	note("started a registry on %s with %d images: %s", reg.Host(), len(repos), strings.Join(repos, ", "))
	// --mirror-only: registry.example itself is never asked.
	flags := []string{"--registry-mirror=" + exampleRegistry + "=" + reg.Host(), "--mirror-only"}
	note("running: %s %s < %s", bin, strings.Join(flags, " "), example)

	first, err := pin(bin, in, flags...)
	if err != nil {
		return err
	}
	os.Stdout.Write(first)
	second, err := pin(bin, in, flags...)
	if err != nil {
		return err
	}
	note("second run: byte-identical output: %v", bytes.Equal(first, second))

	moved := repos[0]
	reg.PushImage(tb, moved)
	third, err := pin(bin, in, flags...)
	if err != nil {
		return err
	}
	a, b := bytes.Split(first, []byte("\n---\n")), bytes.Split(third, []byte("\n---\n"))
	var changed []string
	for i := range min(len(a), len(b)) {
		if !bytes.Equal(a[i], b[i]) {
			changed = append(changed, fmt.Sprint(i+1))
		}
	}
	note("pushed a new image as %s/%s: documents changed: %s of %d", exampleRegistry, moved, strings.Join(changed, ", "), len(b))
	return nil
}

// pin runs digestpin on in and returns its output.
func pin(bin string, in []byte, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	return out, nil
}

func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
}
