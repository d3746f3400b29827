//go:build linux

package kube

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// The chart's images, as repo:tag on the registry, and the workloads that
// use each (e2e/kube/testdata/rollout).
var chartImages = []struct {
	repoTag, value string
	users          []string
}{
	{"app:1.0", "app", []string{"Deployment/web", "Deployment/api", "CronJob/report"}},
	{"tools:1.0", "tools", []string{"Deployment/api"}}, // an init container
	{"worker:1.0", "worker", []string{"Deployment/worker"}},
	{"db:1.0", "db", []string{"StatefulSet/db"}},
	{"agent:1.0", "agent", []string{"DaemonSet/agent"}},
}

// rollout is one test's registry, tools and control plane.
type rollout struct {
	c        *cluster
	reg      *testregistry.Registry
	bin      string
	helmHome []string // a throw-away Helm home, pointed at the cluster
}

func newRollout(t *testing.T) *rollout {
	t.Helper()
	r := &rollout{bin: digestpinBin(t), c: controlPlane(t), reg: testregistry.New(t)}
	for _, im := range chartImages {
		r.reg.PushImage(t, im.repoTag)
	}
	r.helmHome = newHelmHome(t, r.c)
	return r
}

// newHelmHome returns the environment of a throw-away Helm home, pointed
// at the cluster.
func newHelmHome(t *testing.T, c *cluster) []string {
	t.Helper()
	dir := t.TempDir()
	return append([]string{
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
		"HELM_PLUGINS=" + filepath.Join(dir, "data", "plugins"),
		// No plugin install hook reaches beyond loopback.
		"DIGESTPIN_PLUGIN_URL=http://127.0.0.1:1/no-release",
	}, c.env()...)
}

// chart is the rollout chart's folder.
func chart(t *testing.T) string {
	return filepath.Join(repoRoot(t), "e2e", "kube", "testdata", "rollout")
}

// sets points the chart's images at the registry.
func (r *rollout) sets() []string {
	var s []string
	for _, im := range chartImages {
		s = append(s, "--set", "image."+im.value+"="+r.reg.Ref(im.repoTag))
	}
	return s
}

// helmTemplate renders the chart with helm template (Helm 4) for ns.
func (r *rollout) helmTemplate(t *testing.T, ns string) string {
	t.Helper()
	return mustRun(t, nil, r.helmHome, helm4(t), append([]string{"template", "demo", chart(t), "-n", ns}, r.sets()...)...)
}

// pin runs stream through digestpin with args.
func (r *rollout) pin(t *testing.T, stream string, args ...string) string {
	t.Helper()
	return mustRun(t, []byte(stream), nil, r.bin, args...)
}

// push moves repoTag to a new image and returns the image's digest.
func (r *rollout) push(t *testing.T, repoTag string) v1.Hash {
	t.Helper()
	return r.reg.PushImage(t, repoTag)
}

// checkRuns checks that each workload in keys runs an image with digest d.
func checkRuns(t *testing.T, s state, d v1.Hash, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if !slices.ContainsFunc(s.workloads[k].images, func(im string) bool { return strings.HasSuffix(im, "@"+d.String()) }) {
			t.Errorf("%s runs %q, want an image pinned to %s", k, s.workloads[k].images, d)
		}
	}
}

// checkFirst checks that every workload of a first apply has exactly one
// revision.
func checkFirst(t *testing.T, s state) {
	t.Helper()
	if len(s.workloads) != 6 {
		t.Fatalf("%d workloads, want the chart's 6: %v", len(s.workloads), s.workloads)
	}
	for k, n := range s.revisions {
		if n != 1 {
			t.Errorf("%s has %d revisions after the first apply, want 1", k, n)
		}
	}
}

// moveEach re-pushes each of the chart's images in turn, re-deploys with
// deploy and checks that exactly the workloads that use it roll, each
// once.
func moveEach(t *testing.T, r *rollout, ns string, deploy func()) {
	t.Helper()
	for _, im := range chartImages {
		before := r.c.settle(t, ns)
		d := r.push(t, im.repoTag)
		deploy()
		after := r.c.settle(t, ns)
		checkMoves(t, im.repoTag+" re-pushed", before, after, im.users...)
		checkRuns(t, after, d, im.users...)
		figure(t, "%s re-pushed: %s", im.repoTag, summary(before, after))
	}
}

// repeat deploys n times and checks that nothing rolled.
func repeat(t *testing.T, r *rollout, ns string, n int, desc string, deploy func()) {
	t.Helper()
	before := r.c.settle(t, ns)
	for range n {
		deploy()
	}
	after := r.c.settle(t, ns)
	checkMoves(t, desc, before, after)
	figure(t, "%s: %s", desc, summary(before, after))
}

