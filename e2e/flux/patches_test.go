//go:build linux

package flux

import (
	"fmt"
	"maps"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// testKustomizationPatches is a Kustomization whose own spec changes what
// its folder builds: a patch that sets the worker's image to another tag,
// a targetNamespace, and a post-build substitution. The CI step pins the
// image the patch sets (what kustomize-controller runs), not the one the
// folder names, and the controller runs it at that digest.
func testKustomizationPatches(t *testing.T, f *fluxCD) {
	const ns = "shop-patched"
	reg := testregistry.New(t)
	reg.PushImage(t, "shop/worker:dev")
	canary := reg.PushImage(t, "shop/worker:canary").String()

	repo := f.git.Repo(t, ns)
	files := map[string]string{}
	for name, body := range fleetFiles(t, reg.Host()) {
		if name == "apps/worker.yaml" {
			files["apps/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - worker.yaml\n"
			files[name] = body
		}
	}
	files["clusters/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n"
	files["clusters/workers.yaml"] = fmt.Sprintf(`# The workers, on the canary tag, labelled by team.
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[1]s-apps
  namespace: %[2]s
spec:
  interval: 10m
  sourceRef:
    kind: GitRepository
    name: %[1]s
  path: ./apps
  prune: true
  targetNamespace: %[1]s
  patches:
    - target:
        kind: Deployment
        name: worker
      patch: |
        - op: replace
          path: /spec/template/spec/containers/0/image
          value: %[3]s/shop/worker:canary
        - op: add
          path: /metadata/labels
          value: {team: "${TEAM}"}
  postBuild:
    substitute:
      TEAM: shop
`, ns, fluxNamespace, reg.Host())
	first := repo.Commit(t, "the workers", files)
	stderr, head := f.ciJob(t, repo, "clusters/workers.yaml")
	if head == first {
		t.Fatalf("the CI step committed nothing:\n%s", stderr)
	}
	f.kubectl(t, fmt.Appendf(nil, `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  interval: 10m
  url: %[3]s
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  interval: 10m
  sourceRef: {kind: GitRepository, name: %[1]s}
  path: ./clusters
  prune: true
`, ns, fluxNamespace, repo.URL), "apply", "-f", "-")

	rev := "main@sha1:" + head
	for _, k := range []string{ns, ns + "-apps"} {
		f.wait(t, "kustomization", fluxNamespace, k, "applied "+rev, func(o object) bool {
			return o.ready() && o.Status.LastAppliedRevision == rev
		})
	}
	if got, want := f.images(t, ns), map[string]string{"worker": reg.Host() + "/shop/worker:canary@" + canary}; !maps.Equal(got, want) {
		t.Fatalf("the Deployments of %s run\n%v\nwant\n%v", ns, got, want)
	}
	if n := f.replicaSets(t, ns)["worker"]; n != 1 {
		t.Errorf("the worker has %d ReplicaSets, want 1", n)
	}
	if team := f.kubectl(t, nil, "-n", ns, "get", "deployment", "worker", "-o", "jsonpath={.metadata.labels.team}"); team != "shop" {
		t.Errorf("the worker's label team is %q, want the substituted shop", team)
	}
}
