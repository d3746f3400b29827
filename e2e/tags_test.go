//go:build unix

package e2e

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestTagPolicyHelmAndLock follows a semver policy through Helm 3's
// --post-renderer, then through the CI lock workflow with the binary,
// the policy set in the environment.
func TestTagPolicyHelmAndLock(t *testing.T) {
	t.Parallel()
	bin, h3 := digestpinBin(t), helm3(t)
	reg := testregistry.New(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	digests := map[string]string{}
	for i, tag := range []string{"1.0", "1.0.1", "1.0.2", "1.1.0", "2.0.0-rc.1"} {
		digests[tag] = reg.PushCreated(t, "app:"+tag, start.Add(time.Duration(i)*time.Minute)).String()
	}
	reg.PushImage(t, "db:1.0")
	reg.PushImage(t, "tools:1.0")
	chart := filepath.Join(repoRoot(t), "testdata", "chart")
	path := pathDir(t, map[string]string{"digestpin": bin})
	home := helmHome(t, path)
	args := []string{"template", "demo", chart,
		"--set", "image.app=" + reg.Ref("app:1.0"), "--set", "image.db=" + reg.Ref("db:1.0"), "--set", "image.tools=" + reg.Ref("tools:1.0")}
	policy := "--tag-policy=" + reg.Ref("app") + "=semver:~1.0"

	out := mustRun(t, home, h3, append(args, "--post-renderer", "digestpin", "--post-renderer-args", policy)...)
	want := reg.Ref("app:1.0.2@") + digests["1.0.2"]
	// The Deployment; Helm 3 never post-renders the migration Job, a hook.
	if n := strings.Count(out, want); n != 1 {
		t.Errorf("Helm 3 output has %q %d times, want 1:\n%s", want, n, out)
	}
	if !strings.Contains(out, reg.Ref("db:1.0@")) {
		t.Errorf("db:1.0 without a policy is not pinned as written:\n%s", out)
	}

	// CI: record, then replay offline, then a new patch is a difference.
	plain := mustRun(t, home, h3, args...)
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")
	env := []string{"DIGESTPIN_TAG_POLICY=" + reg.Ref("app") + "=semver:~1.0"}
	rec := runCmd(t, dir, []byte(plain), env, bin, "--write-lock", lock)
	if rec.err != nil || strings.Count(rec.stdout, want) != 2 {
		t.Fatalf("--write-lock: %v, want %q twice (the Deployment and the Job)\n%s%s", rec.err, want, rec.stdout, rec.stderr)
	}
	reg.ResetCounts()
	frozen := runCmd(t, dir, []byte(plain), env, bin, "--lock", lock, "--frozen")
	if frozen.err != nil || frozen.stdout != rec.stdout || reg.Total() != 0 {
		t.Errorf("--frozen: %v, output equal %t, %d requests; want nil, true, 0\n%s", frozen.err, frozen.stdout == rec.stdout, reg.Total(), frozen.stderr)
	}
	reg.PushCreated(t, "app:1.0.3", start.Add(time.Hour))
	check := runCmd(t, dir, []byte(plain), env, bin, "--lock", lock, "--check")
	if check.err == nil || check.stdout != "" {
		t.Fatalf("--check after 1.0.3 = %v with %d bytes out, want a failure and no output", check.err, len(check.stdout))
	}
	if want := reg.Ref("app") + ": policy semver:~1.0 chose 1.0.2, registry now has 1.0.3"; !strings.Contains(check.stderr, want) {
		t.Errorf("--check stderr lacks %q:\n%s", want, check.stderr)
	}
}

// TestKeelAnnotationsBinary: the binary, with --keel-annotations from the
// environment, follows a Deployment's keel.sh/policy and leaves a
// Deployment without one as it was.
func TestKeelAnnotationsBinary(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, tag := range []string{"1.4.1", "1.4.2", "1.5.0", "2.0.0"} {
		digests[tag] = reg.PushImage(t, "web:"+tag).String()
	}
	deploy := func(name, annotations string) string {
		return "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + annotations +
			"spec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: " + reg.Ref("web:1.4.1") + "\n"
	}
	in := deploy("keel", "  annotations:\n    keel.sh/policy: minor\n") + strings.ReplaceAll(deploy("plain", ""), "web:1.4.1", "web:1.4.2")
	res := runCmd(t, t.TempDir(), []byte(in), []string{"DIGESTPIN_KEEL_ANNOTATIONS=true"}, bin)
	if res.err != nil {
		t.Fatalf("digestpin: %v\n%s", res.err, res.stderr)
	}
	for _, want := range []string{reg.Ref("web:1.5.0@") + digests["1.5.0"], reg.Ref("web:1.4.2@") + digests["1.4.2"]} {
		if !strings.Contains(res.stdout, "image: "+want+"\n") {
			t.Errorf("output lacks %s:\n%s", want, res.stdout)
		}
	}
}

// TestTagPolicyRedisSharesChoices runs several digestpin processes at
// once with a tag policy and one Redis: the tags are listed once in all,
// and every process writes the chosen tag.
func TestTagPolicyRedisSharesChoices(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	for _, tag := range []string{"1.0", "1.0.1", "1.0.2", "1.1.0"} {
		reg.PushImage(t, "app:"+tag)
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 2, Images: []string{reg.Ref("app")}}); err != nil {
		t.Fatal(err)
	}
	reg.SetLatency(100 * time.Millisecond)
	reg.ResetCounts()
	srv := testredis.Start(t, testredis.Options{})
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1h", "DIGESTPIN_TAG_POLICY=" + reg.Ref("app") + "=semver:~1.0"}
	for wave := range 2 {
		outs := runProcs(t, bin, 4, buf.Bytes(), env, nil)
		for i, r := range outs {
			n := strings.Count(r.stdout, reg.Ref("app:1.0.2@sha256:"))
			if r.err != nil || n == 0 || n != strings.Count(r.stdout, "@sha256:") {
				t.Errorf("wave %d, process %d: %v, want every image pinned to app:1.0.2\n%s", wave, i, r.err, r.stderr)
			}
		}
	}
	// The first process to miss lists; the others wait for its choice.
	t.Logf("8 processes in two waves: %d tags/list requests", reg.Count("GET tags"))
	if n := reg.Count("GET tags"); n != 1 {
		t.Errorf("8 processes in two waves listed the tags %d times, want once", n)
	}
}
