// Command demo shows digestpin at work without any set-up: it starts a
// registry on loopback, pushes an image for every image of an example
// stream, runs digestpin on the stream through --registry-mirror (so the
// output keeps the example's registry name), then pushes a new image under
// one tag and runs digestpin again to show that exactly the pod templates
// using it change, with digestpin's summary of what moved against the
// first output (--diff-against).
//
// Usage: go run ./internal/cmd/demo DIGESTPIN-BINARY EXAMPLE.yaml
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// exampleRegistry is the registry host the example stream names.
const exampleRegistry = "registry.example"

var imageLine = regexp.MustCompile(`(?m)^\s*image:\s*["']?` + regexp.QuoteMeta(exampleRegistry) + `/([^"'\s]+)`)

func main() {
	if err := demo(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// demo runs the demo: the pinned example on stdout, what happens on
// stderr, each line starting with "# ".
func demo(args []string, stdout, stderr io.Writer) error {
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
	return testregistry.Run(func(tb testregistry.TB) error { return show(tb, bin, example, in, stdout, stderr) })
}

// show runs the demo on the example file (its content in), with a
// registry of tb.
func show(tb testregistry.TB, bin, example string, in []byte, stdout, stderr io.Writer) error {
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
	note(stderr, "started a registry on %s with %d images: %s", reg.Host(), len(repos), strings.Join(repos, ", "))
	// --mirror-only: registry.example itself is never asked.
	flags := []string{"--registry-mirror=" + exampleRegistry + "=" + reg.Host(), "--mirror-only"}
	note(stderr, "running: %s %s < %s", bin, strings.Join(flags, " "), example)

	first, err := pin(bin, in, stderr, flags...)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(first); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	second, err := pin(bin, in, stderr, flags...)
	if err != nil {
		return err
	}
	note(stderr, "second run: byte-identical output: %v", bytes.Equal(first, second))

	moved := repos[0]
	reg.PushImage(tb, moved)
	// What moved, against the first output, as a commit message would
	// say it.
	dir, err := os.MkdirTemp("", "digestpin-demo-")
	if err != nil {
		return fmt.Errorf("making a temporary folder: %w", err)
	}
	defer os.RemoveAll(dir)
	earlier, summary := filepath.Join(dir, "first.yaml"), filepath.Join(dir, "summary.txt")
	if err := os.WriteFile(earlier, first, 0o600); err != nil {
		return fmt.Errorf("keeping the first output: %w", err)
	}
	note(stderr, "running again with --diff-against %s --summary-text %s", "FIRST-OUTPUT", "FILE")
	third, err := pin(bin, in, stderr, append(flags, "--diff-against="+earlier, "--summary-text="+summary)...)
	if err != nil {
		return err
	}
	changed, err := changedDocuments(first, third)
	if err != nil {
		return err
	}
	note(stderr, "pushed a new image as %s/%s: %s", exampleRegistry, moved, changed)
	text, err := os.ReadFile(summary)
	if err != nil {
		return fmt.Errorf("reading the summary: %w", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		note(stderr, "  %s", l)
	}
	return nil
}

// changedDocuments compares two outputs of digestpin for the same input,
// document by document, and says how many documents changed and which,
// as KIND/NAMESPACE/NAME (KIND/NAME without a namespace):
// "1 of 3 documents changed: Deployment/shop/web".
func changedDocuments(before, after []byte) (string, error) {
	a, err := documents(before)
	if err != nil {
		return "", fmt.Errorf("reading the first output: %w", err)
	}
	b, err := documents(after)
	if err != nil {
		return "", fmt.Errorf("reading the second output: %w", err)
	}
	if len(a) != len(b) {
		return "", fmt.Errorf("the outputs have %d and %d documents", len(a), len(b))
	}
	var changed []string
	for i := range b {
		sa, err := a[i].String()
		if err != nil {
			return "", fmt.Errorf("encoding document %d: %w", i+1, err)
		}
		sb, err := b[i].String()
		if err != nil {
			return "", fmt.Errorf("encoding document %d: %w", i+1, err)
		}
		if sa == sb {
			continue
		}
		id := []string{b[i].GetKind(), b[i].GetNamespace(), b[i].GetName()}
		if id[1] == "" {
			id = slices.Delete(id, 1, 2)
		}
		changed = append(changed, strings.Join(id, "/"))
	}
	noun := "documents"
	if len(b) == 1 {
		noun = "document"
	}
	if len(changed) == 0 {
		return fmt.Sprintf("0 of %d %s changed", len(b), noun), nil
	}
	return fmt.Sprintf("%d of %d %s changed: %s", len(changed), len(b), noun, strings.Join(changed, ", ")), nil
}

// pin runs digestpin on in and returns its output.
func pin(bin string, in []byte, stderr io.Writer, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	return out, nil
}

// note writes one line of what the demo does to w.
func note(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "# "+format+"\n", args...)
}

// documents parses a YAML stream into its documents, empty ones left
// out.
func documents(stream []byte) ([]*yaml.RNode, error) {
	var docs []*yaml.RNode
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if rn := yaml.NewRNode(&n); !rn.IsNilOrEmpty() {
			docs = append(docs, rn)
		}
	}
}
