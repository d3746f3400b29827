//go:build linux

package argocd

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// checksumConfig finds the checksum/config annotation in a render.
var checksumConfig = regexp.MustCompile(`checksum/config: (\S+)`)

// testGeneratedCert: a chart that generates a certificate and hashes it
// into checksum/config renders the same bytes on every hard refresh (the
// plugin renders with digestpin template and the sidecar's seed): 20 hard
// refreshes and syncs make no ReplicaSet; a values change makes one.
func testGeneratedCert(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	files := chartFiles(t, "certs", "certs", reg.Host())

	// The control: Helm's own render of the chart differs every time, so
	// the chart is one that would restart its pods on every render.
	chartDir := t.TempDir()
	for p, content := range files {
		if err := os.MkdirAll(filepath.Join(chartDir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chartDir, p), []byte(content), 0o644); err != nil { //nolint:gosec // a chart
			t.Fatal(err)
		}
	}
	helm := tool(t, "DIGESTPIN_TEST_HELM4")
	var sums []string
	for range 2 {
		res := run(nil, nil, helm, "template", "certs", filepath.Join(chartDir, "certs"))
		if res.err != nil {
			t.Fatalf("helm template: %v\n%s", res.err, res.stderr)
		}
		m := checksumConfig.FindStringSubmatch(res.stdout)
		if m == nil {
			t.Fatalf("helm template: no checksum/config in\n%s", res.stdout)
		}
		sums = append(sums, m[1])
	}
	if sums[0] == sums[1] {
		t.Fatalf("helm template renders checksum/config %s twice: the chart generates nothing, and this test would prove nothing", sums[0])
	}

	repo := a.git.Repo(t, "certs")
	repo.Commit(t, "certs chart", files)
	a.create(t, app{name: "certs", ns: "certs", repo: repo, path: "certs"})
	a.reconciled(t, "certs")
	a.sync(t, "certs")
	first := a.replicaSets(t, "certs")
	if got := newSets(map[string]int{}, first); got != "certs +1" {
		t.Fatalf("first sync: %s, want certs +1", got)
	}
	const rounds = 20
	outOfSync := 0
	for range rounds {
		if ap := a.hardRefresh(t, "certs"); syncStatus(ap) != "Synced" {
			outOfSync++
		}
		a.sync(t, "certs")
	}
	after := a.replicaSets(t, "certs")
	got := newSets(first, after)
	if got != "certs +0" || outOfSync != 0 {
		t.Errorf("%d hard refreshes and syncs: %s, %d refreshes OutOfSync; want certs +0 and none", rounds, got, outOfSync)
	}
	t.Logf("figure: generated certificate, %d hard refreshes and syncs: %s (%d OutOfSync)", rounds, got, outOfSync)

	// A values change: one new ReplicaSet.
	values := strings.Replace(files["certs/values.yaml"], "greeting: hello", "greeting: bonjour", 1)
	repo.Commit(t, "greeting", map[string]string{"certs/values.yaml": values})
	if ap := a.refresh(t, "certs", "normal"); syncStatus(ap) != "OutOfSync" {
		t.Fatalf("values change: sync status %q, want OutOfSync", syncStatus(ap))
	}
	a.sync(t, "certs")
	got = newSets(after, a.replicaSets(t, "certs"))
	if got != "certs +1" {
		t.Errorf("values change, sync: %s, want certs +1", got)
	}
	t.Logf("figure: generated certificate, values change and sync: %s", got)
}

// lockFile returns the text of a lock file of entries.
func lockFile(t *testing.T, entries map[string]v1.Hash) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "digests.lock")
	testfiles.WriteLock(t, p, entries)
	return string(testfiles.Read(t, p))
}

