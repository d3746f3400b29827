package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestProgress runs the binary against a slow registry: at a terminal
// (script(1)) the progress line shows and is erased, and the manifests
// are the bytes of a run on a pipe, which shows no progress; with
// --progress always a pipe gets plain lines.
func TestProgress(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) is missing (Debian: apt-get install bsdutils): %v", err)
	}
	reg := testregistry.New(t)
	var refs []string
	for i := range 6 {
		tag := fmt.Sprintf("app%d:1", i)
		reg.PushImage(t, tag)
		refs = append(refs, reg.Ref(tag))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.yaml")
	if err := os.WriteFile(in, gen.Deployments("prod", refs...), 0o644); err != nil {
		t.Fatal(err)
	}
	// One request at a time, each 300 ms late: a run of about 2 s.
	reg.SetLatency(300 * time.Millisecond)
	args := []string{"-f", in, "--concurrency", "1"}

	pipe := runCmd(t, dir, nil, nil, bin, args...)
	if pipe.err != nil {
		t.Fatalf("digestpin on a pipe: %v\n%s", pipe.err, pipe.stderr)
	}
	if strings.Contains(pipe.stderr, "resolving images") {
		t.Errorf("digestpin on a pipe showed progress:\n%q", pipe.stderr)
	}

	// At a terminal, with stdout in a file and CI unset.
	out := filepath.Join(dir, "out.yaml")
	q := []string{"env", "-u", "CI", shellQuote(bin)}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	cmd := strings.Join(q, " ") + " > " + shellQuote(out)
	tty := runHelm(t, []string{"SHELL=/bin/sh"}, script, "-qec", cmd, "/dev/null")
	if tty.err != nil {
		t.Fatalf("digestpin at a terminal: %v\n%s%s", tty.err, tty.stdout, tty.stderr)
	}
	if !strings.Contains(tty.stdout, "\rdigestpin: resolving images: ") || !strings.Contains(tty.stdout, " of 6 done, ") {
		t.Errorf("the terminal shows no progress line:\n%q", tty.stdout)
	}
	if !strings.HasSuffix(tty.stdout, "\r\x1b[K") {
		t.Errorf("the progress line is not erased at the end:\n%q", tty.stdout)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != pipe.stdout {
		t.Errorf("the manifests at a terminal differ from those on a pipe:\n%s\nwant:\n%s", got, pipe.stdout)
	}

	always := runCmd(t, dir, nil, nil, bin, append(args, "--progress", "always")...)
	if always.err != nil {
		t.Fatalf("digestpin --progress always: %v\n%s", always.err, always.stderr)
	}
	if !strings.Contains(always.stderr, "digestpin: resolving images: ") || strings.Contains(always.stderr, "\r") {
		t.Errorf("--progress always on a pipe: want plain lines, got:\n%q", always.stderr)
	}
	if always.stdout != pipe.stdout {
		t.Error("the manifests with --progress always differ")
	}
}
