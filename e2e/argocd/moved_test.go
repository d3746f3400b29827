//go:build linux

package argocd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// testRefreshMoved: `digestpin argocd refresh --moved` on a schedule's
// terms. A tag re-pushed with nobody calling refresh: one run refreshes
// exactly the Application that runs it, whose Deployment rolls once on
// sync; a second run finds nothing moved and refreshes nothing; a
// registry outage refreshes nothing and says so in a line per image,
// exit 1. 20 Applications sharing 5 images cost 5 registry requests; a
// token that may list but not patch gets one line naming the verb.
func testRefreshMoved(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "web:dev")
	reg.PushImage(t, "api:dev")
	webRequests, apiRequests := countRepo(reg, "web"), countRepo(reg, "api")
	repo := a.git.Repo(t, "moved")
	files := map[string]string{}
	for dir, image := range map[string]string{"web": "web", "api": "api"} {
		for p, content := range chartFiles(t, "single", dir, reg.Host()) {
			files[p] = strings.Replace(content, "image: app", "image: "+image, 1)
		}
	}
	repo.Commit(t, "two apps", files)
	names := []string{"m-web", "m-api"}
	labels := map[string]string{"digestpin.dev/test": "moved"}
	for _, n := range names {
		a.create(t, app{name: n, ns: n, repo: repo, path: strings.TrimPrefix(n, "m-"), labels: labels})
	}
	before := map[string]int{}
	for _, n := range names {
		a.reconciled(t, n)
		a.sync(t, n)
		before[n] = a.replicaSets(t, n)[n]
		a.waitApp(t, n, "images in status.summary", func(ap application) bool { return len(ap.Status.Summary.Images) > 0 })
	}
	moved := func(env []string, args ...string) result {
		return run(nil, append(a.kubeEnv(), env...), a.bin, append([]string{"argocd", "refresh", "--moved", "-n", argocdNamespace, "-l", "digestpin.dev/test=moved"}, args...)...)
	}
	pending := func(n string) bool {
		_, ok := a.get(t, n).Metadata.Annotations["argocd.argoproj.io/refresh"]
		return ok
	}

	// Nothing moved yet: nothing refreshed, one request per tag.
	webRequests.Store(0)
	apiRequests.Store(0)
	res := moved(nil)
	if res.err != nil || !strings.Contains(res.stdout, "2 Application(s) in the namespace argocd render through digestpin, 2 distinct tag(s) checked, 0 moved: refreshed 0") {
		t.Fatalf("--moved with nothing moved: %v\nstdout %q\nstderr %q", res.err, res.stdout, res.stderr)
	}
	if w, p := webRequests.Load(), apiRequests.Load(); w != 1 || p != 1 {
		t.Errorf("--moved with nothing moved: %d manifest requests for web, %d for api, want 1 each", w, p)
	}

	// web:dev pushed again, nobody calls refresh: one run refreshes m-web
	// alone.
	newWeb := reg.PushImage(t, "web:dev").String()
	webRequests.Store(0)
	apiRequests.Store(0)
	res = moved(nil, "--dry-run")
	if res.err != nil || !strings.Contains(res.stdout, "would refresh argocd/m-web: "+reg.Ref("web:dev")+" ") || strings.Contains(res.stdout, "m-api:") || pending("m-web") {
		t.Fatalf("--moved --dry-run: %v\nstdout %q\nstderr %q; want m-web listed, nothing refreshed", res.err, res.stdout, res.stderr)
	}
	res = moved(nil)
	want := "refreshed argocd/m-web: " + reg.Ref("web:dev") + " "
	if res.err != nil || !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "→ "+newWeb[7:19]) || strings.Contains(res.stdout, "m-api:") {
		t.Fatalf("--moved after a push: %v\nstdout %q\nstderr %q; want m-web refreshed to %s", res.err, res.stdout, res.stderr, newWeb)
	}
	t.Logf("figure: digestpin argocd refresh --moved after web:dev was pushed:\n%s", res.stdout)
	if ap := a.refreshed(t, "m-web"); syncStatus(ap) != "OutOfSync" {
		t.Errorf("m-web after --moved: sync status %q, want OutOfSync (the new digest)", syncStatus(ap))
	}
	if pending("m-api") {
		t.Error("m-api was asked for a refresh, and nothing of it moved")
	}
	a.sync(t, "m-web")
	a.sync(t, "m-api")
	for _, n := range names {
		wantSets := map[string]int{"m-web": 1, "m-api": 0}[n]
		if d := a.replicaSets(t, n)[n] - before[n]; d != wantSets {
			t.Errorf("%s: %d new ReplicaSets after --moved, want %d", n, d, wantSets)
		}
	}
	// The dry run and the run asked once each, and m-web's render once.
	if w, p := webRequests.Load(), apiRequests.Load(); w != 3 || p != 2 {
		t.Errorf("after the push: %d manifest requests for web, %d for api, want 3 (two runs, one render) and 2 (two runs)", w, p)
	}
	a.waitApp(t, "m-web", "the new digest in status.summary", func(ap application) bool {
		return slices.ContainsFunc(ap.Status.Summary.Images, func(im string) bool { return strings.HasSuffix(im, "@"+newWeb) })
	})

	// A second run: nothing moved, nothing refreshed, no new ReplicaSet.
	res = moved(nil)
	if res.err != nil || !strings.Contains(res.stdout, "0 moved: refreshed 0") || pending("m-web") || pending("m-api") {
		t.Errorf("second --moved: %v\nstdout %q\nstderr %q; want nothing refreshed", res.err, res.stdout, res.stderr)
	}
	for _, n := range names {
		wantSets := map[string]int{"m-web": 1, "m-api": 0}[n]
		if d := a.replicaSets(t, n)[n] - before[n]; d != wantSets {
			t.Errorf("%s: %d new ReplicaSets after the second run, want still %d", n, d, wantSets)
		}
	}

	// The registry is down: no refresh, a line per tag, exit 1.
	reg.PushImage(t, "web:dev")
	var down atomic.Bool
	down.Store(true)
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() && strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	res = moved(nil)
	down.Store(false)
	if res.err == nil || strings.Contains(res.stdout, "refreshed argocd/") || pending("m-web") || pending("m-api") {
		t.Errorf("--moved with the registry down: %v\nstdout %q\nstderr %q; want exit 1 and nothing refreshed", res.err, res.stdout, res.stderr)
	}
	if n := strings.Count(res.stderr, "not checked, its Applications are not refreshed"); n != 2 || strings.Contains(res.stderr, "unpinned") {
		t.Errorf("--moved with the registry down: stderr %q, want a line for each of the 2 tags", res.stderr)
	}
	t.Logf("figure: --moved with the registry down:\n%s%s", res.stdout, res.stderr)

	// 20 Applications (in a namespace the controller does not watch, so
	// that their status stays as written) sharing 5 images: 5 requests.
	const ns = "moved-count"
	a.kubectl(t, nil, "create", "namespace", ns)
	counts := map[string]interface{ Load() int64 }{}
	var images []string
	for i := range 5 {
		name := fmt.Sprintf("shared%d", i)
		reg.PushImage(t, name+":1")
		counts[name] = countRepo(reg, name)
		images = append(images, reg.Ref(name+":1")+"@sha256:"+strings.Repeat(fmt.Sprint(i), 64))
	}
	var list []any
	for i := range 20 {
		list = append(list, map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": fmt.Sprintf("c%02d", i), "namespace": ns},
			"spec": map[string]any{"project": "default", "destination": map[string]any{"server": inCluster, "namespace": ns},
				"source": map[string]any{"repoURL": repo.URL, "path": "web", "plugin": map[string]any{"name": pluginName}}},
			"status": map[string]any{"summary": map[string]any{"images": []string{images[i%5], images[(i+1)%5]}}},
		})
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
	if err != nil {
		t.Fatal(err)
	}
	a.kubectl(t, b, "create", "-f", "-")
	res = run(nil, a.kubeEnv(), a.bin, "argocd", "refresh", "--moved", "--dry-run", "-n", ns)
	if res.err != nil || strings.Count(res.stdout, "would refresh "+ns+"/") != 20 || !strings.Contains(res.stdout, "20 Application(s) in the namespace moved-count render through digestpin, 5 distinct tag(s) checked, 20 moved: would refresh 20") {
		t.Errorf("--moved over 20 Applications: %v\nstdout %q\nstderr %q", res.err, res.stdout, res.stderr)
	}
	total := int64(0)
	for name, c := range counts {
		if n := c.Load(); n != 1 {
			t.Errorf("%s: %d manifest requests, want 1", name, n)
		}
		total += c.Load()
	}
	t.Logf("figure: --moved over 20 Applications sharing 5 images: %d registry manifest requests", total)

	// A token that may list Applications but not patch them.
	kc := a.limitedKubeconfig(t, "moved-ci", "list")
	reg.PushImage(t, "api:dev")
	res = run(nil, []string{"KUBECONFIG=" + kc}, a.bin, "argocd", "refresh", "--moved", "-n", argocdNamespace, "-l", "digestpin.dev/test=moved")
	first, _, _ := strings.Cut(res.stderr, "\n")
	if res.err == nil || !strings.Contains(first, "refreshing Application argocd/m-api") || !strings.Contains(first, `cannot patch resource "applications" in API group "argoproj.io" in the namespace "argocd"`) {
		t.Errorf("--moved with a token that cannot patch: %v\nstdout %q\nstderr %q", res.err, res.stdout, res.stderr)
	}
	t.Logf("figure: --moved, token without patch: %s", first)
}

