package e2e

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// redisStream pushes 40 images to a loopback registry with 50 ms latency
// and returns the registry, a stream of 80 Deployments over them and the
// stream pinned by a run without any cache.
func redisStream(t *testing.T, bin string) (*testregistry.Registry, []byte, string) {
	t.Helper()
	reg := testregistry.New(t)
	imgs := gen.Images(reg.Host(), 40)
	for _, img := range imgs {
		reg.PushImage(t, strings.TrimPrefix(img, reg.Host()+"/")+":1.0")
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 80, Images: imgs}); err != nil {
		t.Fatal(err)
	}
	reg.SetLatency(50 * time.Millisecond)
	want := runCmd(t, t.TempDir(), buf.Bytes(), nil, bin)
	if want.err != nil {
		t.Fatalf("digestpin without a cache: %v\n%s", want.err, want.stderr)
	}
	if n := strings.Count(want.stdout, "@sha256:"); n != 160 {
		t.Fatalf("the reference run pinned %d images, want 160", n)
	}
	reg.ResetCounts()
	return reg, buf.Bytes(), want.stdout
}

// runProcs runs procs digestpin processes at once on in, with env, and
// calls during (if not nil) while they run.
func runProcs(t *testing.T, bin string, procs int, in []byte, env []string, during func()) []result {
	t.Helper()
	outs := make([]result, procs)
	var wg sync.WaitGroup
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
	if during != nil {
		during()
	}
	wg.Wait()
	return outs
}

// checkOutputs fails the test unless every process succeeded and wrote
// want.
func checkOutputs(t *testing.T, what string, outs []result, want string) {
	t.Helper()
	for i, r := range outs {
		if r.err != nil {
			t.Fatalf("%s: process %d: %v\n%s", what, i, r.err, r.stderr)
		}
		if r.stdout != want {
			t.Errorf("%s: process %d wrote another output than a run without a cache", what, i)
		}
	}
}

// TestRedisOneRequestPerImage runs several digestpin processes at once on
// the same 40-image stream, sharing one Redis: the registry sees at most
// one manifest request per image in all, a second wave none, and after
// FLUSHALL again one per image.
func TestRedisOneRequestPerImage(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg, in, want := redisStream(t, bin)
	srv := testredis.Start(t, testredis.Options{})
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h"}
	const procs = 8

	for _, wave := range []struct {
		desc      string
		before    func()
		manifests int
	}{
		{desc: "empty Redis", manifests: 40},
		{desc: "within the TTL", manifests: 0},
		{desc: "after FLUSHALL", before: func() {
			rc := srv.Client(0)
			defer rc.Close()
			if err := rc.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}, manifests: 40},
	} {
		if wave.before != nil {
			wave.before()
		}
		reg.ResetCounts()
		start := time.Now()
		outs := runProcs(t, bin, procs, in, env, nil)
		t.Logf("%s: %d processes in %s, %d manifest requests, %d requests", wave.desc, procs, time.Since(start).Round(time.Millisecond), reg.Manifests(), reg.Total())
		checkOutputs(t, wave.desc, outs, want)
		for i, r := range outs {
			if r.stderr != "" {
				t.Errorf("%s: process %d said %q", wave.desc, i, r.stderr)
			}
		}
		if n := reg.Manifests(); n != wave.manifests {
			t.Errorf("%s: %d processes made %d manifest requests for 40 images, want %d", wave.desc, procs, n, wave.manifests)
		}
	}
}

// TestRedisKilledMidRun kills Redis while several processes are using
// it: every process still writes the right output, with one warning at
// most.
func TestRedisKilledMidRun(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg, in, want := redisStream(t, bin)
	srv := testredis.Start(t, testredis.Options{})
	// Two resolutions at a time: each process takes about a second.
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h", "DIGESTPIN_CONCURRENCY=2"}
	start := time.Now()
	outs := runProcs(t, bin, 6, in, env, func() {
		time.Sleep(600 * time.Millisecond)
		srv.Kill()
	})
	t.Logf("6 processes, Redis killed after 600ms: %s, %d manifest requests", time.Since(start).Round(time.Millisecond), reg.Manifests())
	checkOutputs(t, "Redis killed", outs, want)
	warned := 0
	for i, r := range outs {
		switch n := strings.Count(r.stderr, "warning:"); {
		case n > 1:
			t.Errorf("process %d warned %d times: %q", i, n, r.stderr)
		case n == 1 && !strings.Contains(r.stderr, "going on without Redis"):
			t.Errorf("process %d: %q", i, r.stderr)
		}
		if strings.Contains(r.stderr, "warning:") {
			warned++
		}
	}
	if warned == 0 {
		t.Error("no process noticed that Redis was killed")
	}
}

