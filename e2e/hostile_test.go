package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileImage is the one image of the hostile streams. The lock file
// pins it and --frozen keeps every run off the network.
const hostileImage = "registry.example/app:1"

// hostileRun is how one run of the binary ended.
type hostileRun struct {
	stdout, stderr []byte
	exit           int
	took           time.Duration
	maxRSS         int64 // bytes
}

// runHostile runs the binary on the stream in, offline, with the image
// pinned by a lock file.
func runHostile(t *testing.T, in []byte) hostileRun {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(hostileImage))
	lock := fmt.Sprintf("version: 1\nimages:\n  - reference: %s\n    digest: sha256:%s\n", hostileImage, hex.EncodeToString(sum[:]))
	input := filepath.Join(dir, "in.yaml")
	for f, b := range map[string][]byte{"digests.lock": []byte(lock), input: in} {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A child's peak RSS starts at its parent's RSS: Go starts a child
	// with vfork, sharing this (large, race-instrumented) process's
	// memory until the exec, and Linux keeps that high-water mark across
	// the exec, in the child and in whatever it waits for. time(1) forks
	// digestpin from its own small process and reports that child's peak
	// alone, into a file.
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		t.Fatalf("/usr/bin/time is missing (Debian: apt-get install time; make test installs it): %v", err)
	}
	rssFile := filepath.Join(dir, "rss")
	cmd := exec.Command(timeBin, "-f", "%M", "-o", rssFile, digestpinBin(t), "--lock", filepath.Join(dir, "digests.lock"), "--frozen", "-f", input)
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := hostileRun{stdout: out.Bytes(), stderr: errb.Bytes(), took: time.Since(start)}
	if err != nil {
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) {
			t.Fatalf("running digestpin: %v", err)
		}
	}
	r.exit = cmd.ProcessState.ExitCode()
	b, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("reading what time(1) measured: %v", err)
	}
	// time writes "Command exited with non-zero status N" first when N != 0.
	lines := strings.Fields(strings.TrimSpace(string(b)))
	kib, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("time(1) measured %q: %v", b, err)
	}
	r.maxRSS = kib << 10 // KiB
	t.Logf("%d bytes in, exit %d in %s, peak RSS %d MiB", len(in), r.exit, r.took.Round(time.Millisecond), r.maxRSS>>20)
	return r
}

// checkRefused checks that a run failed as Helm needs it to: exit 1,
// nothing on stdout, one error line on stderr naming the document and
// line, and no Go panic or stack trace.
func checkRefused(t *testing.T, r hostileRun, want string) {
	t.Helper()
	if r.exit != 1 {
		t.Errorf("exit status %d, want 1", r.exit)
	}
	if len(r.stdout) != 0 {
		t.Errorf("stdout has %d bytes, want none: %.200q", len(r.stdout), r.stdout)
	}
	stderr := string(r.stderr)
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "digestpin: error: document ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want one line \"digestpin: error: document …\" with %q", stderr, want)
	}
	for _, s := range []string{"panic", "goroutine ", ".go:"} {
		if strings.Contains(stderr, s) {
			t.Errorf("stderr holds %q, a stack trace:\n%s", s, stderr)
		}
	}
}

// pod is a Pod document with the hostile image, then extra at the end.
func podWith(extra string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    image: " + hostileImage + "\n" + extra
}

// laughs returns n levels of anchors, each nine aliases of the one before.
func laughs(n int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
	}
	return b.String()
}

// TestBinaryHostileInputRefused runs the binary on broken or hostile
// streams that must be refused.
func TestBinaryHostileInputRefused(t *testing.T) {
	t.Parallel()
	merges := "m0: &m0 {a: 1}\n"
	for i := 1; i <= 60; i++ {
		merges += fmt.Sprintf("m%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	for _, tc := range []struct {
		desc, in, want string
	}{
		{desc: "a scalar document", in: "---\nkind: ConfigMap\n---\nimage\n", want: "document 2, line 4: want a Kubernetes object (a mapping), found a scalar"},
		{desc: "a sequence document", in: "- image: x\n", want: "document 1, line 1: want a Kubernetes object (a mapping), found a sequence"},
		{desc: "image is a number", in: strings.Replace(podWith(""), hostileImage, "1.5", 1), want: "line 8: Pod/p container \"app\": image is float 1.5"},
		{desc: "image is a mapping", in: strings.Replace(podWith(""), hostileImage, "{name: x}", 1), want: "line 8: Pod/p container \"app\": image is a mapping"},
		{desc: "image is null", in: strings.Replace(podWith(""), hostileImage, "~", 1), want: "line 8: Pod/p container \"app\": image is empty"},
		{desc: "image is empty", in: strings.Replace(podWith(""), hostileImage, "''", 1), want: "line 8: Pod/p container \"app\": image is empty"},
		{desc: "image with spaces", in: strings.Replace(podWith(""), hostileImage, "registry.example/my app:1", 1), want: `line 8: Pod/p container "app": parsing image "registry.example/my app:1"`},
		{desc: "uppercase repository", in: strings.Replace(podWith(""), hostileImage, "registry.example/App:1", 1), want: `line 8: Pod/p container "app": parsing image "registry.example/App:1"`},
		{desc: "an invalid digest", in: strings.Replace(podWith(""), hostileImage, "registry.example/app@sha256:xyz", 1), want: `line 8: Pod/p container "app": parsing image "registry.example/app@sha256:xyz"`},
		{desc: "bytes that are not UTF-8", in: podWith("x: \"\xc3\x28\"\n"), want: "document 1, line 9: malformed YAML: byte 0xc3 is not UTF-8"},
		{desc: "a UTF-16 stream", in: "\xfe\xff\x00a\x00p\x00i", want: "document 1, line 1: the stream is UTF-16"},
		{desc: "nesting 50000 levels deep", in: podWith("x: " + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + "\n"), want: "document 1, line 9: malformed YAML: exceeded max depth"},
		{desc: "a merge-key bomb", in: podWith(merges), want: "merge keys (<<) expand to more than"},
		{desc: "a cyclic alias", in: "apiVersion: v1\nkind: Pod\nspec: &s\n  containers:\n  - {name: app, image: " + hostileImage + "}\n  self: *s\n", want: "document 1, line 6: alias *s is inside the node it names"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := runHostile(t, []byte(tc.in))
			checkRefused(t, r, tc.want)
		})
	}
}

