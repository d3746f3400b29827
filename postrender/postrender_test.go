package postrender_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/postrender"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
)

// deployment is one document as Helm 3 hands it to a post-renderer.
const deployment = `---
# Source: chart/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: %s
`

func TestRun(t *testing.T) {
	reg := testregistry.New(t)
	d := reg.PushImage(t, "app:1.0")
	app := reg.Ref("app:1.0")
	missing := reg.Ref("missing:1.0")

	for _, tc := range []struct {
		desc    string
		pr      *postrender.PostRenderer
		image   string
		want    string // in the output
		wantErr string // in the error
	}{
		{desc: "zero value pins", pr: &postrender.PostRenderer{}, image: app, want: "image: " + app + "@" + d.String()},
		{desc: "digest mode", pr: &postrender.PostRenderer{Options: pin.Options{Renderer: renderer.Renderer{Mode: renderer.ModeDigest}}}, image: app, want: "image: " + reg.Ref("app") + "@" + d.String()},
		{desc: "checksum annotation", pr: &postrender.PostRenderer{Options: pin.Options{Renderer: renderer.Renderer{ChecksumAnnotation: "example.com/images"}}}, image: app, want: "example.com/images: "},
		{desc: "missing image", pr: &postrender.PostRenderer{}, image: missing, wantErr: missing},
		{desc: "keep unresolved", pr: &postrender.PostRenderer{Options: pin.Options{Renderer: renderer.Renderer{KeepUnresolved: true}}}, image: missing, want: "image: " + missing + "\n"},
		{desc: "bad options", pr: &postrender.PostRenderer{Options: pin.Options{ResolveOptions: []resolve.Option{resolve.WithJobs(0)}}}, image: app, wantErr: "jobs must be positive"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := fmt.Sprintf(deployment, tc.image)
			buf := bytes.NewBufferString(in)
			out, err := tc.pr.Run(buf)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run() error = %v, want one containing %q", err, tc.wantErr)
				}
				if out != nil {
					t.Errorf("Run() returned output with an error:\n%s", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("Run() = \n%s\nwant it to contain %q", out, tc.want)
			}
			if !strings.HasPrefix(out.String(), "---\n# Source: chart/templates/deployment.yaml\n") {
				t.Errorf("Run() lost the # Source: line Helm 3's --show-only needs:\n%s", out)
			}
			if buf.String() != in {
				t.Errorf("Run() changed its input to\n%s", buf)
			}
		})
	}
}

// TestRunSeesTheRegistryNow checks that one PostRenderer used for two
// renders resolves again: a tag moved in between is pinned to its new
// digest.
func TestRunSeesTheRegistryNow(t *testing.T) {
	reg := testregistry.New(t)
	pr, err := postrender.New(pin.Options{ResolveOptions: []resolve.Option{resolve.WithKeychain(authn.DefaultKeychain)}})
	if err != nil {
		t.Fatal(err)
	}
	in := fmt.Sprintf(deployment, reg.Ref("app:1.0"))
	for i := range 2 {
		// Push (the second time: move) the tag, then render.
		want := reg.PushImage(t, "app:1.0").String()
		out, err := pr.Run(bytes.NewBufferString(in))
		if err != nil {
			t.Fatalf("render %d: Run() error = %v", i, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("render %d: Run() = \n%s\nwant digest %s", i, out, want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := postrender.New(pin.Options{ResolveOptions: []resolve.Option{resolve.WithJobs(-1)}}); err == nil {
		t.Error("New(WithJobs(-1)) error = nil, want one")
	}
}

func TestRunTimeout(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	// Far longer than any slowness of a busy machine.
	reg.SetLatency(time.Minute)
	pr := &postrender.PostRenderer{Timeout: 100 * time.Millisecond}
	start := time.Now()
	if _, err := pr.Run(bytes.NewBufferString(fmt.Sprintf(deployment, reg.Ref("app:1.0")))); err == nil {
		t.Error("Run() error = nil, want a timeout")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run() took %s, want about the 100ms timeout (the registry answers after a minute)", d)
	}
}

// TestRunKeep: with Keep, Run hands over the result with the lock file and
// the report prepared, not written; Commit writes them, Discard drops
// them.
func TestRunKeep(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	in := fmt.Sprintf(deployment, reg.Ref("app:1.0"))
	for _, commit := range []bool{true, false} {
		dir := t.TempDir()
		lock, report := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "report.json")
		var kept []*pin.Result
		pr := &postrender.PostRenderer{Options: pin.Options{WriteLock: lock, Report: report}, Keep: func(r *pin.Result) { kept = append(kept, r) }}
		out, err := pr.Run(bytes.NewBufferString(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) != 1 || !bytes.Equal(kept[0].Bytes(), out.Bytes()) {
			t.Fatalf("Keep got %d results, want the one Run returned", len(kept))
		}
		for _, f := range []string{lock, report} {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Run with Keep wrote %s (%v)", f, err)
			}
		}
		if commit {
			if err := kept[0].Commit(); err != nil {
				t.Fatal(err)
			}
		} else {
			kept[0].Discard()
		}
		for _, f := range []string{lock, report} {
			if _, err := os.Stat(f); (err == nil) != commit {
				t.Errorf("commit %v: %s: %v", commit, f, err)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != map[bool]int{true: 2, false: 0}[commit] {
			t.Errorf("commit %v left %d files in %s", commit, len(entries), dir)
		}
	}
}

// TestRunTimeoutCause: an error of a Run that its Timeout stopped says so
// and wraps a *TimeoutError.
func TestRunTimeoutCause(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	reg.SetLatency(2 * time.Second)
	pr := &postrender.PostRenderer{Timeout: 100 * time.Millisecond}
	_, err := pr.Run(bytes.NewBufferString(fmt.Sprintf(deployment, reg.Ref("app:1.0"))))
	var te *postrender.TimeoutError
	if !errors.As(err, &te) || te.Timeout != 100*time.Millisecond || !strings.Contains(err.Error(), "timeout 100ms ran out") {
		t.Errorf("Run() error = %v, want one wrapping the 100ms TimeoutError", err)
	}
}
