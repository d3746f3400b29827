//go:build linux

package argocd

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// chartFiles returns the files of testdata/NAME under the repository path
// dest, with REGISTRY replaced by host.
func chartFiles(t *testing.T, name, dest, host string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join("testdata", name)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files[filepath.Join(dest, rel)] = strings.ReplaceAll(string(b), "REGISTRY", host)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestArgoCD runs the scenarios under one running Argo CD, each in a
// namespace, a repository and (where it counts requests) a registry of
// its own.
func TestArgoCD(t *testing.T) {
	a := startArgoCD(t)
	t.Run("MutableTag", func(t *testing.T) { testMutableTag(t, a) })
	t.Run("CacheTTL", func(t *testing.T) { testCacheTTL(t, a) })
	t.Run("GeneratedCert", func(t *testing.T) { testGeneratedCert(t, a) })
	t.Run("Lock", func(t *testing.T) { testLock(t, a) })
	t.Run("MissingImage", func(t *testing.T) { testMissingImage(t, a) })
	t.Run("RefreshCommand", func(t *testing.T) { testRefreshCommand(t, a) })
	t.Run("RefreshMoved", func(t *testing.T) { testRefreshMoved(t, a) })
	t.Run("ImageUpdaterHandOff", func(t *testing.T) { testImageUpdaterHandOff(t, a) })
}

// testMutableTag: a tag pushed again rolls, after a hard refresh and a
// sync, exactly the Deployments that run it, once; each hard refresh asks
// the registry once per image, and nothing else does.
func testMutableTag(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:dev")
	reg.PushImage(t, "api:1.0")
	repo := a.git.Repo(t, "shop")
	repo.Commit(t, "shop chart", chartFiles(t, "shop", "shop", reg.Host()))
	a.create(t, app{name: "shop", ns: "shop", repo: repo, path: "shop"})

	if ap := a.reconciled(t, "shop"); syncStatus(ap) != "OutOfSync" {
		t.Fatalf("new Application: sync status %q, want OutOfSync (conditions %v)", syncStatus(ap), ap.Status.Conditions)
	}
	a.sync(t, "shop")
	first := a.replicaSets(t, "shop")
	if got := newSets(map[string]int{}, first); got != "api +1, web +1, worker +1" {
		t.Fatalf("first sync: %s, want one ReplicaSet each", got)
	}

	// Nothing moved: a hard refresh renders again (one request per
	// image), the Application stays Synced, a sync rolls nothing.
	reg.ResetCounts()
	if ap := a.hardRefresh(t, "shop"); syncStatus(ap) != "Synced" {
		t.Fatalf("hard refresh, nothing pushed: sync status %q, want Synced", syncStatus(ap))
	}
	if n := reg.Manifests(); n != 2 {
		t.Errorf("hard refresh: %d manifest requests at the registry, want 2 (app:dev, api:1.0)", n)
	}
	a.sync(t, "shop")
	same := a.replicaSets(t, "shop")
	if got := newSets(first, same); got != "api +0, web +0, worker +0" {
		t.Errorf("hard refresh and sync, nothing pushed: %s, want no new ReplicaSet", got)
	}

	// app:dev pushed again: the hard refresh sees it, the sync rolls web
	// and worker once, api not at all.
	reg.PushImage(t, "app:dev")
	reg.ResetCounts()
	if ap := a.hardRefresh(t, "shop"); syncStatus(ap) != "OutOfSync" {
		t.Fatalf("hard refresh after the push: sync status %q, want OutOfSync", syncStatus(ap))
	}
	if n := reg.Manifests(); n != 2 {
		t.Errorf("hard refresh after the push: %d manifest requests, want 2", n)
	}
	a.sync(t, "shop")
	rolled := a.replicaSets(t, "shop")
	got := newSets(same, rolled)
	if got != "api +0, web +1, worker +1" {
		t.Errorf("push of app:dev, hard refresh, sync: %s, want web and worker +1", got)
	}
	t.Logf("figure: push of app:dev, hard refresh, sync: %s", got)

	// Once: another hard refresh and sync roll nothing more.
	if ap := a.hardRefresh(t, "shop"); syncStatus(ap) != "Synced" {
		t.Errorf("second hard refresh: sync status %q, want Synced", syncStatus(ap))
	}
	a.sync(t, "shop")
	if got := newSets(rolled, a.replicaSets(t, "shop")); got != "api +0, web +0, worker +0" {
		t.Errorf("second hard refresh and sync: %s, want no new ReplicaSet", got)
	}
}

// testCacheTTL: with DIGESTPIN_CACHE_TTL the registry sees one request per
// image per TTL, however many hard refreshes; a push inside the TTL shows
// after it, and then rolls exactly the Deployments that use the tag.
func testCacheTTL(t *testing.T, a *argoCD) {
	const ttl = 40 * time.Second
	reg := testregistry.New(t)
	reg.PushImage(t, "app:dev")
	reg.PushImage(t, "api:1.0")
	reg.ResetCounts() // the pushes
	repo := a.git.Repo(t, "shop-cached")
	repo.Commit(t, "shop chart", chartFiles(t, "shop", "shop", reg.Host()))
	a.create(t, app{name: "shop-cached", ns: "shop-cached", repo: repo, path: "shop", env: []string{"DIGESTPIN_CACHE_TTL=" + ttl.String()}})
	begin := time.Now() // no resolution is older
	a.reconciled(t, "shop-cached")
	rendered := time.Now() // no resolution is younger
	a.sync(t, "shop-cached")
	first := a.replicaSets(t, "shop-cached")

	// Hard refreshes inside the TTL: no request beyond the first render's.
	refreshes, requests := 0, 0
	for refreshes < 5 && time.Since(begin) < ttl-10*time.Second {
		a.hardRefresh(t, "shop-cached")
		refreshes++
		if refreshes == 1 {
			// A push inside the TTL is not seen yet (its own requests
			// are not counted).
			requests += reg.Manifests()
			reg.PushImage(t, "app:dev")
			reg.ResetCounts()
		}
	}
	if refreshes < 2 {
		t.Fatalf("only %d hard refreshes fit in the TTL (%s): the machine is too slow for this test", refreshes, ttl)
	}
	if n := requests + reg.Manifests(); n != 2 {
		t.Errorf("first render and %d hard refreshes inside the TTL: %d manifest requests, want 2 (one per image)", refreshes, n)
	}
	if ap := a.get(t, "shop-cached"); syncStatus(ap) != "Synced" {
		t.Errorf("inside the TTL, after the push: sync status %q, want Synced (the cached digest)", syncStatus(ap))
	}

	// After the TTL: one request per image again, the push is seen.
	time.Sleep(time.Until(rendered.Add(ttl + time.Second)))
	reg.ResetCounts()
	if ap := a.hardRefresh(t, "shop-cached"); syncStatus(ap) != "OutOfSync" {
		t.Errorf("hard refresh after the TTL: sync status %q, want OutOfSync", syncStatus(ap))
	}
	if n := reg.Manifests(); n != 2 {
		t.Errorf("hard refresh after the TTL: %d manifest requests, want 2", n)
	}
	a.sync(t, "shop-cached")
	got := newSets(first, a.replicaSets(t, "shop-cached"))
	if got != "api +0, web +1, worker +1" {
		t.Errorf("after the TTL, sync: %s, want web and worker +1", got)
	}
	t.Logf("figure: TTL %s: %d hard refreshes inside it, 2 registry requests; after it 2 more, then %s", ttl, refreshes, got)
}
