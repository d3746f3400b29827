package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// secretMark is what the sidecar's own files hold in these tests: it must
// never reach the manifests or a message.
const secretMark = "SIDECAR-SECRET-a8f3"

// hostileSidecar is a sidecar with a secret file of its own outside the
// repository, as the mounted docker config or the Redis password is in a
// real one. It returns the secret file's path and the marker path that
// the app's program writes when it runs.
func hostileSidecar(t *testing.T) (sc *sidecar, secret, marker string) {
	t.Helper()
	sc = newSidecar(t)
	dir := t.TempDir()
	secret = filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(secret, []byte("config:\n  password: "+secretMark+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sc, secret, filepath.Join(dir, "ran")
}

// TestArgoCDHostileApplication runs the plugin, which renders with
// digestpin template (Helm 4's engine and Helm's reading of its flags),
// for an Application whose author is hostile to the operator: parameters
// and files meant to run a program of the repository in the sidecar, to
// write a file of the sidecar's, or to render the sidecar's own files
// (credentials) into the manifests. Each must fail with one line saying
// why, with nothing on stdout, no secret anywhere, and the program not run
// (nor the file written).
func TestArgoCDHostileApplication(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushFixed(t, reg, "shop/web:1.4", "1")
	for _, tc := range []struct {
		desc string
		// prepare adds files to the source folder src (in repository
		// repo) and returns the parameters; secret is the sidecar's file
		// and marker what the app's program x.sh writes.
		prepare func(t *testing.T, src, secret string) []map[string]any
		appEnv  []string
		// want is in stderr; empty when the render may succeed (the
		// value is harmless once passed as a value).
		want string
	}{
		{
			desc: "release name that is a --post-renderer flag",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{{"name": "release-name", "string": "--post-renderer=./x.sh"}}
			},
			want: `invalid release name`,
		},
		{
			desc: "release name that is a --post-renderer flag and its value",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{{"name": "release-name", "string": "--post-renderer"}, {"name": "namespace", "string": "./x.sh"}}
			},
			want: `invalid release name`,
		},
		{
			desc: "namespace that is a flag",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{{"name": "namespace", "string": "--post-renderer=./x.sh"}}
			},
		},
		{
			desc: "release name that is digestpin's --log-file",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{{"name": "release-name", "string": "--log-file=" + filepath.Join(filepath.Dir(secret), "ran")}}
			},
			want: `invalid release name`,
		},
		{
			desc: "namespace, set keys and values that are digestpin's flags",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				log := "--log-file=" + filepath.Join(filepath.Dir(secret), "ran")
				return []map[string]any{
					{"name": "namespace", "string": log},
					{"name": "set", "map": map[string]string{"--log-file": filepath.Join(filepath.Dir(secret), "ran"), "tag": log}},
					{"name": "kube-version", "string": "--seed-file=" + secret},
				}
			},
			want: "--seed-file=", // not a Kubernetes version
		},
		{
			desc: "kube-version and api-versions that are flags",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{
					{"name": "kube-version", "string": "--post-renderer=./x.sh"},
					{"name": "api-versions", "array": []string{"--post-renderer=./x.sh"}},
				}
			},
			want: "--post-renderer=./x.sh", // helm refuses it as a version
		},
		{
			desc: "set keys and values that are flags",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{
					{"name": "set", "map": map[string]string{"--post-renderer": "./x.sh", "tag": "--post-renderer=./x.sh"}},
					{"name": "set-string", "map": map[string]string{"--post-renderer=./x.sh": "1"}},
				}
			},
		},
		{
			desc: "set-file key with a comma naming a sidecar file",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				return []map[string]any{{"name": "set-file", "map": map[string]string{"file=" + secret + ",x": "motd.txt"}}}
			},
			want: `digestpin-cmp: set-file key "file=`,
		},
		{
			desc: "set-file path with a comma and a sidecar file after it",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				// A folder named "motd.txt," in the repository makes the
				// whole path exist there.
				mkfile(t, filepath.Join(src, "motd.txt,y="+secret), "inside\n")
				return []map[string]any{{"name": "set-file", "map": map[string]string{"file": "motd.txt,y=" + secret}}}
			},
			want: "digestpin-cmp: set-file file motd.txt,y=",
		},
		{
			desc: "values file with a comma and a sidecar file after it",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				// Helm reads --values as comma-separated values: the
				// path exists in the repository, and names the sidecar's
				// file after the comma.
				mkfile(t, filepath.Join(src, "values-two.yaml,"+secret), "config: {inside: true}\n")
				return []map[string]any{{"name": "values-files", "array": []string{"values-two.yaml," + secret}}}
			},
			want: "digestpin-cmp: values file values-two.yaml,",
		},
		{
			desc:   "values file with a comma and a sidecar file after it, in VALUES_FILES",
			appEnv: []string{"VALUES_FILES=values-two.yaml"},
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mkfile(t, filepath.Join(src, "values-two.yaml,"+secret), "config: {inside: true}\n")
				return []map[string]any{{"name": "values-files", "array": []string{" values-two.yaml," + secret + " "}}}
			},
			want: "digestpin-cmp: values file values-two.yaml,",
		},
		{
			desc: "chart file that is a link to a sidecar file",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mklink(t, secret, filepath.Join(src, "files", "creds.yaml"))
				mkfile(t, filepath.Join(src, "templates", "leak.yaml"),
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  leak: {{ .Files.Get \"files/creds.yaml\" | quote }}\n")
				return nil
			},
			want: "digestpin-cmp: helm/files/creds.yaml: a symbolic link to outside the repository",
		},
		{
			desc: "chart folder that is a link to a sidecar folder",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mklink(t, filepath.Dir(secret), filepath.Join(src, "files"))
				return nil
			},
			want: "digestpin-cmp: helm/files: a symbolic link to outside the repository",
		},
		{
			desc: "values file in a linked folder that points outside",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mklink(t, filepath.Dir(secret), filepath.Join(src, "env"))
				return []map[string]any{{"name": "values-files", "array": []string{"env/secret.yaml"}}}
			},
			want: "digestpin-cmp: helm/env: a symbolic link to outside the repository",
		},
		{
			desc: "values file with .. after a link",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				// deep → a/b inside the repository: deep/../../.. is the
				// repository's parent for the kernel, not the source
				// folder as the text suggests.
				if err := os.MkdirAll(filepath.Join(src, "a", "b"), 0o755); err != nil {
					t.Fatal(err)
				}
				mklink(t, "a/b", filepath.Join(src, "deep"))
				mkfile(t, filepath.Join(src, "..", "..", "outside.yaml"), "config: {outside: true}\n")
				return []map[string]any{{"name": "values-files", "array": []string{"deep/../../../../outside.yaml"}}}
			},
			want: "digestpin-cmp: values file deep/../../../../outside.yaml: outside the repository",
		},
		{
			desc: "values file that is a FIFO",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				if err := syscall.Mkfifo(filepath.Join(src, "fifo.yaml"), 0o644); err != nil {
					t.Fatal(err)
				}
				return []map[string]any{{"name": "values-files", "array": []string{"fifo.yaml"}}}
			},
			want: "digestpin-cmp: values file fifo.yaml: not a regular file",
		},
		{
			desc: "values file that is a link to /dev/zero",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mklink(t, "/dev/zero", filepath.Join(src, "zero.yaml"))
				return []map[string]any{{"name": "values-files", "array": []string{"zero.yaml"}}}
			},
			want: "digestpin-cmp: helm/zero.yaml: a symbolic link to outside the repository",
		},
		{
			desc: "values and set-file files over 64 MiB",
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				for _, name := range []string{"huge.yaml", "huge.txt"} {
					f, err := os.Create(filepath.Join(src, name))
					if err != nil {
						t.Fatal(err)
					}
					// Sparse: no disk used, and helm would read all of it.
					if err := f.Truncate(64<<20 + 1); err != nil {
						t.Fatal(err)
					}
					f.Close()
				}
				return []map[string]any{{"name": "values-files", "array": []string{"huge.yaml"}}, {"name": "set-file", "map": map[string]string{"file": "huge.txt"}}}
			},
			want: "digestpin-cmp: values file huge.yaml: 67108865 bytes, more than 67108864 (64 MiB)",
		},
		{
			desc:   "lock file that is a link to a sidecar file",
			appEnv: []string{"DIGESTPIN_LOCK=digests.lock"},
			prepare: func(t *testing.T, src, secret string) []map[string]any {
				mklink(t, secret, filepath.Join(src, "digests.lock"))
				return nil
			},
			want: "digestpin-cmp: helm/digests.lock: a symbolic link to outside the repository",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			sc, secret, marker := hostileSidecar(t)
			src, argo := argoSource(t, "helm", reg)
			mkfile(t, filepath.Join(src, "x.sh"), "#!/bin/sh\necho ran >"+marker+"\ncat\n")
			if err := os.Chmod(filepath.Join(src, "x.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			if params := tc.prepare(t, src, secret); params != nil {
				argo = append(argo, parameters(t, params...))
			}
			r := sc.generateWith(t, src, argo, tc.appEnv...)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the Application's x.sh ran in the sidecar")
			}
			if strings.Contains(r.stdout, secretMark) || strings.Contains(r.stderr, secretMark) {
				t.Fatalf("the sidecar's secret file reached the output:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			if tc.want == "" {
				return
			}
			if r.err == nil {
				t.Fatalf("generate succeeded, want a failure; stdout:\n%s", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("a failed generation printed:\n%s", r.stdout)
			}
		})
	}
}

