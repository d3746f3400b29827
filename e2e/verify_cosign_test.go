package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// cosignCLI returns the cosign CLI the Makefile builds (a released
// version; see COSIGN_VERSION).
func cosignCLI(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_COSIGN") }

// cosignRunner runs the cosign CLI offline: its home, caches and TUF
// root in dir, and a proxy that does not exist for every address but
// loopback (Go never proxies loopback), so that a request for trust
// material on the internet fails instead of reaching it.
type cosignRunner struct {
	bin, dir string
}

func (c cosignRunner) env() []string {
	return []string{
		"HOME=" + c.dir,
		"XDG_CACHE_HOME=" + filepath.Join(c.dir, "cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(c.dir, "config"),
		"TUF_ROOT=" + filepath.Join(c.dir, "tuf"),
		"COSIGN_PASSWORD=digestpin-test",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"NO_PROXY=", "no_proxy=",
	}
}

// run runs cosign with args in the runner's folder and fails the test
// when it fails.
func (c cosignRunner) run(t *testing.T, args ...string) {
	t.Helper()
	r := runCmd(t, c.dir, nil, c.env(), c.bin, args...)
	if r.err != nil {
		t.Fatalf("cosign %s: %v\n%s%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
}

// sign signs d with the key pair of prefix (cosign.key for "cosign") and
// flags, which must keep cosign from fetching a signing config and a
// trusted root by TUF (see offlineBundle and offlineLegacy).
func (c cosignRunner) sign(t *testing.T, prefix string, d name.Digest, flags ...string) {
	t.Helper()
	args := []string{"sign", "--yes", "--key", prefix + ".key",
		"--allow-insecure-registry", "--allow-http-registry"}
	c.run(t, append(append(args, flags...), d.String())...)
}

// The offline ways to sign with a key. For bundles, cosign v3's own: a
// signing config without services (so no transparency log) and a trusted
// root without material, both files made by cosign in the test, where
// cosign would otherwise fetch them by TUF. Legacy signatures cannot use a
// signing config: the deprecated --tlog-upload=false without one.
var (
	offlineBundle = []string{"--signing-config", "signing-config.json", "--trusted-root", "trusted-root.json"}
	offlineLegacy = []string{"--new-bundle-format=false", "--use-signing-config=false", "--tlog-upload=false"}
)

// TestVerifyCosign: signatures made by the cosign CLI, a real client, in
// each format it writes, into the loopback registry, verified by the
// digestpin binary: the signed digest pins; a tag re-pushed after signing
// (its new digest unsigned) and a signature of another key pair fail in
// one line naming the image and digest, with nothing on stdout.
func TestVerifyCosign(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	cosign := cosignRunner{bin: cosignCLI(t)}
	for _, tc := range []struct {
		name string
		// flags select the format of cosign sign and keep it offline.
		flags []string
		// noReferrersAPI makes the registry one from before OCI 1.1.
		noReferrersAPI bool
		// stored checks that the signature of d is where the format puts it.
		stored func(t *testing.T, d name.Digest)
	}{
		{
			name:  "bundle as an OCI 1.1 referrer (cosign's default)",
			flags: offlineBundle,
			stored: func(t *testing.T, d name.Digest) {
				wantBundleReferrer(t, d)
				wantNoTag(t, d, ".sig")
			},
		},
		{
			name:           "bundle under the referrers tag (registry without the referrers API)",
			flags:          offlineBundle,
			noReferrersAPI: true,
			stored: func(t *testing.T, d name.Digest) {
				wantTag(t, d, "")
				wantNoTag(t, d, ".sig")
			},
		},
		{
			name:  "legacy .sig tag (--new-bundle-format=false)",
			flags: offlineLegacy,
			stored: func(t *testing.T, d name.Digest) {
				wantTag(t, d, ".sig")
				if ds := referrers(t, d); len(ds) != 0 {
					t.Errorf("the legacy format wrote %d referrers of %s, want none", len(ds), d)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cosign := cosign
			cosign.dir = dir
			cosign.run(t, "generate-key-pair")
			cosign.run(t, "generate-key-pair", "--output-key-prefix", "other")
			cosign.run(t, "signing-config", "create", "--out", "signing-config.json")
			cosign.run(t, "trusted-root", "create", "--out", "trusted-root.json")

			reg := testregistry.New(t)
			if tc.noReferrersAPI {
				reg.NoReferrersAPI()
			}
			signed := digestOf(t, reg, "shop/web:1", reg.PushImage(t, "shop/web:1"))
			cosign.sign(t, "cosign", signed, tc.flags...)
			tc.stored(t, signed)
			other := digestOf(t, reg, "shop/api:1", reg.PushImage(t, "shop/api:1"))
			cosign.sign(t, "other", other, tc.flags...)
			tc.stored(t, other)

			policy := "--verify=" + reg.Host() + "/shop/**=key:cosign.pub"
			pin := func(ref string) result {
				return runCmd(t, dir, gen.Deployments("shop", reg.Ref(ref)), nil, bin, policy)
			}

			// Signed with cosign.key: pinned.
			r := pin("shop/web:1")
			if r.err != nil {
				t.Fatalf("digestpin (signed) = %v\n%s", r.err, r.stderr)
			}
			if want := reg.Ref("shop/web:1") + "@" + signed.DigestStr(); !strings.Contains(r.stdout, want) {
				t.Errorf("digestpin (signed) does not pin %s:\n%s", want, r.stdout)
			}

			// The tag re-pushed after signing: its new digest is unsigned.
			repushed := digestOf(t, reg, "shop/web:1", reg.PushImage(t, "shop/web:1"))
			wantNotVerified(t, pin("shop/web:1"), repushed, "no signature")

			// Signed, but with another key pair.
			wantNotVerified(t, pin("shop/api:1"), other, "wrong key: the signature does not verify with sha256:")

			// cosign asked the internet for nothing: no TUF cache.
			for _, p := range []string{".sigstore", "tuf"} {
				if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
					t.Errorf("cosign wrote %s: it fetched trust material", p)
				}
			}
		})
	}
}

// digestOf is repo:tag's image digest h as a name.Digest.
func digestOf(t *testing.T, reg *testregistry.Registry, repoTag string, h v1.Hash) name.Digest {
	t.Helper()
	repo, _, _ := strings.Cut(repoTag, ":")
	d, err := name.NewDigest(reg.Ref(repo) + "@" + h.String())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wantNotVerified checks that digestpin failed the render over d: an
// exit status, nothing on stdout, and one line naming the image and
// digest with the reason.
func wantNotVerified(t *testing.T, r result, d name.Digest, reason string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(r.err, &exit) || r.stdout != "" {
		t.Fatalf("digestpin = %v, stdout %q; want a failure and nothing on stdout\n%s", r.err, r.stdout, r.stderr)
	}
	image := d.Context().Name() + "@" + d.DigestStr()
	var lines []string
	for l := range strings.Lines(r.stderr) {
		if strings.Contains(l, image) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], ": not verified under policy key:sha256:") || !strings.Contains(lines[0], reason) {
		t.Errorf("digestpin's error has %d line(s) naming %s, want one saying %q:\n%s", len(lines), image, reason, r.stderr)
	}
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("digestpin's error has a stack trace:\n%s", r.stderr)
	}
}

// referrers lists the referrers of d as the registry's referrers API
// (or the referrers tag) gives them.
func referrers(t *testing.T, d name.Digest) []v1.Descriptor {
	t.Helper()
	idx, err := remote.Referrers(d)
	if err != nil {
		t.Fatalf("referrers of %s: %v", d, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatalf("referrers of %s: %v", d, err)
	}
	return m.Manifests
}

// wantBundleReferrer checks that d has a Sigstore bundle among its
// referrers: a manifest whose artifactType is a bundle's. (The registry
// lists it with its empty config's media type, not that artifactType.)
func wantBundleReferrer(t *testing.T, d name.Digest) {
	t.Helper()
	for _, desc := range referrers(t, d) {
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()))
		if err != nil {
			t.Fatalf("referrer %s of %s: %v", desc.Digest, d, err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatalf("referrer %s of %s: %v", desc.Digest, d, err)
		}
		if strings.HasPrefix(m.ArtifactType, "application/vnd.dev.sigstore.bundle") {
			return
		}
	}
	t.Errorf("no Sigstore bundle among the referrers of %s", d)
}

// fallbackTag is d's tag sha256-<hex> with suffix (".sig" for cosign's
// legacy signatures, "" for the referrers tag schema).
func fallbackTag(t *testing.T, d name.Digest, suffix string) name.Tag {
	t.Helper()
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + suffix)
}

func wantTag(t *testing.T, d name.Digest, suffix string) {
	t.Helper()
	tag := fallbackTag(t, d, suffix)
	if _, err := remote.Head(tag); err != nil {
		t.Errorf("no tag %s: %v", tag.TagStr(), err)
	}
}

func wantNoTag(t *testing.T, d name.Digest, suffix string) {
	t.Helper()
	tag := fallbackTag(t, d, suffix)
	if _, err := remote.Head(tag); err == nil {
		t.Errorf("tag %s exists, want none", tag.TagStr())
	}
}
