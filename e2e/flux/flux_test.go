//go:build linux

package flux

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testgit"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestFlux runs the scenarios under one running Flux, each with a
// repository, a namespace and a registry of its own.
func TestFlux(t *testing.T) {
	f := startFlux(t)
	t.Run("GitRoute", func(t *testing.T) { testGitRoute(t, f) })
	t.Run("OCIArtifact", func(t *testing.T) { testOCIArtifact(t, f) })
	t.Run("OCIArtifactKeyless", func(t *testing.T) { testOCIArtifactKeyless(t, f) })
	t.Run("OCIChart", func(t *testing.T) { testOCIChart(t, f) })
	t.Run("KustomizationPatches", func(t *testing.T) { testKustomizationPatches(t, f) })
}

// fleetFiles returns the files of testdata/fleet, with REGISTRY replaced
// by host.
func fleetFiles(t *testing.T, host string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join("testdata", "fleet")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files[rel] = strings.ReplaceAll(string(testfiles.Read(t, p)), "REGISTRY", host)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// pathDir returns a folder for PATH with what a CI job of docs/flux.md
// runs: digestpin (and its full build beside it, as a release archive
// has them), kustomize, and extra (name → binary).
func (f *fluxCD) pathDir(t *testing.T, extra map[string]string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	digestpin := tool(t, "DIGESTPIN_TEST_BIN")
	links := map[string]string{
		"digestpin":      digestpin,
		"digestpin-helm": filepath.Join(filepath.Dir(digestpin), "digestpin-helm"),
		"kustomize":      tool(t, "DIGESTPIN_TEST_KUSTOMIZE"),
	}
	maps.Copy(links, extra)
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// ciJob is the CI step of docs/flux.md (scripts/ci/digestpin-ci.sh, mode
// flux, as the Action and the GitLab template run it) in a fresh clone of
// repo, as a pipeline runs it. It returns the step's stderr and the
// commit main is at after it.
func (f *fluxCD) ciJob(t *testing.T, repo *testgit.Repo, files ...string) (string, string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	testgit.Git(t, "", "clone", "--quiet", "file://"+repo.Bare, work)
	env := append([]string{
		"PATH=" + f.pathDir(t, nil) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DIGESTPIN_CI_MODE=flux",
		"DIGESTPIN_CI_FLUX_FILES=" + strings.Join(files, " "),
	}, testgit.Env...)
	res := testfiles.Run(nil, env, "bash", "-c", `cd "$1" && exec "$2"`, "ci", work, filepath.Join(repoRoot(), "scripts", "ci", "digestpin-ci.sh"))
	if res.Err != nil {
		t.Fatalf("the CI step: %v\n%s", res.Err, res.Stderr)
	}
	return res.Stderr, testgit.Git(t, repo.Bare, "rev-parse", "main")
}

// images returns the image of each Deployment in ns (one container each).
func (f *fluxCD) images(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := f.kubectl(t, nil, "-n", ns, "get", "deployments", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.template.spec.containers[0].image}{"\n"}{end}`)
	got := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if name, img, ok := strings.Cut(l, "="); ok {
			got[name] = img
		}
	}
	return got
}

// wantImages fails the test unless every Deployment in ns, and no other,
// runs host/shop/SVC:dev at digests[SVC], SVC the Deployment's name or
// what svc maps it to.
func (f *fluxCD) wantImages(t *testing.T, ns, host string, digests, svc map[string]string) {
	t.Helper()
	want := map[string]string{}
	for dep, d := range digests {
		want[dep] = host + "/shop/" + dep + ":dev@" + d
	}
	for dep, s := range svc {
		want[dep] = host + "/shop/" + s + ":dev@" + digests[s]
	}
	if got := f.images(t, ns); !maps.Equal(got, want) {
		t.Fatalf("the Deployments of %s run\n%v\nwant\n%v", ns, got, want)
	}
}

// testGitRoute is docs/flux.md's git route under Flux's controllers: a
// GitRepository of the shop's repository, a Kustomization that applies
// its clusters/ folder (the HelmRelease web, of the repository's chart,
// and the Kustomization shop-apps of its apps/ folder), and the CI step
// that pins both files. The first pins roll out with one ReplicaSet per
// Deployment; with nothing moved the CI step commits nothing and
// repeated reconciles make no ReplicaSet; a tag pushed again gets one
// commit from the CI step, and exactly the two Deployments that run it
// (one from the chart, one from the Kustomization) roll, once.
func testGitRoute(t *testing.T, f *fluxCD) {
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, svc := range []string{"web", "api", "worker"} {
		digests[svc] = reg.PushImage(t, "shop/"+svc+":dev").String()
	}
	repo := f.git.Repo(t, "shop")
	files := fleetFiles(t, reg.Host())
	files["clusters/shop-kustomization.yaml"] = string(docsFile(t, "clusters/shop-kustomization.yaml", repo.URL, reg.Host()))
	first := repo.Commit(t, "the shop", files)
	pinned := []string{"clusters/web.yaml", "clusters/shop-kustomization.yaml"}

	stderr, head := f.ciJob(t, repo, pinned...)
	if head == first {
		t.Fatalf("the CI step committed nothing:\n%s", stderr)
	}
	f.kubectl(t, docsFile(t, "flux-system/shop.yaml", repo.URL, reg.Host()), "apply", "-f", "-")

	// want says each Deployment runs its image at the digest of digests.
	want := func(t *testing.T) {
		t.Helper()
		f.wantImages(t, "shop", reg.Host(), digests, map[string]string{"web-canary": "web"})
		// The chart's post-install and post-upgrade hook.
		hook := f.kubectl(t, nil, "-n", "shop", "get", "cronjob", "cleanup", "-o", "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].image}")
		if want := reg.Host() + "/shop/api:dev@" + digests["api"]; hook != want {
			t.Fatalf("the hook runs %s, want %s", hook, want)
		}
	}
	rolled := func(t *testing.T, head string) {
		t.Helper()
		rev := "main@sha1:" + head
		f.wait(t, "gitrepository", fluxNamespace, "shop", "at "+rev, func(o object) bool {
			return o.ready() && o.Status.Artifact != nil && o.Status.Artifact.Revision == rev
		})
		for _, k := range []string{"shop", "shop-apps"} {
			f.wait(t, "kustomization", fluxNamespace, k, "applied "+rev, func(o object) bool {
				return o.ready() && o.Status.LastAppliedRevision == rev
			})
		}
		f.wait(t, "helmrelease", "shop", "web", "released", object.ready)
	}
	rolled(t, head)
	want(t)
	rs := map[string]int{"web": 1, "api": 1, "worker": 1, "web-canary": 1}
	if got := f.replicaSets(t, "shop"); !maps.Equal(got, rs) {
		t.Fatalf("first rollout: ReplicaSets %v, want %v", got, rs)
	}

	// Nothing moved: no commit, and reconciles of everything make no
	// ReplicaSet.
	stderr, again := f.ciJob(t, repo, pinned...)
	if again != head {
		t.Fatalf("nothing moved, yet the CI step committed %s:\n%s", again, stderr)
	}
	for range 2 {
		f.reconcile(t, "gitrepository", fluxNamespace, "shop")
		f.reconcile(t, "kustomization", fluxNamespace, "shop")
		f.reconcile(t, "kustomization", fluxNamespace, "shop-apps")
		f.reconcile(t, "helmrelease", "shop", "web")
	}
	if got := f.replicaSets(t, "shop"); !maps.Equal(got, rs) {
		t.Fatalf("nothing moved: ReplicaSets %v, want %v", got, rs)
	}
	if n := len(f.get(t, "helmrelease", "shop", "web").Status.History); n != 1 {
		t.Errorf("nothing moved: %d Helm release versions, want 1 (an upgrade ran)", n)
	}

	// web:dev pushed again: one commit, which says what moved, and web
	// and web-canary roll, once.
	before := digests["web"]
	digests["web"] = reg.PushImage(t, "shop/web:dev").String()
	stderr, moved := f.ciJob(t, repo, pinned...)
	if moved == head {
		t.Fatalf("web:dev moved, yet the CI step committed nothing:\n%s", stderr)
	}
	if n := testgit.Git(t, repo.Bare, "rev-list", "--count", head+"..main"); n != "1" {
		t.Errorf("web:dev moved: %s commits, want 1", n)
	}
	msg := testgit.Git(t, repo.Bare, "log", "-1", "--format=%B", "main")
	if want := reg.Host() + "/shop/web:dev " + strings.TrimPrefix(before, "sha256:")[:12] + " → " + strings.TrimPrefix(digests["web"], "sha256:")[:12]; !strings.Contains(msg, want) {
		t.Errorf("web:dev moved: the commit's message does not say %q:\n%s", want, msg)
	}
	changed := strings.Fields(testgit.Git(t, repo.Bare, "diff", "--name-only", head, "main"))
	if want := []string{"clusters/shop-kustomization.yaml", "clusters/web.yaml"}; !slices.Equal(changed, want) {
		t.Errorf("web:dev moved: the commit changes %v, want %v", changed, want)
	}
	f.reconcile(t, "gitrepository", fluxNamespace, "shop")
	rolled(t, moved)
	want(t)
	rs["web"], rs["web-canary"] = 2, 2
	if got := f.replicaSets(t, "shop"); !maps.Equal(got, rs) {
		t.Fatalf("web:dev moved: ReplicaSets %v, want %v", got, rs)
	}
	for range 2 {
		f.reconcile(t, "kustomization", fluxNamespace, "shop-apps")
		f.reconcile(t, "helmrelease", "shop", "web")
	}
	if got := f.replicaSets(t, "shop"); !maps.Equal(got, rs) {
		t.Fatalf("web:dev moved, then reconciled twice: ReplicaSets %v, want %v", got, rs)
	}
	t.Logf("ReplicaSets: first rollout 1 each; nothing moved (2 reconciles) +0; web:dev pushed again: web +1, web-canary +1, api +0, worker +0")
}