// mkfile writes a file, creating its folder.
func mkfile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mklink makes a symbolic link, creating its folder.
func mklink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestArgoCDSourcePath: the repository's root is the source folder
// without ARGOCD_APP_SOURCE_PATH, which Argo CD passes as the Application
// wrote it. A path such as ./helm, or one through a link inside the
// repository, must not make a folder above the repository its root: the
// files beside the repository would pass for its own.
func TestArgoCDSourcePath(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushFixed(t, reg, "shop/web:1.4", "1")
	sc, _, _ := hostileSidecar(t)
	for _, tc := range []struct {
		desc, path string
		dir        string // the folder Argo CD runs the plugin in, under the repository
		want       string
	}{
		{desc: "a leading ./", path: "./helm", dir: "helm", want: "digestpin-cmp: values file ../../outside.yaml: outside the repository"},
		{desc: "dots and slashes", path: "././/helm/./", dir: "helm", want: "digestpin-cmp: values file ../../outside.yaml: outside the repository"},
		{desc: "through a link", path: "up/up/helm", dir: "up/up/helm", want: `digestpin-cmp: ARGOCD_APP_SOURCE_PATH "up/up/helm": goes through a symbolic link`},
		{desc: "out of the repository", path: "helm/../../helm", dir: "helm", want: `digestpin-cmp: ARGOCD_APP_SOURCE_PATH "helm/../../helm": leaves the repository`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src, _ := argoSource(t, "helm", reg)
			repo := filepath.Dir(src)
			mklink(t, ".", filepath.Join(repo, "up"))
			// Beside the repository: what another Application's checkout
			// or the sidecar's files would be.
			mkfile(t, filepath.Join(repo, "..", "outside.yaml"), "config:\n  password: "+secretMark+"\n")
			argo := []string{"ARGOCD_APP_SOURCE_PATH=" + tc.path, parameters(t, map[string]any{"name": "values-files", "array": []string{"../../outside.yaml"}})}
			r := sc.generateWith(t, filepath.Join(repo, tc.dir), argo)
			if strings.Contains(r.stdout, secretMark) {
				t.Fatalf("a file beside the repository reached the output:\n%s", r.stdout)
			}
			if r.err == nil || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("generate: %v, stderr:\n%s\nwant a failure containing %q", r.err, r.stderr, tc.want)
			}
		})
	}
}