// TestBinaryHostileInputBounded runs the binary on large and hostile
// streams that must be rendered, in bounded time and memory. The bounds
// are generous (a shared 2-core CI machine): they catch expansion and
// quadratic work, which would take minutes and gigabytes, not slowness.
func TestBinaryHostileInputBounded(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	// An alias bomb of 9^30 strings in a Pod.
	bomb := func() string { return podWith(laughs(30)) }
	// Lists of aliases of Lists (9^15 Pods), which hung digestpin before
	// the walker edited each node once.
	lists := func() string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: List\nitems:\n- &p0 {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: app, image: " + hostileImage + "}]}}\n")
		for i := 1; i <= 15; i++ {
			fmt.Fprintf(&b, "- &p%d {kind: List, items: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*p%d, ", i-1), 9), ", "))
		}
		return b.String()
	}
	// Twenty thousand containers on one flow-style line, which took
	// minutes when each splice scanned its line from the start.
	long := func() string {
		var line []string
		for i := range 20000 {
			line = append(line, fmt.Sprintf("{name: c%d, image: %s }", i, hostileImage))
		}
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec: {containers: [" + strings.Join(line, ", ") + "]}\n"
	}
	// A Deployment of size MiB: one container with many env entries.
	big := func(size int) func() string {
		return func() string {
			var b strings.Builder
			b.WriteString("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: big\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + hostileImage + "\n        env:\n")
			for i := 0; b.Len() < size*mib; i++ {
				fmt.Fprintf(&b, "        - name: VAR_%08d\n          value: \"%040d\"\n", i, i)
			}
			return b.String()
		}
	}
	for _, tc := range []struct {
		desc    string
		in      func() string
		maxTime time.Duration
		maxRSS  int64
		refused string // the error it is refused with; "" when it renders
	}{
		{desc: "an alias bomb", in: bomb, maxTime: 30 * time.Second, maxRSS: 256 * mib},
		{desc: "Lists of aliases of Lists", in: lists, maxTime: 30 * time.Second, maxRSS: 256 * mib},
		{desc: "a very long line", in: long, maxTime: time.Minute, maxRSS: 1024 * mib},
		// Fifty thousand env entries: under renderer.MaxNodes.
		{desc: "a 4 MB document", in: big(4), maxTime: time.Minute, maxRSS: 1024 * mib},
		// A million: refused before it is parsed (it peaked at 2.4 GB).
		{desc: "a 50 MB document", in: big(50), maxTime: time.Minute, maxRSS: 1024 * mib, refused: "more than digestpin parses in one document (MaxNodes 1048576)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.in()
			r := runHostile(t, []byte(in))
			if r.took > tc.maxTime {
				t.Errorf("took %s, more than %s", r.took, tc.maxTime)
			}
			if r.maxRSS > tc.maxRSS {
				t.Errorf("peak RSS %d MiB, more than %d MiB", r.maxRSS>>20, tc.maxRSS>>20)
			}
			if tc.refused != "" {
				checkRefused(t, r, tc.refused)
				return
			}
			if r.exit != 0 {
				t.Fatalf("exit status %d, stderr:\n%s", r.exit, r.stderr)
			}
			if !bytes.Contains(r.stdout, []byte(hostileImage+"@sha256:")) {
				t.Errorf("the output does not pin %s", hostileImage)
			}
			// Nothing was expanded: the output is the input and the pins.
			if n, limit := len(r.stdout), len(in)+bytes.Count(r.stdout, []byte("@sha256:"))*72+1024; n > limit {
				t.Errorf("output is %d bytes, more than the %d of the input and its pins", n, limit)
			}
		})
	}
}

