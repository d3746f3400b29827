package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/fluxoci"
	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// pushedDigest is the digest in digestpin flux push's line.
func pushedDigest(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "sha256:")
	if i < 0 || len(out) < i+71 {
		t.Fatalf("no digest in %q", out)
	}
	return out[i : i+71]
}

// TestFluxPush: digestpin flux push writes the artifact of flux push
// artifact into the loopback registry: its media types, annotations and
// tar; the same files again push nothing and keep the digest, also under
// another revision; new files push a new digest.
func TestFluxPush(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	dir := t.TempDir()
	stream := gen.Deployments("shop", reg.Ref("shop/web")+"@sha256:"+strings.Repeat("a", 64))
	art := "oci://" + reg.Ref("shop/manifests:prod")
	push := func(stream []byte, args ...string) result {
		t.Helper()
		r := runCmd(t, dir, stream, nil, bin, append([]string{"flux", "push", art, "--path", "-", "--source", "https://git.example/shop"}, args...)...)
		if r.err != nil {
			t.Fatalf("digestpin flux push = %v\n%s", r.err, r.stderr)
		}
		return r
	}

	r := push(stream, "--revision", "main@sha1:1111")
	if !strings.Contains(r.stdout, ": pushed sha256:") {
		t.Fatalf("first push says %q", r.stdout)
	}
	d1 := pushedDigest(t, r.stdout)

	ref, err := name.NewDigest(reg.Ref("shop/manifests") + "@" + d1)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != fluxoci.ConfigMediaType ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != fluxoci.ContentMediaType {
		t.Errorf("media types: manifest %s, config %s, layers %v", m.MediaType, m.Config.MediaType, m.Layers)
	}
	for k, v := range map[string]string{
		fluxoci.SourceAnnotation:   "https://git.example/shop",
		fluxoci.RevisionAnnotation: "main@sha1:1111",
		fluxoci.CreatedAnnotation:  "1970-01-01T00:00:00Z",
	} {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	l, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.IsZero() && h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d/%d %q, time %v: not reproducible", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		if h.Name == "manifests.yaml" {
			b, _ := io.ReadAll(tr)
			if !bytes.Equal(b, stream) {
				t.Errorf("manifests.yaml differs from the stream pushed")
			}
		}
	}
	if strings.Join(names, " ") != ". manifests.yaml" {
		t.Errorf("tar entries %v, want . manifests.yaml", names)
	}

	// The same files again, even under a new revision: nothing pushed.
	for _, rev := range []string{"main@sha1:1111", "main@sha1:2222"} {
		r = push(stream, "--revision", rev)
		if !strings.Contains(r.stdout, "unchanged, not pushed") || pushedDigest(t, r.stdout) != d1 {
			t.Errorf("second push (revision %s) says %q, want unchanged %s", rev, r.stdout, d1)
		}
	}

	// A folder with the same files under the same names: the same digest
	// (deterministic tar, whatever the files' modes and times).
	sub := filepath.Join(dir, "m")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "manifests.yaml"), stream, 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, dir, nil, nil, bin, "flux", "push", "oci://"+reg.Ref("shop/other:1"), "--path", sub, "--source", "https://git.example/shop", "--revision", "main@sha1:1111")
	if r.err != nil || pushedDigest(t, r.stdout) != d1 {
		t.Errorf("a folder of the same file pushed %q (%v), want %s\n%s", r.stdout, r.err, d1, r.stderr)
	}

	// New content: pushed, a new digest.
	r = push(append(stream, "# changed\n"...), "--revision", "main@sha1:3333")
	if !strings.Contains(r.stdout, ": pushed sha256:") || pushedDigest(t, r.stdout) == d1 {
		t.Errorf("changed push says %q", r.stdout)
	}

	// Bad input: one line, exit 2, nothing on stdout.
	r = runCmd(t, dir, nil, nil, bin, "flux", "push", art, "--path", filepath.Join(dir, "missing"))
	if r.err == nil || r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "missing") {
		t.Errorf("a missing --path: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}

// signingSetup is what a signed push needs: digestpin, the cosign CLI in
// a folder with a key pair of cosign generate-key-pair (password
// digestpin-test), and a loopback registry.
func signingSetup(t *testing.T) (string, cosignRunner, *testregistry.Registry) {
	t.Helper()
	bin := digestpinBin(t)
	cosign := cosignRunner{bin: cosignCLI(t), dir: t.TempDir()}
	cosign.run(t, "generate-key-pair")
	return bin, cosign, testregistry.New(t)
}

// TestFluxPushSigned: an artifact pushed with --sign-key (a key of cosign
// generate-key-pair) verifies with digestpin's own verification and with
// the cosign CLI's cosign verify --key.
func TestFluxPushSigned(t *testing.T) {
	t.Parallel()
	bin, cosign, reg := signingSetup(t)
	art := reg.Ref("shop/manifests:prod")
	r := runCmd(t, cosign.dir, []byte("kind: ConfigMap\n"), []string{"COSIGN_PASSWORD=digestpin-test"}, bin,
		"flux", "push", "oci://"+art, "--path", "-", "--sign-key", "cosign.key")
	if r.err != nil || !strings.Contains(r.stdout, "pushed and signed") {
		t.Fatalf("digestpin flux push --sign-key = %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	h := pushedDigest(t, r.stdout)
	d := reg.Ref("shop/manifests") + "@" + h

	// digestpin's verification (package verify), as for any image.
	policy := "--verify=" + reg.Host() + "/shop/**=key:cosign.pub"
	pr := runCmd(t, cosign.dir, gen.Deployments("shop", art), nil, bin, policy)
	if pr.err != nil || !strings.Contains(pr.stdout, art+"@"+h) {
		t.Errorf("digestpin --verify of the artifact = %v\n%s%s", pr.err, pr.stdout, pr.stderr)
	}

	// cosign verify --key, the check of an OCIRepository's spec.verify
	// with provider cosign and a key.
	cosign.run(t, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", "--new-bundle-format=false", d)
}

// TestFluxPushSignsUnsigned: an artifact the tag holds unsigned (pushed
// without --sign-key, or by a run whose signing failed) is signed by the
// next run with --sign-key, which pushes nothing; the run after it finds
// it signed and does nothing.
func TestFluxPushSignsUnsigned(t *testing.T) {
	t.Parallel()
	bin, cosign, reg := signingSetup(t)
	art := reg.Ref("shop/manifests:prod")
	env := []string{"COSIGN_PASSWORD=digestpin-test"}
	push := func(args ...string) string {
		t.Helper()
		r := runCmd(t, cosign.dir, []byte("kind: ConfigMap\n"), env, bin, append([]string{"flux", "push", "oci://" + art, "--path", "-"}, args...)...)
		if r.err != nil {
			t.Fatalf("digestpin flux push %v = %v\n%s%s", args, r.err, r.stdout, r.stderr)
		}
		return r.stdout
	}
	h := pushedDigest(t, push())
	if out := push("--sign-key", "cosign.key"); out != art+": unchanged, not pushed (the tag holds this artifact: "+h+"), which had no signature: signed it\n" {
		t.Errorf("the unsigned artifact with --sign-key: %q", out)
	}
	if out := push("--sign-key", "cosign.key"); out != art+": unchanged, not pushed (the tag holds this artifact: "+h+")\n" {
		t.Errorf("the signed artifact with --sign-key: %q", out)
	}
	cosign.run(t, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", "--new-bundle-format=false", reg.Ref("shop/manifests")+"@"+h)
}