// TestArgoCDApplicationEnv: of the variables an Application sets
// (ARGOCD_ENV_*), only those generate.sh lists reach digestpin; one that
// names a sidecar setting (a log or cache folder, the docker config, an
// insecure registry) changes nothing.
func TestArgoCDApplicationEnv(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digest := pushFixed(t, reg, "shop/web:1.4", "1")
	sc := newSidecar(t)
	src, argo := argoSource(t, "helm", reg)
	dir := t.TempDir()
	paths := map[string]string{
		"DIGESTPIN_LOG_FILE":  filepath.Join(dir, "log"),
		"DIGESTPIN_CACHE_DIR": filepath.Join(dir, "cache"),
		"DIGESTPIN_REPORT":    filepath.Join(dir, "report.json"),
		"DOCKER_CONFIG":       filepath.Join(dir, "docker"),
		"HELM_CACHE_HOME":     filepath.Join(dir, "helm-cache"),
	}
	appEnv := []string{"DIGESTPIN_CACHE_TTL=1h", "DIGESTPIN_INSECURE_REGISTRY=" + reg.Host()}
	for name, p := range paths {
		appEnv = append(appEnv, name+"="+p)
	}
	r := sc.generateWith(t, src, argo, appEnv...)
	if r.err != nil {
		t.Fatalf("generate: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "@"+digest.String()) {
		t.Errorf("output does not pin shop/web:1.4:\n%s", r.stdout)
	}
	for name, p := range paths {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("ARGOCD_ENV_%s=%s: the path exists (%v), want it untouched", name, p, err)
		}
	}
}
