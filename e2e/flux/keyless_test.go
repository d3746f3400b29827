//go:build linux

package flux

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// testOCIArtifactKeyless is docs/flux.md's OCI route signed keylessly,
// against a private Sigstore of real services (startSigstore): the CI job
// runs the page's commands with its OIDC token in SIGSTORE_ID_TOKEN, and
// digestpin flux push --sign-keyless gets a certificate from Fulcio for the
// job's identity and logs the signature in Rekor. The page's
// OCIRepository, naming that identity and the Sigstore's trusted root,
// verifies it, and the Kustomization applies it: one ReplicaSet per
// Deployment. cosign verify (the CLI) accepts the same signature. A tag
// pushed again is signed again and rolls its Deployment once; an
// OCIRepository that expects another identity refuses the artifact; an
// expired token is refused before anything is pushed.
func testOCIArtifactKeyless(t *testing.T, f *fluxCD) {
	const ns, identity = "shop-keyless", "release@shop.example"
	ss := startSigstore(t, f.cluster, filepath.Join(f.dir, "sigstore"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(ttl time.Duration) {
		if err := os.WriteFile(tokenFile, []byte(ss.Token(t, identity, ttl)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken(10 * time.Minute)
	j := newOCIJob(t, f, ns, "DIGESTPIN_FULCIO_URL="+ss.FulcioURL, "DIGESTPIN_REKOR_URL="+ss.RekorURL)
	reg, digests := j.reg, j.digests
	root := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(root, ss.TrustedRoot, 0o600); err != nil {
		t.Fatal(err)
	}
	ci := strings.ReplaceAll(docsCommands(t, "OCIArtifactKeyless"), docsRegistry, reg.Host())
	// The token as GitLab hands it to a job; read fresh for each run.
	push := func(t *testing.T) string {
		t.Helper()
		return j.push(t, `export SIGSTORE_ID_TOKEN="$(cat `+tokenFile+`)"; `+ci)
	}
	first := push(t)
	if first == "" {
		t.Fatal("the first push pushed nothing")
	}
	// The line names whom Fulcio's certificate names.
	if want := " for " + identity + " (issuer " + ss.Issuer + ")\n"; !strings.Contains(j.out, want) {
		t.Errorf("the push's output names no %q:\n%s", want, j.out)
	}

	// cosign's own verification of the same signature.
	ref := reg.Host() + "/shop/manifests@" + first
	out := j.sh(t, "cosign verify --allow-http-registry --trusted-root "+root+
		" --certificate-identity "+identity+" --certificate-oidc-issuer "+ss.Issuer+" "+ref+" 2>&1 >/dev/null")
	if !strings.Contains(out, "The code-signing certificate was verified using trusted certificate authority certificates") {
		t.Errorf("cosign verify said:\n%s", out)
	}

	// The page's OCIRepository with the test's issuer and identity, the
	// Sigstore's trusted root, and the page's Kustomization, all named
	// shop-keyless.
	keyless := string(docsFile(t, "flux-system/shop-prod-keyless.yaml", "", reg.Host()))
	for _, r := range []struct{ old, new string }{
		{`^https://token\.actions\.githubusercontent\.com$`, "^" + regexp.QuoteMeta(ss.Issuer) + "$"},
		{`^https://github\.com/shop/fleet/\.github/workflows/release\.yml@refs/heads/main$`, "^" + regexp.QuoteMeta(identity) + "$"},
		{"    matchOIDCIdentity:\n", "    trustedRootSecretRef:\n      name: sigstore-root\n    matchOIDCIdentity:\n"},
		{"  url: oci://" + reg.Host() + "/shop/manifests\n", "  url: oci://" + reg.Host() + "/shop/manifests\n  insecure: true\n"},
	} {
		if !strings.Contains(keyless, r.old) {
			t.Fatalf("docs/flux.md's flux-system/shop-prod-keyless.yaml has no\n%s", r.old)
		}
		keyless = strings.Replace(keyless, r.old, r.new, 1)
	}
	docs := strings.Split(string(docsFile(t, "flux-system/shop-prod.yaml", "", reg.Host())), "---\n")
	kustomization := docs[len(docs)-1]
	if !strings.Contains(kustomization, "kind: Kustomization") {
		t.Fatalf("docs/flux.md's flux-system/shop-prod.yaml ends in no Kustomization:\n%s", kustomization)
	}
	objects := strings.ReplaceAll(keyless+"---\n"+kustomization, "shop-prod", ns)
	f.kubectl(t, nil, "create", "namespace", ns)
	f.kubectl(t, nil, "-n", fluxNamespace, "create", "secret", "generic", "sigstore-root", "--from-file=trusted_root.json="+root)
	f.kubectl(t, []byte(objects), "apply", "-f", "-")

	applied := func(t *testing.T, digest string) {
		t.Helper()
		rev := "prod@" + digest
		f.wait(t, "ocirepository", fluxNamespace, ns, "verified at "+rev, func(o object) bool {
			return o.ready() && o.cond("SourceVerified").Status == "True" && o.Status.Artifact != nil && o.Status.Artifact.Revision == rev
		})
		f.wait(t, "kustomization", fluxNamespace, ns, "applied "+rev, func(o object) bool {
			return o.ready() && o.Status.LastAppliedRevision == rev
		})
		f.wantImages(t, ns, reg.Host(), digests, nil)
	}
	applied(t, first)
	rs := map[string]int{"web": 1, "api": 1}
	if got := f.replicaSets(t, ns); !maps.Equal(got, rs) {
		t.Fatalf("first rollout: ReplicaSets %v, want %v", got, rs)
	}

	// Nothing moved, then web:dev pushed again: a new artifact, signed
	// with a new certificate.
	j.movedOnce(t, f, ns, first, rs, push, applied)

	// An OCIRepository that expects another identity refuses it.
	other := strings.ReplaceAll(keyless, regexp.QuoteMeta(identity), regexp.QuoteMeta("someone@else.example"))
	other = strings.ReplaceAll(other, "name: shop-prod\n", "name: shop-other\n")
	f.kubectl(t, []byte(other), "apply", "-f", "-")
	o := f.wait(t, "ocirepository", fluxNamespace, "shop-other", "refusing another identity", func(o object) bool {
		return o.cond("SourceVerified").Status == "False"
	})
	if o.Status.Artifact != nil {
		t.Errorf("another identity: the OCIRepository serves %+v", o.Status.Artifact)
	}

	// An expired token: refused before anything is pushed.
	writeToken(-time.Minute)
	res := testfiles.Run(nil, append(j.env, "SIGSTORE_ID_TOKEN="+string(testfiles.Read(t, tokenFile))), tool(t, "DIGESTPIN_TEST_BIN"), "flux", "push",
		"oci://"+reg.Host()+"/shop/manifests:expired", "--path", filepath.Join(j.ws, "rendered.yaml"), "--sign-keyless")
	if res.Err == nil || !strings.Contains(res.Stderr, "expired at") || strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
		t.Errorf("an expired token: %v, stderr %q, want one line saying it expired", res.Err, res.Stderr)
	}
	if res.Stdout != "" {
		t.Errorf("an expired token: stdout %q, want nothing", res.Stdout)
	}
	t.Logf("ReplicaSets: first rollout 1 each; nothing moved +0; web:dev pushed again: web +1, api +0; another identity: refused (%s)", o.cond("SourceVerified").Reason)
}