// TestBinaryStopsWithNothingWritten checks the two ways a run can end
// early from outside: SIGTERM in the middle of a big stream, and a stdout
// closed by its reader (`digestpin | head -c 0`). Either way the run fails
// and neither stdout nor the lock file gets anything.
func TestBinaryStopsWithNothingWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(hostileImage))
	lock := filepath.Join(dir, "digests.lock")
	if err := os.WriteFile(lock, fmt.Appendf(nil, "version: 1\nimages:\n  - reference: %s\n    digest: sha256:%s\n", hostileImage, hex.EncodeToString(sum[:])), 0o644); err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for i := range 40000 {
		fmt.Fprintf(&big, "---\n%s", strings.Replace(podWith(""), "name: p\n", fmt.Sprintf("name: p%d\n", i), 1))
	}
	newLock := filepath.Join(dir, "new.lock")
	args := []string{"--lock", lock, "--frozen", "--write-lock", newLock}

	t.Run("SIGTERM", func(t *testing.T) {
		cmd := exec.Command(digestpinBin(t), args...)
		cmd.Env = cleanEnv()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The signal goes once the run reads its input, which it does
		// after it has taken over SIGTERM: written past what the pipe
		// holds, the input is being read. (A fixed sleep of 150 ms came
		// before the handler on a loaded machine, and the signal's
		// default action killed the process.)
		read := make(chan struct{})
		go func() {
			defer stdin.Close()
			in, chunk := []byte(big.String()), 16<<10
			for i := 0; i < len(in); i += chunk {
				if i == 1<<20 {
					close(read)
				}
				if _, err := stdin.Write(in[i:min(i+chunk, len(in))]); err != nil {
					return // the run stopped; its exit is checked below
				}
			}
		}()
		select {
		case <-read:
		case <-time.After(time.Minute):
			t.Fatal("digestpin read less than 1 MiB of its input in a minute")
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit status %d, want %d; stderr %q", code, 128+int(syscall.SIGTERM), errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("stdout has %d bytes, want none", out.Len())
		}
		if !strings.Contains(errb.String(), "stopped by terminated: nothing written") {
			t.Errorf("stderr = %q, want it to say the run was stopped", errb.String())
		}
	})

	t.Run("closed stdout", func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pr.Close()
		cmd := exec.Command(digestpinBin(t), args...)
		cmd.Env = cleanEnv()
		cmd.Stdin = strings.NewReader(podWith(""))
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = pw, &errb
		err = cmd.Run()
		pw.Close()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errb.String(), "writing output: ") {
			t.Errorf("run = %v (exit %d), stderr %q; want exit 1 and a write error", err, code, errb.String())
		}
	})

	if _, err := os.Stat(newLock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat(%s) = %v, want no lock file written", newLock, err)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Errorf("folder holds %d entries, want only the lock file read", len(des))
	}
}

// TestBinaryStdinTerminal checks that digestpin run alone at a terminal
// says what it is waiting for, run in the background at one refuses at
// once, and /dev/null gets no message.
func TestBinaryStdinTerminal(t *testing.T) {
	t.Parallel()
	r := runTTY(t, cleanEnv(), digestpinBin(t), "--timeout", "300ms")
	if !strings.Contains(r.stdout, "digestpin: reading manifests from stdin (end with Ctrl-D)") {
		t.Errorf("at a terminal: %q, want the stdin hint", r.stdout)
	}
	// Under timeout(1) without --foreground, digestpin runs in a process
	// group of its own: reading the terminal would stop it (SIGTTIN) and
	// timeout would wait for it forever. It refuses at once instead.
	timeoutBin, err := exec.LookPath("timeout")
	if err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(t.TempDir(), "seed")
	if out, err := exec.Command(digestpinBin(t), "seed", seed).CombinedOutput(); err != nil {
		t.Fatalf("digestpin seed: %v\n%s", err, out)
	}
	chart := filepath.Join(repoRoot(t), "testdata", "generated")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "reading manifests from stdin: stdin is a terminal and digestpin runs in the background"},
		{[]string{"template", "x", chart, "--seed-file", seed, "-f", "-"}, "reading values from stdin: stdin is a terminal and digestpin runs in the background"},
		{[]string{"template", "x", chart, "--seed-file", seed, "--set-file", "a=-"}, "reading values from stdin: stdin is a terminal"},
		{[]string{"upgrade", "--install", "x", chart, "--seed-file", seed, "--values=-"}, "reading values from stdin: stdin is a terminal"},
	} {
		r := runTTY(t, cleanEnv(), timeoutBin, append([]string{"-k", "5", "10", digestpinBin(t)}, tc.args...)...)
		var exit *exec.ExitError
		if !errors.As(r.err, &exit) || exit.ExitCode() != 1 || !strings.Contains(r.stdout, "digestpin: error: "+tc.want) {
			t.Errorf("timeout -k 5 10 digestpin %s at a terminal = %v, %q; want exit 1 (not timeout's 124 or 137) and %q", strings.Join(tc.args, " "), r.err, r.stdout, tc.want)
		}
	}
	cmd := exec.Command(digestpinBin(t))
	cmd.Env = cleanEnv()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	cmd.Stdin = devnull
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("digestpin </dev/null = %v, %q; want success and no message", err, out)
	}
}
