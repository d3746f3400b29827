//go:build linux

package argocd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// testRefreshCommand: `digestpin argocd refresh IMAGE` after a push (here
// through the CI step's mode refresh) hard-refreshes exactly the Applications that run IMAGE: they render
// again (their images are asked for at the registry), see the new digest
// and roll once on sync; the others are not touched. --dry-run only lists;
// no match says so and exits 0; an RBAC-limited token gets a one-line
// error naming what was refused.
func testRefreshCommand(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "web:dev")
	reg.PushImage(t, "api:dev")
	webRequests, apiRequests := countRepo(reg, "web"), countRepo(reg, "api")
	repo := a.git.Repo(t, "refresh")
	files := map[string]string{}
	for dir, image := range map[string]string{"web": "web", "web2": "web", "api": "api"} {
		for p, content := range chartFiles(t, "single", dir, reg.Host()) {
			files[p] = strings.Replace(content, "image: app", "image: "+image, 1)
		}
	}
	repo.Commit(t, "three apps", files)
	names := []string{"r-web", "r-web2", "r-api"}
	for _, n := range names {
		a.create(t, app{name: n, ns: n, repo: repo, path: strings.TrimPrefix(n, "r-")})
	}
	before := map[string]map[string]int{}
	for _, n := range names {
		a.reconciled(t, n)
		a.sync(t, n)
		before[n] = a.replicaSets(t, n)
		// The summary lists the live images once the synced Deployment
		// is in the controller's cache.
		a.waitApp(t, n, "images in status.summary", func(ap application) bool { return len(ap.Status.Summary.Images) > 0 })
	}

	web := reg.Ref("web:dev")
	dp := func(args ...string) result {
		return run(nil, a.kubeEnv(), a.bin, append([]string{"argocd", "refresh"}, args...)...)
	}

	// --dry-run lists both web Applications, touches none.
	reg.PushImage(t, "web:dev")
	webRequests.Store(0)
	apiRequests.Store(0)
	res := dp("--dry-run", web)
	want := "would refresh argocd/r-web (runs " + web + "@"
	if res.err != nil || !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "argocd/r-web2") || strings.Contains(res.stdout, "r-api") {
		t.Fatalf("refresh --dry-run %s: %v\nstdout %q\nstderr %q; want r-web and r-web2 listed", web, res.err, res.stdout, res.stderr)
	}
	for _, n := range names {
		if _, pending := a.get(t, n).Metadata.Annotations["argocd.argoproj.io/refresh"]; pending {
			t.Errorf("--dry-run: %s has the refresh annotation", n)
		}
	}

	// The refresh, as the CI step does it (the GitHub Action's and the
	// GitLab template's mode refresh run digestpin-ci.sh so): both web
	// Applications render again and see the push; r-api does not render
	// at all.
	res = run(nil, append(a.kubeEnv(), "DIGESTPIN="+a.bin, "DIGESTPIN_CI_MODE=refresh", "DIGESTPIN_CI_IMAGES= "+web+"\n"),
		"bash", filepath.Join(repoRoot(), "scripts", "ci", "digestpin-ci.sh"))
	if res.err != nil || strings.Count(res.stdout, "refreshed ") != 2 || !strings.Contains(res.stdout, "refreshed argocd/r-web (runs ") || !strings.Contains(res.stdout, "refreshed argocd/r-web2 (runs ") {
		t.Fatalf("refresh %s: %v\nstdout %q\nstderr %q; want r-web and r-web2 refreshed", web, res.err, res.stdout, res.stderr)
	}
	t.Logf("figure: digestpin argocd refresh %s:\n%s", web, res.stdout)
	for _, n := range []string{"r-web", "r-web2"} {
		if ap := a.refreshed(t, n); syncStatus(ap) != "OutOfSync" {
			t.Errorf("%s after the refresh: sync status %q, want OutOfSync (the new digest)", n, syncStatus(ap))
		}
		a.sync(t, n)
	}
	if ap := a.get(t, "r-api"); syncStatus(ap) != "Synced" {
		t.Errorf("r-api after the refresh of web: sync status %q, want Synced", syncStatus(ap))
	}
	a.sync(t, "r-api")
	for _, n := range names {
		wantSets := 0
		if n != "r-api" {
			wantSets = 1
		}
		got := a.replicaSets(t, n)
		if d := got[n] - before[n][n]; d != wantSets {
			t.Errorf("%s: %d new ReplicaSets, want %d", n, d, wantSets)
		}
	}
	if w, p := webRequests.Load(), apiRequests.Load(); w != 2 || p != 0 {
		t.Errorf("refresh of %s: the registry saw %d manifest requests for web and %d for api, want 2 (one render each of r-web, r-web2) and 0", web, w, p)
	}
	t.Logf("figure: refresh after a push of web:dev: r-web +1, r-web2 +1, r-api +0 ReplicaSets; registry: web %d requests, api %d", webRequests.Load(), apiRequests.Load())

	// No Application runs it: said, exit 0.
	res = dp(reg.Ref("web:other"))
	if res.err != nil || !strings.Contains(res.stdout, "no Application in any namespace runs "+reg.Ref("web:other")) {
		t.Errorf("refresh of an image no Application runs: %v, stdout %q, stderr %q", res.err, res.stdout, res.stderr)
	}

	// A token that may list Applications in argocd but not patch them,
	// nor list them cluster-wide.
	kc := a.limitedKubeconfig(t, "ci", "get", "list")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{web}, []string{`cannot list resource "applications" in API group "argoproj.io" at the cluster scope`, "system:serviceaccount:argocd:ci"}},
		{[]string{"-n", "argocd", web}, []string{`refreshing Application argocd/r-web:`, `cannot patch resource "applications" in API group "argoproj.io" in the namespace "argocd"`}},
	} {
		res := run(nil, []string{"KUBECONFIG=" + kc}, a.bin, append([]string{"argocd", "refresh"}, tc.args...)...)
		if res.err == nil {
			t.Errorf("refresh %v with the limited token: succeeded, want a refusal\n%s", tc.args, res.stdout)
			continue
		}
		first, _, _ := strings.Cut(res.stderr, "\n")
		for _, w := range tc.want {
			if !strings.Contains(first, w) {
				t.Errorf("refresh %v with the limited token: stderr %q, want its first line to contain %q", tc.args, res.stderr, w)
			}
		}
		t.Logf("figure: refresh %v, limited token: %s", tc.args, first)
	}
}
