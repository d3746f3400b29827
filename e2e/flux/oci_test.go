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
var pushed = regexp.MustCompile(`: pushed and signed (sha256:[0-9a-f]{64})( for [^\n]*)?\n`)

// ociJob is a CI job of docs/flux.md's OCI route: a registry with the
// images web:dev and api:dev, a repository with the shop's chart, and a
// clone of it with helm, cosign and digestpin on PATH.
type ociJob struct {
	reg     *testregistry.Registry
	digests map[string]string // service → digest of its :dev
	ws      string
	env     []string
	out     string // the output of the last push
}

// newOCIJob makes the registry, the repository name and the job's clone,
// with env added to the job's environment.
func newOCIJob(t *testing.T, f *fluxCD, name string, env ...string) *ociJob {
	t.Helper()
	j := &ociJob{reg: testregistry.New(t), digests: map[string]string{}}
	for _, svc := range []string{"web", "api"} {
		j.digests[svc] = j.reg.PushImage(t, "shop/"+svc+":dev").String()
	}
	repo := f.git.Repo(t, name)
	chart := map[string]string{}
	for name, body := range fleetFiles(t, j.reg.Host()) {
		if strings.HasPrefix(name, "chart/") {
			chart[name] = body
		}
	}
	chart["values-prod.yaml"] = "replicas: 0\n"
	repo.Commit(t, "the shop's chart", chart)

	j.ws = filepath.Join(t.TempDir(), "work")
	testgit.Git(t, "", "clone", "--quiet", repo.URL, j.ws)
	bin := f.pathDir(t, map[string]string{"helm": tool(t, "DIGESTPIN_TEST_HELM4"), "cosign": tool(t, "DIGESTPIN_TEST_COSIGN")})
	j.env = append(append([]string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
	}, env...), testgit.Env...)
	return j
}

// sh runs script in the job's clone and returns its output.
func (j *ociJob) sh(t *testing.T, script string) string {
	t.Helper()
	res := testfiles.Run(nil, j.env, "bash", "-c", "set -o errexit -o pipefail; cd \"$1\"; "+script, "ci", j.ws)
	if res.Err != nil {
		t.Fatalf("%s: %v\n%s", script, res.Err, res.Stderr)
	}
	return res.Stdout + res.Stderr
}

// push runs the CI commands ci and returns the digest they pushed and
// signed, or "" when they said unchanged.
func (j *ociJob) push(t *testing.T, ci string) string {
	t.Helper()
	out := j.sh(t, ci)
	j.out = out
	if m := pushed.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	if !strings.Contains(out, ": unchanged, not pushed") {
		t.Fatalf("the CI commands neither pushed nor said unchanged:\n%s", out)
	}
	return ""
}

// movedOnce runs the OCI route's next two steps after a first rollout of
// first (ReplicaSets rs): nothing moved (nothing pushed; both objects
// reconciled twice: +0), then web:dev pushed again (a new artifact: web
// +1, api +0). It returns the second artifact's digest.
func (j *ociJob) movedOnce(t *testing.T, f *fluxCD, ns, first string, rs map[string]int, push func(*testing.T) string, applied func(*testing.T, string)) string {
	t.Helper()
	if d := push(t); d != "" {
		t.Fatalf("nothing moved, yet the CI commands pushed %s", d)
	}
	for range 2 {
		f.reconcile(t, "ocirepository", fluxNamespace, ns)
		f.reconcile(t, "kustomization", fluxNamespace, ns)
	}
	applied(t, first)
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("nothing moved: ReplicaSets %v, want %v", got, rs)
	}

	j.digests["web"] = j.reg.PushImage(t, "shop/web:dev").String()
	second := push(t)
	if second == "" || second == first {
		t.Fatalf("web:dev moved: pushed %q after %s", second, first)
	}
	f.reconcile(t, "ocirepository", fluxNamespace, ns)
	applied(t, second)
	rs["web"] = 2
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("web:dev moved: ReplicaSets %v, want %v", got, rs)
	}
	return second
}

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
	j := newOCIJob(t, f, ns, "COSIGN_PASSWORD=digestpin-test")
	reg, digests, ws, sh := j.reg, j.digests, j.ws, j.sh
	sh(t, "cosign generate-key-pair >/dev/null")
	ci := strings.ReplaceAll(docsCommands(t, "OCIArtifact"), docsRegistry, reg.Host())
	push := func(t *testing.T) string { t.Helper(); return j.push(t, ci) }
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

	second := j.movedOnce(t, f, ns, first, rs, push, func(t *testing.T, d string) { applied(t, d, true) })

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