// TestFilterApply: `helm template | digestpin | kubectl apply
// --server-side`. The same render applied 10 times rolls nothing; each
// re-pushed tag rolls exactly the workloads that use it, once each; the
// same chart applied without digestpin never rolls.
func TestFilterApply(t *testing.T) {
	t.Parallel()
	r := newRollout(t)
	ns := r.c.namespace(t, "filter")
	deploy := func() { r.c.apply(t, ns, r.pin(t, r.helmTemplate(t, ns))) }
	deploy()
	first := r.c.settle(t, ns)
	checkFirst(t, first)
	for _, w := range first.workloads {
		for _, im := range w.images {
			if !strings.Contains(im, "@sha256:") || w.checksum == "" {
				t.Errorf("%s runs %s with checksum %q, want it pinned and a checksum", ns, im, w.checksum)
			}
		}
	}
	repeat(t, r, ns, 10, "10 re-applies of the same render", deploy)
	moveEach(t, r, ns, deploy)

	t.Run("control without digestpin", func(t *testing.T) {
		ns := r.c.namespace(t, "filter-control")
		deploy := func() { r.c.apply(t, ns, r.helmTemplate(t, ns)) }
		deploy()
		before := r.c.settle(t, ns)
		checkFirst(t, before)
		for _, im := range chartImages {
			r.push(t, im.repoTag)
		}
		deploy()
		after := r.c.settle(t, ns)
		checkMoves(t, "every tag re-pushed, applied without digestpin", before, after)
		figure(t, "every tag re-pushed, plain helm template applied: %s", summary(before, after))
	})
}

// TestHelmUpgrade: Helm 3.22.0 with `--post-renderer digestpin` and Helm
// 4.3.1 with the post-renderer plugin, install then upgrade: 10 upgrades
// with nothing moved roll nothing; each re-pushed tag rolls exactly the
// workloads that use it, once each; upgrades without the post-renderer
// never roll.
func TestHelmUpgrade(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		helm func(*testing.T) string
		// postRenderer returns the flags that post-render through digestpin.
		postRenderer func(t *testing.T, r *rollout, helm string) []string
	}{
		{name: "helm3", helm: helm3, postRenderer: func(t *testing.T, r *rollout, _ string) []string {
			return []string{"--post-renderer", r.bin}
		}},
		{name: "helm4", helm: helm4, postRenderer: func(t *testing.T, r *rollout, helm string) []string {
			installH4Plugin(t, r, helm)
			return []string{"--post-renderer", "digestpin-postrenderer"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRollout(t)
			helm := tc.helm(t)
			pr := tc.postRenderer(t, r, helm)
			ns := r.c.namespace(t, tc.name)
			control := r.c.namespace(t, tc.name+"-control")
			helmRun := func(ns, verb string, extra ...string) {
				args := append(append([]string{verb, "demo", chart(t), "-n", ns}, r.sets()...), extra...)
				mustRun(t, nil, r.helmHome, helm, args...)
			}
			helmRun(ns, "install", pr...)
			helmRun(control, "install")
			first := r.c.settle(t, ns)
			checkFirst(t, first)
			checkFirst(t, r.c.settle(t, control))
			upgrade := func() { helmRun(ns, "upgrade", pr...) }
			repeat(t, r, ns, 10, "10 upgrades with nothing moved", upgrade)
			moveEach(t, r, ns, upgrade)
			// The registry moved every tag; the control never rolled.
			repeat(t, r, control, 3, "every tag re-pushed, 3 upgrades without the post-renderer", func() { helmRun(control, "upgrade") })
		})
	}
}

// installH4Plugin installs the Helm 4 post-renderer plugin from a copy of
// plugin/digestpin-postrenderer, with the binary under test as its binary.
func installH4Plugin(t *testing.T, r *rollout, helm string) {
	t.Helper()
	installPlugin(t, r, helm, filepath.Join(repoRoot(t), "plugin", "digestpin-postrenderer"), "plugin.yaml", "scripts/install-binary.sh")
}

// installPlugin installs the plugin whose files (relative to dir) are
// files, from a copy (its install hook writes bin/ into the plugin's
// folder), with the binary under test as its binary.
func installPlugin(t *testing.T, r *rollout, helm, dir string, files ...string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f)) // follows a symlink
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, nil, append(r.helmHome, "DIGESTPIN_PLUGIN_BINARY="+r.bin), helm, "plugin", "install", dst)
}

// TestModes: --mode annotate leaves the image fields as they are and rolls
// through the checksum alone; --mode digest runs repo@digest. Both roll
// exactly the workloads whose image moved, and nothing when nothing moved.
func TestModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"annotate", "digest"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := newRollout(t)
			ns := r.c.namespace(t, "mode-"+mode)
			deploy := func() { r.c.apply(t, ns, r.pin(t, r.helmTemplate(t, ns), "--mode", mode)) }
			deploy()
			first := r.c.settle(t, ns)
			checkFirst(t, first)
			web := first.workloads["Deployment/web"]
			want := "web=" + r.reg.Ref("app:1.0")
			if mode == "digest" {
				want = "web=" + r.reg.Ref("app") + "@"
			}
			if len(web.images) != 1 || !strings.HasPrefix(web.images[0], want) || (mode == "annotate") != (web.images[0] == want) || web.checksum == "" {
				t.Errorf("--mode %s: Deployment/web runs %q with checksum %q, want %s…", mode, web.images, web.checksum, want)
			}
			repeat(t, r, ns, 3, "3 re-applies", deploy)

			before := r.c.settle(t, ns)
			d := r.push(t, "app:1.0")
			deploy()
			after := r.c.settle(t, ns)
			users := chartImages[0].users
			checkMoves(t, "app:1.0 re-pushed", before, after, users...)
			if mode == "digest" {
				checkRuns(t, after, d, users...)
			} else if got := after.workloads["Deployment/web"].images; !slices.Equal(got, before.workloads["Deployment/web"].images) {
				t.Errorf("--mode annotate: Deployment/web runs %q, was %q: the image field changed", got, before.workloads["Deployment/web"].images)
			}
			figure(t, "app:1.0 re-pushed: %s", summary(before, after))
		})
	}
}
