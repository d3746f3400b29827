package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// readYAML reads scripts/argocd/NAME into a generic value.
func readYAML(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	return v
}

// dig returns the value at the path of keys in v, failing the test when
// one is missing.
func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok || m[k] == nil {
			t.Fatalf("no %s", strings.Join(keys[:i+1], "."))
		}
		v = m[k]
	}
	return v
}

// byName returns the entries of a list of named objects (containers,
// volumes, mounts) by name.
func byName(t *testing.T, list any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	items, _ := list.([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		out[name] = m
	}
	return out
}

// dockerignored reports whether .dockerignore's patterns (in order, the
// last match wins, "!" re-includes) leave path out of the build context, as
// Docker decides it: a pattern matches a path or any folder above it.
func dockerignored(patterns []string, path string) bool {
	ignored := false
	for _, p := range patterns {
		include := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		for q := path; q != "." && q != "/"; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(p, q); ok {
				ignored = !include
				break
			}
		}
	}
	return ignored
}

// TestArgoCDImageContext checks the sidecar image's Dockerfile without
// Docker (not on the test machines): the build context that .dockerignore
// leaves is exactly the files the Dockerfile copies; the binaries come from
// released archives, each checked against a SHA-256 that is a build
// argument, of the versions the tests run.
func TestArgoCDImageContext(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, p := range []string{".cache/helm-v4.3.1/helm", "bin/digestpin", "dist/SHA256SUMS", ".git/config", "go.mod", "testdata/chart/Chart.yaml"} {
		if !dockerignored(patterns, p) {
			t.Errorf(".dockerignore keeps %s in the build context", p)
		}
	}
	var context []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		if d.IsDir() && (rel == ".git" || rel == ".cache") {
			return filepath.SkipDir // checked above; large
		}
		if !d.IsDir() && !dockerignored(patterns, rel) {
			context = append(context, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	df, err := os.ReadFile(filepath.Join(root, "scripts", "argocd", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(df)
	var copied []string
	for _, m := range regexp.MustCompile(`(?m)^COPY +([^-\n][^\n]*)$`).FindAllStringSubmatch(dockerfile, -1) {
		f := strings.Fields(m[1])
		copied = append(copied, f[:len(f)-1]...)
	}
	slices.Sort(context)
	slices.Sort(copied)
	if diff := cmp.Diff(copied, context); diff != "" {
		t.Errorf("the build context is not the files the Dockerfile copies (-copied +context):\n%s", diff)
	}

	for _, bad := range []string{"go build", "go install", "golang", "make "} {
		if strings.Contains(dockerfile, bad) {
			t.Errorf("the Dockerfile compiles (%q): it must copy released binaries", bad)
		}
	}
	args := map[string]string{} // ARG name → default ("" for none)
	for _, m := range regexp.MustCompile(`(?m)^ARG ([A-Z0-9_]+)(?:=(\S*))?$`).FindAllStringSubmatch(dockerfile, -1) {
		args[m[1]] = m[2]
	}
	for _, a := range []string{"DIGESTPIN_VERSION", "HELM_SHA256", "KUSTOMIZE_SHA256"} {
		if d, ok := args[a]; !ok || d != "" {
			t.Errorf("ARG %s: declared %v, default %q; want a build argument without a default", a, ok, d)
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for arg, mkVar := range map[string]string{"HELM_VERSION": "HELM4_VERSION", "KUSTOMIZE_VERSION": "KUSTOMIZE_VERSION"} {
		want := ""
		if m := regexp.MustCompile(`(?m)^` + mkVar + ` := (\S+)$`).FindSubmatch(mk); m != nil {
			want = string(m[1])
		}
		if want == "" || args[arg] != want {
			t.Errorf("Dockerfile ARG %s=%s, want the Makefile's %s (%q), the version the tests run", arg, args[arg], mkVar, want)
		}
	}
}

// writeTarGz writes a gzipped tar archive of files (name → content, each
// an executable) to path, and returns its SHA-256.
func writeTarGz(t *testing.T, path string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// TestArgoCDImageFetch runs image-fetch.sh, the sidecar image's download
// step, as the Dockerfile does, against a digestpin release and Helm and
// kustomize archives served on loopback, laid out as the real ones are.
func TestArgoCDImageFetch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool := func(name string) string { return "#!/bin/sh\necho " + name + "\n" }
	dpSum := writeTarGz(t, filepath.Join(dir, "digestpin_0.1.0_linux_amd64.tar.gz"),
		map[string]string{"digestpin": tool("digestpin"), "digestpin-helm": tool("digestpin-helm"), "LICENSE": "Apache-2.0\n", "README.md": "#\n"})
	helmSum := writeTarGz(t, filepath.Join(dir, "helm-v4.3.1-linux-amd64.tar.gz"),
		map[string]string{"linux-amd64/helm": tool("helm"), "linux-amd64/LICENSE": "Apache-2.0\n"})
	kzSum := writeTarGz(t, filepath.Join(dir, "kustomize_v5.8.1_linux_amd64.tar.gz"), map[string]string{"kustomize": tool("kustomize")})
	// Archives that SHA256SUMS lists with another sum, or not at all.
	armSum := writeTarGz(t, filepath.Join(dir, "digestpin_0.1.0_linux_arm64.tar.gz"), map[string]string{"digestpin": tool("digestpin")})
	writeTarGz(t, filepath.Join(dir, "digestpin_0.0.9_linux_amd64.tar.gz"), map[string]string{"digestpin": tool("digestpin")})
	sums := dpSum + "  digestpin_0.1.0_linux_amd64.tar.gz\n" + strings.Repeat("0", 64) + "  digestpin_0.1.0_linux_arm64.tar.gz\n"
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	fetch := filepath.Join(repoRoot(t), "scripts", "argocd", "image-fetch.sh")
	base := []string{
		"DIGESTPIN_VERSION=0.1.0", "DIGESTPIN_RELEASE_URL=" + srv.URL,
		"HELM_VERSION=v4.3.1", "HELM_SHA256=" + helmSum, "HELM_URL=" + srv.URL,
		"KUSTOMIZE_VERSION=v5.8.1", "KUSTOMIZE_SHA256=" + kzSum, "KUSTOMIZE_URL=" + srv.URL,
		"TARGETARCH=amd64",
	}
	for _, tc := range []struct {
		desc string
		env  []string // replaces base's
		want string   // the one line on stderr; "" for success
	}{
		{desc: "all three checked"},
		{desc: "no TARGETARCH, as the classic builder", env: []string{"TARGETARCH="}},
		{
			desc: "a Helm archive that is not the one checked",
			env:  []string{"HELM_SHA256=" + kzSum},
			want: "digestpin-cmp image: helm-v4.3.1-linux-amd64.tar.gz has the SHA-256 " + helmSum + ", want " + kzSum + ": refusing it\n",
		},
		{
			desc: "a kustomize archive that is not the one checked",
			env:  []string{"KUSTOMIZE_SHA256=" + helmSum},
			want: "digestpin-cmp image: kustomize_v5.8.1_linux_amd64.tar.gz has the SHA-256 " + kzSum + ", want " + helmSum + ": refusing it\n",
		},
		{
			desc: "a digestpin archive that SHA256SUMS does not list",
			env:  []string{"DIGESTPIN_VERSION=0.0.9"},
			want: "digestpin-cmp image: " + srv.URL + "/SHA256SUMS has no line for digestpin_0.0.9_linux_amd64.tar.gz: refusing it\n",
		},
		{
			desc: "a digestpin archive whose SHA256SUMS line differs",
			env:  []string{"TARGETARCH=arm64"},
			want: "digestpin-cmp image: digestpin_0.1.0_linux_arm64.tar.gz has the SHA-256 " + armSum + ", want " + strings.Repeat("0", 64) + ": refusing it\n",
		},
		{
			desc: "a release that is not there",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/gone"},
			want: "digestpin-cmp image: cannot download " + srv.URL + "/gone/SHA256SUMS\n",
		},
		{
			desc: "no Helm checksum",
			env:  []string{"HELM_SHA256="},
			want: "digestpin-cmp image: build argument HELM_SHA256 is required (the SHA-256 of helm-v4.3.1-linux-amd64.tar.gz)\n",
		},
		{
			desc: "no digestpin version",
			env:  []string{"DIGESTPIN_VERSION="},
			want: "digestpin-cmp image: build argument DIGESTPIN_VERSION is required (a released version, e.g. 0.1.0)\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "bin")
			r := runCmd(t, t.TempDir(), nil, append(slices.Clone(base), tc.env...), fetch, bin)
			if tc.want != "" {
				if r.err == nil || r.stderr != tc.want {
					t.Errorf("image-fetch.sh: err %v, stderr %q; want a failure with %q", r.err, r.stderr, tc.want)
				}
				if _, err := os.Stat(bin); !os.IsNotExist(err) {
					t.Errorf("a failed fetch left %s (%v)", bin, err)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("image-fetch.sh: %v\n%s", r.err, r.stderr)
			}
			for _, name := range []string{"digestpin", "digestpin-helm", "helm", "kustomize"} {
				out := runCmd(t, bin, nil, nil, filepath.Join(bin, name))
				if out.err != nil || out.stdout != name+"\n" {
					t.Errorf("%s from the archive: %v %q", name, out.err, out.stdout)
				}
			}
			des, err := os.ReadDir(bin)
			if err != nil || len(des) != 4 {
				t.Errorf("bin holds %d files (%v), want the four binaries", len(des), err)
			}
		})
	}
}

// TestArgoCDSeedMount checks how both installs give the sidecar its seed:
// the Secret digestpin-seed, every key, mode 0400, optional (the repo
// server starts without it; the plugin then fails naming it), mounted
// read-only in the sidecar alone, at the folder of DIGESTPIN_SEED_FILE;
// the pod's fsGroup is the sidecar's user, so that it can read a file the
// kubelet writes as root. Neither install holds a Secret's value.
func TestArgoCDSeedMount(t *testing.T) {
	t.Parallel()
	patch := readYAML(t, "repo-server-patch.yaml")
	values := readYAML(t, "argocd-values.yaml")
	pod := dig(t, patch, "spec", "template", "spec")
	if got := dig(t, pod, "securityContext", "fsGroup"); got != 999 {
		t.Errorf("repo-server-patch.yaml: the pod's fsGroup = %v, want 999", got)
	}
	if got := dig(t, values, "global", "securityContext", "fsGroup"); got != 999 {
		t.Errorf("argocd-values.yaml: global.securityContext.fsGroup = %v, want 999", got)
	}
	c := byName(t, pod.(map[string]any)["containers"])["digestpin"]
	if user := dig(t, c, "securityContext", "runAsUser"); user != 999 {
		t.Errorf("the sidecar runs as %v, want 999 (the fsGroup)", user)
	}
	seedFile := ""
	for _, e := range c["env"].([]any) {
		if m := e.(map[string]any); m["name"] == "DIGESTPIN_SEED_FILE" {
			seedFile, _ = m["value"].(string)
		}
	}
	var mount map[string]any
	for _, m := range c["volumeMounts"].([]any) {
		if mm := m.(map[string]any); mm["name"] == "digestpin-seed" {
			mount = mm
		}
	}
	if mount == nil || seedFile == "" {
		t.Fatalf("the sidecar mounts no volume digestpin-seed (%v), or has no DIGESTPIN_SEED_FILE (%q)", mount, seedFile)
	}
	if mount["readOnly"] != true || mount["subPath"] != nil || seedFile != mount["mountPath"].(string)+"/seed" {
		t.Errorf("seed mount %v with DIGESTPIN_SEED_FILE=%s: want the whole volume, read-only, at the folder of DIGESTPIN_SEED_FILE, key seed", mount, seedFile)
	}
	want := map[string]any{"secretName": "digestpin-seed", "optional": true, "defaultMode": 0o400}
	if diff := cmp.Diff(want, dig(t, byName(t, dig(t, pod, "volumes"))["digestpin-seed"], "secret")); diff != "" {
		t.Errorf("volume digestpin-seed (-want +got):\n%s", diff)
	}
	// Neither install writes a Secret: the seed is made where it is kept.
	for _, name := range []string{"repo-server-patch.yaml", "argocd-values.yaml", "plugin.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", name))
		if err != nil {
			t.Fatal(err)
		}
		if regexp.MustCompile(`(?m)^\s*(kind: Secret|secretGenerator:|stringData:)`).Match(b) {
			t.Errorf("%s holds a Secret", name)
		}
	}
}
