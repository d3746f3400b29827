//go:build linux

package flux

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// testOCIChart is a HelmRelease whose chart is an OCI artifact (spec.chartRef
// an OCIRepository beside it, the chart pushed with helm push), pinned by
// the CI step, under source-controller and helm-controller: the release
// rolls out with one ReplicaSet per Deployment, and a tag pushed again
// rolls exactly the Deployment that runs it, once.
func testOCIChart(t *testing.T, f *fluxCD) {
	const ns = "shop-oci"
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, svc := range []string{"web", "api"} {
		digests[svc] = reg.PushImage(t, "shop/"+svc+":dev").String()
	}
	// The chart, packaged and pushed as Helm 4's CLI does.
	dir := t.TempDir()
	for name, body := range fleetFiles(t, reg.Host()) {
		if strings.HasPrefix(name, "chart/") {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil { //nolint:gosec // a chart's file
				t.Fatal(err)
			}
		}
	}
	helm := tool(t, "DIGESTPIN_TEST_HELM4")
	helmEnv := []string{"HOME=" + dir, "HELM_CONFIG_HOME=" + filepath.Join(dir, "helm"), "HELM_CACHE_HOME=" + filepath.Join(dir, "helm"), "HELM_DATA_HOME=" + filepath.Join(dir, "helm")}
	for _, args := range [][]string{
		{"package", filepath.Join(dir, "chart"), "--destination", dir},
		{"push", filepath.Join(dir, "shop-0.1.0.tgz"), "oci://" + reg.Host() + "/charts", "--plain-http"},
	} {
		if res := testfiles.Run(nil, helmEnv, helm, args...); res.Err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), res.Err, res.Stderr)
		}
	}

	repo := f.git.Repo(t, "shop-oci")
	first := repo.Commit(t, "the shop from its OCI chart", map[string]string{
		"clusters/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
		"clusters/shop.yaml": `# The shop, from its chart in the registry.
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
  namespace: ` + ns + `
spec:
  interval: 10m
  chartRef:
    kind: OCIRepository
    name: shop-chart
`,
		"clusters/shop-chart.yaml": `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: shop-chart
  namespace: ` + ns + `
spec:
  interval: 10m
  url: oci://` + reg.Host() + `/charts/shop
  ref:
    semver: ">=0.1.0"
  insecure: true
  layerSelector:
    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
    operation: copy
`,
	})
	stderr, head := f.ciJob(t, repo, "clusters/shop.yaml")
	if head == first {
		t.Fatalf("the CI step committed nothing:\n%s", stderr)
	}
	f.kubectl(t, fmt.Appendf(nil, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: shop-oci, namespace: %[1]s}
spec:
  interval: 10m
  url: %[2]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop-oci, namespace: %[1]s}
spec:
  interval: 10m
  sourceRef: {kind: GitRepository, name: shop-oci}
  path: ./clusters
  prune: true
`, fluxNamespace, repo.URL), "apply", "-f", "-")

	rolled := func(t *testing.T, head string) {
		t.Helper()
		rev := "main@sha1:" + head
		f.wait(t, "kustomization", fluxNamespace, ns, "applied "+rev, func(o object) bool {
			return o.ready() && o.Status.LastAppliedRevision == rev
		})
		f.wait(t, "helmrelease", ns, "shop", "released", object.ready)
		f.wantImages(t, ns, reg.Host(), digests, nil)
	}
	rolled(t, head)
	rs := map[string]int{"web": 1, "api": 1}
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("first rollout: ReplicaSets %v, want %v", got, rs)
	}

	digests["api"] = reg.PushImage(t, "shop/api:dev").String()
	stderr, moved := f.ciJob(t, repo, "clusters/shop.yaml")
	if moved == head {
		t.Fatalf("api:dev moved, yet the CI step committed nothing:\n%s", stderr)
	}
	f.reconcile(t, "gitrepository", fluxNamespace, ns)
	rolled(t, moved)
	rs["api"] = 2
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("api:dev moved: ReplicaSets %v, want %v", got, rs)
	}
	t.Logf("ReplicaSets: first rollout 1 each; api:dev pushed again: api +1, web +0")
}
