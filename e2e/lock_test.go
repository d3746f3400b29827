package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

func TestLockCacheSharedByConcurrentProcesses(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	var images []string
	for i := range 12 {
		im := fmt.Sprintf("team/app%02d:1", i)
		reg.PushImage(t, im)
		images = append(images, reg.Ref(im))
	}
	reg.ResetCounts()
	// Latency keeps the processes' resolutions in flight together.
	reg.SetLatency(20 * time.Millisecond)
	in := gen.Deployments("", images...)
	cache := t.TempDir()
	env := []string{"DIGESTPIN_CACHE_DIR=" + cache, "DIGESTPIN_CACHE_TTL=1h", "DIGESTPIN_CONCURRENCY=4"}

	// Several digestpin processes at once on one cache folder, as
	// concurrent Argo CD generations are.
	const procs = 4
	outs := make([]result, procs)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(bin)
			cmd.Env = cleanEnv(env...)
			cmd.Stdin = bytes.NewReader(in)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			outs[i] = result{stdout: out.String(), stderr: errb.String(), err: err}
		})
	}
	wg.Wait()
	t.Logf("%d concurrent processes, %d images: %s, %d HEAD manifest requests", procs, len(images), time.Since(start).Round(time.Millisecond), reg.Count("HEAD manifests"))
	for i, r := range outs {
		if r.err != nil {
			t.Fatalf("process %d: %v\n%s", i, r.err, r.stderr)
		}
		if r.stdout != outs[0].stdout {
			t.Errorf("process %d output differs from process 0's", i)
		}
	}
	if n := reg.Count("HEAD manifests"); n < len(images) || n > procs*len(images) {
		t.Errorf("HEAD manifests = %d, want between %d and %d", n, len(images), procs*len(images))
	}

	// The folder holds one whole entry per image, the registry's ping
	// answer (the auth cache) and nothing else.
	des, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != len(images)+1 {
		t.Errorf("cache folder holds %d files, want %d", len(des), len(images)+1)
	}
	for _, d := range des {
		b, err := os.ReadFile(filepath.Join(cache, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Reference, Digest, Format string
			Status                    int
		}
		if !strings.HasSuffix(d.Name(), ".json") || json.Unmarshal(b, &e) != nil || (e.Digest == "" && (e.Format != "digestpin-auth-v1" || e.Status != 200)) {
			t.Errorf("cache file %s is not a whole entry: %q", d.Name(), b)
		}
	}

	// The next run, within the TTL, asks the registry nothing.
	reg.ResetCounts()
	r := runCmd(t, t.TempDir(), in, env, bin)
	if r.err != nil || r.stdout != outs[0].stdout {
		t.Fatalf("cached run: %v\n%s", r.err, r.stderr)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("a run within the TTL made %d registry requests, want 0", n)
	}
}

func TestLockFrozenFromEnvironment(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	app := reg.PushImage(t, "app:1.0")
	side := reg.PushImage(t, "side:2")
	in := gen.Deployments("", reg.Ref("app:1.0"), reg.Ref("side:2"))
	dir := t.TempDir()

	rec := runCmd(t, dir, in, []string{"DIGESTPIN_WRITE_LOCK=digests.lock"}, bin)
	if rec.err != nil {
		t.Fatalf("--write-lock: %v\n%s", rec.err, rec.stderr)
	}
	reg.ResetCounts()
	env := []string{"DIGESTPIN_LOCK=digests.lock", "DIGESTPIN_FROZEN=true", "DIGESTPIN_REPORT=report.json"}
	frozen := runCmd(t, dir, in, env, bin)
	if frozen.err != nil {
		t.Fatalf("--lock --frozen: %v\n%s", frozen.err, frozen.stderr)
	}
	if frozen.stdout != rec.stdout {
		t.Errorf("frozen output differs:\n%s", cmp.Diff(rec.stdout, frozen.stdout))
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("--frozen made %d registry requests, want 0", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Images []struct {
			Reference, Digest, Source string
			Workloads                 []map[string]string
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	type entry struct{ Reference, Digest, Source, Workload string }
	var got []entry
	for _, im := range rep.Images {
		var ws []string
		for _, w := range im.Workloads {
			ws = append(ws, w["kind"]+"/"+w["name"]+"/"+w["container"])
		}
		got = append(got, entry{im.Reference, im.Digest, im.Source, strings.Join(ws, ",")})
	}
	want := []entry{
		{reg.Ref("app:1.0"), app.String(), "lock", "Deployment/w0/app"},
		{reg.Ref("side:2"), side.String(), "lock", "Deployment/w1/app"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}

	// A flag wins over its variable: --frozen=false with a lock that lacks
	// an image resolves it at the registry.
	more := gen.Deployments("", reg.Ref("app:1.0"), reg.Ref("side:2"), reg.Ref("new:1"))
	reg.PushImage(t, "new:1")
	reg.ResetCounts()
	r := runCmd(t, dir, more, env, bin, "--frozen=false")
	if r.err != nil {
		t.Fatalf("--frozen=false: %v\n%s", r.err, r.stderr)
	}
	if n := reg.Count("HEAD manifests"); n != 1 {
		t.Errorf("HEAD manifests = %d, want 1 (new:1 only)", n)
	}
}