// TestRedisAuthTLS shares the cache through a Redis that wants a password
// (from REDIS_PASSWORD, as the argocd-redis Secret gives it) over TLS.
func TestRedisAuthTLS(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg, in, want := redisStream(t, bin)
	const password = "e2e-redis-password"
	srv := testredis.Start(t, testredis.Options{Password: password, TLS: true})
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h", "DIGESTPIN_REDIS_CA_FILE=" + srv.CAFile, "REDIS_PASSWORD=" + password}
	for _, wave := range []struct {
		desc      string
		manifests int
	}{{"first", 40}, {"second", 0}} {
		reg.ResetCounts()
		outs := runProcs(t, bin, 4, in, env, nil)
		checkOutputs(t, wave.desc, outs, want)
		for i, r := range outs {
			if r.stderr != "" {
				t.Errorf("%s: process %d said %q", wave.desc, i, r.stderr)
			}
		}
		if n := reg.Manifests(); n != wave.manifests {
			t.Errorf("%s wave: %d manifest requests, want %d", wave.desc, n, wave.manifests)
		}
	}
	// A wrong password: the right output, one warning, no password.
	env[len(env)-1] = "REDIS_PASSWORD=wrong-" + password
	r := runCmd(t, t.TempDir(), in, env, bin)
	if r.err != nil || r.stdout != want {
		t.Fatalf("run with a wrong password: %v\n%s", r.err, r.stderr)
	}
	if strings.Count(r.stderr, "warning:") != 1 || !strings.Contains(r.stderr, "WRONGPASS") || strings.Contains(r.stderr, password) {
		t.Errorf("stderr = %q, want one warning without the password", r.stderr)
	}
}

// TestArgoCDRedis is two repo-server replicas whose sidecars point
// digestpin at one Redis (DIGESTPIN_CACHE and the password in
// REDIS_PASSWORD, as the README shows): the second replica asks no
// registry, writes the first one's output, and no replica keeps the cache
// on its own disk.
func TestArgoCDRedis(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	const password = "argocd-redis-auth"
	srv := testredis.Start(t, testredis.Options{Password: password})
	src := argoApp(t, registryValues(reg))
	sidecarEnv := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h", "REDIS_PASSWORD=" + password}
	initCmd, gen := pluginCommands(t)
	generate := func(sc *sidecar) result {
		t.Helper()
		env := append(sc.env("VALUES_FILES=values-e2e.yaml"), sidecarEnv...)
		if r := runCmd(t, src, nil, env, initCmd[0], initCmd[1:]...); r.err != nil {
			return r
		}
		return runCmd(t, src, nil, env, gen[0], gen[1:]...)
	}
	replicas := []*sidecar{newSidecar(t), newSidecar(t)}
	first := generate(replicas[0])
	if first.err != nil || first.stderr != "" {
		t.Fatalf("generate on replica 0: %v\n%s", first.err, first.stderr)
	}
	if n := reg.Count("HEAD manifests"); n != len(shopImages) {
		t.Errorf("replica 0: HEAD manifests = %d, want %d", n, len(shopImages))
	}
	reg.ResetCounts()
	second := generate(replicas[1])
	if second.err != nil || second.stdout != first.stdout {
		t.Fatalf("replica 1 wrote another output (err %v):\n%s", second.err, second.stderr)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("replica 1 made %d registry requests, want 0", n)
	}
	for i, sc := range replicas {
		if _, err := os.Stat(filepath.Join(sc.home, "cache")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("replica %d wrote to its cache folder (%v): the cache is on Redis", i, err)
		}
	}
}

// TestRedisMissingImageOneRequest runs several digestpin processes at
// once on a stream whose image the registry does not have, sharing one
// Redis: the registry is asked once in all, every process fails with the
// 404 naming the image, and none waits for the others in turn.
func TestRedisMissingImageOneRequest(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "team/app:1") // the repository exists; tag 1.0 does not
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 1, Images: []string{reg.Ref("team/app")}}); err != nil {
		t.Fatal(err)
	}
	reg.SetLatency(200 * time.Millisecond)
	reg.ResetCounts()
	srv := testredis.Start(t, testredis.Options{})
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h"}
	const procs = 6
	start := time.Now()
	outs := runProcs(t, bin, procs, buf.Bytes(), env, nil)
	took := time.Since(start)
	t.Logf("%d processes failed in %s, %d manifest requests", procs, took.Round(time.Millisecond), reg.Manifests())
	for i, r := range outs {
		if r.err == nil || r.stdout != "" || !strings.Contains(r.stderr, reg.Ref("team/app:1.0")) || !strings.Contains(r.stderr, "404") {
			t.Errorf("process %d: %v, stdout %d bytes, stderr %q; want a failure naming the image and the 404, nothing on stdout", i, r.err, len(r.stdout), r.stderr)
		}
	}
	if n := reg.Manifests(); n != 1 {
		t.Errorf("%d processes made %d manifest requests for one missing image, want 1", procs, n)
	}
	// One request of 200 ms and six process starts, not six requests in
	// turn (1.2 s and more).
	if took > 5*time.Second {
		t.Errorf("%d processes took %s to fail", procs, took)
	}
}
