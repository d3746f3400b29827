//go:build linux

package flux

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testgit"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// pushed is what digestpin flux push prints for a pushed artifact.
var pushed = regexp.MustCompile(`: pushed and signed (sha256:[0-9a-f]{64})\n`)

// testOCIArtifact is docs/flux.md's OCI route under source-controller and
// kustomize-controller: CI renders the chart, pins it and pushes it with
// docs/flux.md's own commands, signed with a key of the cosign CLI; an
// OCIRepository that verifies it with the public key and a Kustomization
// that applies it (docs/flux.md's objects) roll it out, one ReplicaSet per
// Deployment. A run with nothing moved pushes nothing, and reconciles
// make no ReplicaSet; a tag pushed again rolls the Deployment that runs
// it, once; an artifact pushed without the signature is refused and
// nothing is applied.
func testOCIArtifact(t *testing.T, f *fluxCD) {
	const ns = "shop-prod"
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, svc := range []string{"web", "api"} {
		digests[svc] = reg.PushImage(t, "shop/"+svc+":dev").String()
	}
	repo := f.git.Repo(t, "shop-prod")
	chart := map[string]string{}
	for name, body := range fleetFiles(t, reg.Host()) {
		if strings.HasPrefix(name, "chart/") {
			chart[name] = body
		}
	}
	chart["values-prod.yaml"] = "replicas: 0\n"
	repo.Commit(t, "the shop's chart", chart)

	// The CI job's clone, its tools and its key.
	ws := filepath.Join(t.TempDir(), "work")
	testgit.Git(t, "", "clone", "--quiet", repo.URL, ws)
	bin := f.pathDir(t, map[string]string{"helm": tool(t, "DIGESTPIN_TEST_HELM4"), "cosign": tool(t, "DIGESTPIN_TEST_COSIGN")})
	env := append([]string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"COSIGN_PASSWORD=digestpin-test",
	}, testgit.Env...)
	sh := func(t *testing.T, script string) string {
		t.Helper()
		res := testfiles.Run(nil, env, "bash", "-c", "set -o errexit -o pipefail; cd \"$1\"; "+script, "ci", ws)
		if res.Err != nil {
			t.Fatalf("%s: %v\n%s", script, res.Err, res.Stderr)
		}
		return res.Stdout + res.Stderr
	}
	sh(t, "cosign generate-key-pair >/dev/null")
	ci := strings.ReplaceAll(docsCommands(t, "OCIArtifact"), docsRegistry, reg.Host())
	push := func(t *testing.T) string {
		t.Helper()
		out := sh(t, ci)
		if m := pushed.FindStringSubmatch(out); m != nil {
			return m[1]
		}
		if !strings.Contains(out, ": unchanged, not pushed") {
			t.Fatalf("the CI commands neither pushed nor said unchanged:\n%s", out)
		}
		return ""
	}
	first := push(t)
	if first == "" {
		t.Fatal("the first push pushed nothing")
	}

	pub := strings.TrimSpace(string(testfiles.Read(t, filepath.Join(ws, "cosign.pub"))))
	objects := string(docsFile(t, "flux-system/shop-prod.yaml", "", reg.Host()))
	for _, r := range []struct{ old, new string }{
		{"    -----BEGIN PUBLIC KEY-----\n    ...the content of cosign.pub...\n    -----END PUBLIC KEY-----\n", "    " + strings.ReplaceAll(pub, "\n", "\n    ") + "\n"},
		// The loopback registry speaks plain HTTP.
		{"  url: oci://" + reg.Host() + "/shop/manifests\n", "  url: oci://" + reg.Host() + "/shop/manifests\n  insecure: true\n"},
	} {
		if !strings.Contains(objects, r.old) {
			t.Fatalf("docs/flux.md's flux-system/shop-prod.yaml has no\n%s", r.old)
		}
		objects = strings.Replace(objects, r.old, r.new, 1)
	}
	f.kubectl(t, nil, "create", "namespace", ns)
	f.kubectl(t, []byte(objects), "apply", "-f", "-")

	// applied waits until the Kustomization applied the artifact digest
	// (verified, when the OCIRepository is to be ready at it) and checks
	// what the Deployments run.
	applied := func(t *testing.T, digest string, verified bool) {
		t.Helper()
		rev := "prod@" + digest
		if verified {
			f.wait(t, "ocirepository", fluxNamespace, ns, "verified at "+rev, func(o object) bool {
				return o.ready() && o.cond("SourceVerified").Status == "True" && o.Status.Artifact != nil && o.Status.Artifact.Revision == rev
			})
		}
		f.wait(t, "kustomization", fluxNamespace, ns, "applied "+rev, func(o object) bool {
			return o.ready() && o.Status.LastAppliedRevision == rev
		})
		f.wantImages(t, ns, reg.Host(), digests, nil)
	}
	applied(t, first, true)
	rs := map[string]int{"web": 1, "api": 1}
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("first rollout: ReplicaSets %v, want %v", got, rs)
	}

	// Nothing moved: nothing pushed, and reconciles apply nothing new.
	if d := push(t); d != "" {
		t.Fatalf("nothing moved, yet the CI commands pushed %s", d)
	}
	for range 2 {
		f.reconcile(t, "ocirepository", fluxNamespace, ns)
		f.reconcile(t, "kustomization", fluxNamespace, ns)
	}
	applied(t, first, true)
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("nothing moved: ReplicaSets %v, want %v", got, rs)
	}

	// web:dev pushed again: a new artifact, and web rolls, once.
	digests["web"] = reg.PushImage(t, "shop/web:dev").String()
	second := push(t)
	if second == "" || second == first {
		t.Fatalf("web:dev moved: pushed %q after %s", second, first)
	}
	f.reconcile(t, "ocirepository", fluxNamespace, ns)
	applied(t, second, true)
	rs["web"] = 2
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("web:dev moved: ReplicaSets %v, want %v", got, rs)
	}

	// An artifact pushed to the tag without the key's signature (the
	// pinned manifests with one Deployment more): source-controller
	// refuses it and the Kustomization keeps the verified one.
	sh(t, `cp rendered.yaml unsigned.yaml && sed 's/name: api$/name: intruder/' rendered.yaml >> unsigned.yaml && digestpin flux push oci://`+reg.Host()+`/shop/manifests:prod --path unsigned.yaml --name rendered.yaml`)
	at := f.requestReconcile(t, "ocirepository", fluxNamespace, ns)
	o := f.wait(t, "ocirepository", fluxNamespace, ns, "refusing the unsigned artifact", func(o object) bool {
		return o.Status.LastHandledReconcileAt == at && o.cond("Ready").Status == "False"
	})
	if c := o.cond("SourceVerified"); c.Status != "False" {
		t.Errorf("the unsigned artifact: SourceVerified %q (%s: %s), want False", c.Status, c.Reason, c.Message)
	}
	if o.Status.Artifact == nil || o.Status.Artifact.Revision != "prod@"+second {
		t.Errorf("the unsigned artifact: the OCIRepository serves %+v, want the verified prod@%s", o.Status.Artifact, second)
	}
	f.reconcile(t, "kustomization", fluxNamespace, ns)
	applied(t, second, false)
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("the unsigned artifact: ReplicaSets %v, want %v (nothing applied)", got, rs)
	}
	t.Logf("ReplicaSets: first rollout 1 each; nothing moved (nothing pushed, 2 reconciles) +0; web:dev pushed again: web +1, api +0; an unsigned artifact: refused (%s), +0", o.cond("Ready").Reason)
}