// testImageUpdaterHandOff: a tag that Argo CD Image Updater writes into
// the Application's plugin environment (write-back method argocd, a
// manifestTargets.plugin tag entry) reaches the chart through the
// plugin's set-from-env parameter and is pinned to its digest; when
// Image Updater writes the next tag, that tag's digest is pinned.
func testImageUpdaterHandOff(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "web:dev")
	v2 := reg.PushImage(t, "web:v2").String()
	v3 := reg.PushImage(t, "web:v3").String()
	repo := a.git.Repo(t, "image-updater")
	files := map[string]string{}
	for p, content := range chartFiles(t, "single", "iu", reg.Host()) {
		files[p] = strings.Replace(content, "image: app", "image: web", 1)
	}
	repo.Commit(t, "one app", files)
	const name = "iu-web"
	a.create(t, app{name: name, ns: name, repo: repo, path: "iu", env: []string{"WEB_IMAGE_TAG=v2"},
		params: []map[string]any{{"name": "set-from-env", "map": map[string]any{"tag": "WEB_IMAGE_TAG"}}}})
	a.reconciled(t, name)
	a.sync(t, name)
	want := reg.Ref("web:v2") + "@" + v2
	a.waitApp(t, name, "web:v2 pinned in status.summary", func(ap application) bool {
		return slices.Contains(ap.Status.Summary.Images, want)
	})
	// Image Updater writes the next tag into the same env entry.
	a.kubectl(t, nil, "-n", argocdNamespace, "patch", "application", name, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/source/plugin/env/0/value","value":"v3"}]`)
	a.waitApp(t, name, "OutOfSync for web:v3", func(ap application) bool { return syncStatus(ap) == "OutOfSync" })
	a.sync(t, name)
	want = reg.Ref("web:v3") + "@" + v3
	ap := a.waitApp(t, name, "web:v3 pinned in status.summary", func(ap application) bool {
		return slices.Contains(ap.Status.Summary.Images, want)
	})
	t.Logf("figure: Image Updater hand-off: status.summary.images %q", ap.Status.Summary.Images)
}