// testLock: the lock workflow. CI pushes, records the digests in the lock
// and commits it; Argo CD renders from the lock (--frozen) and syncs
// exactly the workload whose digest moved. With the registry down,
// generation still succeeds.
func testLock(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	appDev := reg.PushImage(t, "app:dev")
	api1 := reg.PushImage(t, "api:1.0")
	files := chartFiles(t, "shop", "shop", reg.Host())
	files["shop/digests.lock"] = lockFile(t, map[string]v1.Hash{reg.Ref("app:dev"): appDev, reg.Ref("api:1.0"): api1})
	reg.ResetCounts() // the pushes
	repo := a.git.Repo(t, "shop-lock")
	repo.Commit(t, "shop chart and lock", files)
	a.create(t, app{name: "shop-lock", ns: "shop-lock", repo: repo, path: "shop", env: []string{"DIGESTPIN_LOCK=digests.lock"}})
	a.reconciled(t, "shop-lock")
	a.sync(t, "shop-lock")
	first := a.replicaSets(t, "shop-lock")
	if n := reg.Manifests(); n != 0 {
		t.Errorf("renders from the lock: %d manifest requests at the registry, want 0", n)
	}

	// CI: a new api:1.0, recorded in the lock and committed. Argo CD's
	// webhook asks for a normal refresh of the new commit.
	api2 := reg.PushImage(t, "api:1.0")
	repo.Commit(t, "lock: api:1.0", map[string]string{
		"shop/digests.lock": lockFile(t, map[string]v1.Hash{reg.Ref("app:dev"): appDev, reg.Ref("api:1.0"): api2}),
	})
	if ap := a.refresh(t, "shop-lock", "normal"); syncStatus(ap) != "OutOfSync" {
		t.Fatalf("new lock committed: sync status %q, want OutOfSync", syncStatus(ap))
	}
	a.sync(t, "shop-lock")
	moved := a.replicaSets(t, "shop-lock")
	got := newSets(first, moved)
	if got != "api +1, web +0, worker +0" {
		t.Errorf("new lock, sync: %s, want api +1 only", got)
	}
	t.Logf("figure: lock workflow, new lock for api:1.0 committed, sync: %s", got)

	// The registry down: a hard refresh renders from the lock alone.
	reg.Server.Close()
	ap := a.hardRefresh(t, "shop-lock")
	if syncStatus(ap) != "Synced" || len(ap.Status.Conditions) != 0 {
		t.Errorf("registry down, hard refresh: sync status %q, conditions %v; want Synced and none", syncStatus(ap), ap.Status.Conditions)
	}
	a.sync(t, "shop-lock")
	if got := newSets(moved, a.replicaSets(t, "shop-lock")); got != "api +0, web +0, worker +0" {
		t.Errorf("registry down, hard refresh and sync: %s, want nothing new", got)
	}
}

// testMissingImage: an image missing from the registry fails the
// generation; the Application's condition carries digestpin's one-line
// error, naming the image, and nothing is applied.
func testMissingImage(t *testing.T, a *argoCD) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:dev")
	files := chartFiles(t, "single", "single", reg.Host())
	files["single/values.yaml"] = strings.Replace(files["single/values.yaml"], "tag: dev", "tag: missing", 1)
	repo := a.git.Repo(t, "missing")
	repo.Commit(t, "missing image", files)
	a.create(t, app{name: "missing", ns: "missing", repo: repo, path: "single"})
	ap := a.reconciled(t, "missing")
	var msg string
	for _, c := range ap.Status.Conditions {
		if c.Type == "ComparisonError" {
			msg = c.Message
		}
	}
	ref := reg.Ref("app:missing")
	i := strings.Index(msg, "digestpin: error: ")
	if i < 0 {
		t.Fatalf("conditions %v: want a ComparisonError with digestpin's error", ap.Status.Conditions)
	}
	line := msg[i:]
	if !strings.Contains(line, ref) || strings.Contains(line, "\n") {
		t.Errorf("ComparisonError %q: want digestpin's error on one line naming %s", line, ref)
	}
	t.Logf("figure: missing image, the Application's condition: %s", line)
	ap = a.trySync(t, "missing")
	if ap.Status.OperationState == nil || ap.Status.OperationState.Phase == "Succeeded" {
		t.Errorf("sync of a failed generation: %+v, want it to fail", ap.Status.OperationState)
	}
	if out := a.kubectl(t, nil, "-n", "missing", "get", "all", "-o", "name"); strings.TrimSpace(out) != "" && !onlyService(out) {
		t.Errorf("failed generation: the namespace holds %s, want nothing applied", out)
	}
}

// onlyService reports whether `get all -o name` lists nothing but the
// kubernetes Service a namespace may show.
func onlyService(out string) bool {
	for _, l := range strings.Fields(out) {
		if l != "service/kubernetes" {
			return false
		}
	}
	return true
}

// countRepo counts the manifest requests for one repository of reg.
func countRepo(reg *testregistry.Registry, repo string) *atomic.Int64 {
	var n atomic.Int64
	reg.Handle(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/"+repo+"/manifests/") {
			n.Add(1)
		}
		return false
	})
	return &n
}
