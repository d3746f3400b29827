//go:build linux

package argocd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// hostileCase is an Application whose author is hostile to the operator,
// taken from the tests that run the plugin directly (e2e/argocd_*_test.go,
// e2e/cmpserver): its repository (the chart testdata/single under
// single/, plus what prepare adds to the work tree), its source path, and
// its plugin parameters and env.
type hostileCase struct {
	name    string // the Application's and its namespace's
	desc    string
	path    string // spec.source.path; "single" when empty
	prepare func(t *testing.T, work string)
	params  []map[string]any
	env     []string
	// want is what the Application's conditions must say: the words the
	// direct test expects of generate.sh or digestpin, or, where Argo CD
	// refuses first, of Argo CD.
	want string
}

// outsideFile is a file of the sidecar's (of every machine's) outside the
// repository; passwdMark is in its text, which no message may quote.
const (
	outsideFile = "/etc/passwd"
	passwdMark  = "root:x:0:0"
)

// TestHostile puts the hostile Application inputs the direct tests refuse,
// one of each kind, through the running Argo CD as real Applications:
// each one's status carries the one-line refusal the direct test expects,
// and nothing of it is applied, even when a sync is asked for. A benign
// Application beside them, whose env names sidecar settings it may not
// change, syncs, so that the test cannot pass with a plugin that renders
// nothing.
func TestHostile(t *testing.T) {
	a := startArgoCD(t)
	reg := testregistry.New(t)
	digest := reg.PushImage(t, "app:dev")
	// What the Application's x.sh writes if the sidecar ever runs it.
	marker := filepath.Join(t.TempDir(), "ran")
	// Paths a benign Application's env names as sidecar settings.
	sidecarPaths := t.TempDir()
	logFile, cacheDir, dockerConfig := filepath.Join(sidecarPaths, "log"), filepath.Join(sidecarPaths, "cache"), filepath.Join(sidecarPaths, "docker")
	// From the source folder single/ of a checkout in the sidecar's work
	// folder, enough ../ to reach /.
	up := strings.Repeat("../", 24)

	cases := []hostileCase{
		// Paths out of the repository (argocd_params_test.go,
		// argocd_config_test.go, cmpserver's TestGenerateFailures).
		{
			name:   "values-traversal",
			desc:   "a values file out of the repository through ../",
			params: []map[string]any{{"name": "values-files", "array": []string{up + "etc/passwd"}}},
			want:   "digestpin-cmp: values file " + up + "etc/passwd: outside the repository",
		},
		{
			name:   "setfile-traversal",
			desc:   "a --set-file out of the repository through ../",
			params: []map[string]any{{"name": "set-file", "map": map[string]string{"file": up + "etc/passwd"}}},
			want:   "digestpin-cmp: set-file file " + up + "etc/passwd: outside the repository",
		},
		{
			name: "lock-absolute",
			desc: "an absolute lock file path",
			env:  []string{"DIGESTPIN_LOCK=/etc/hostname"},
			want: "digestpin-cmp: lock file /etc/hostname: want a path relative to the source folder",
		},
		{
			name: "config-absolute",
			desc: "an absolute configuration file path",
			env:  []string{"DIGESTPIN_CONFIG=/etc/hostname"},
			want: "digestpin-cmp: configuration file /etc/hostname: want a path relative to the source folder",
		},
		// Symbolic links out of the repository
		// (argocd_hostile_test.go; cmpserver: the repo server refuses
		// them before the plugin sees the repository).
		{
			name: "values-link",
			desc: "a values file that is a link to /dev/zero",
			prepare: func(t *testing.T, work string) {
				mklink(t, "/dev/zero", filepath.Join(work, "single", "zero.yaml"))
			},
			params: []map[string]any{{"name": "values-files", "array": []string{"zero.yaml"}}},
			want:   "repository contains out-of-bounds symlinks. file: single/zero.yaml",
		},
		{
			name: "chart-folder-link",
			desc: "a chart folder that is a link to a sidecar folder, read by .Files.Get",
			prepare: func(t *testing.T, work string) {
				mklink(t, "/etc", filepath.Join(work, "single", "files"))
				mkfile(t, filepath.Join(work, "single", "templates", "leak.yaml"),
					"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  leak: {{ .Files.Get \"files/passwd\" | quote }}\n")
			},
			want: "repository contains out-of-bounds symlinks. file: single/files",
		},
		// The source path (argocd_hostile_test.go, TestArgoCDSourcePath).
		// Out of the repository, Argo CD's repo server refuses it before
		// the plugin runs.
		{
			name: "path-escape",
			desc: "a source path out of the repository",
			path: "single/../../single",
			want: "single/../../single: app path outside root",
		},
		// Through a link to the repository's root, as in the direct
		// test: argocd-cmp-server refuses the link itself when it
		// unpacks the repository (its Inbound check wants a target
		// strictly below the root), so the plugin never runs.
		{
			name: "path-link-root",
			desc: "a source path through a link to the repository's root",
			path: "up/up/single",
			prepare: func(t *testing.T, work string) {
				mklink(t, ".", filepath.Join(work, "up"))
			},
			want: "error decompressing tgz file: illegal filepath in symlink: ",
		},
		// Through a link to a folder of the repository, which Argo CD
		// lets through: generate.sh's own check refuses it.
		{
			name: "path-link",
			desc: "a source path through a link to a folder of the repository",
			path: "alias/single",
			prepare: func(t *testing.T, work string) {
				mklink(t, "real", filepath.Join(work, "alias"))
				for p, content := range chartFiles(t, "single", "real/single", reg.Host()) {
					mkfile(t, filepath.Join(work, p), content)
				}
			},
			want: `digestpin-cmp: ARGOCD_APP_SOURCE_PATH "alias/single": goes through a symbolic link`,
		},
		// Values that Helm or digestpin template would read as flags or
		// as more than one assignment or file (argocd_hostile_test.go).
		{
			name: "release-flag",
			desc: "a release name that is a --post-renderer flag",
			prepare: func(t *testing.T, work string) {
				mkfile(t, filepath.Join(work, "single", "x.sh"), "#!/bin/sh\necho ran >"+marker+"\ncat\n")
				if err := os.Chmod(filepath.Join(work, "single", "x.sh"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			params: []map[string]any{{"name": "release-name", "string": "--post-renderer=./x.sh"}},
			want:   "invalid release name",
		},
		{
			name:   "setfile-key-comma",
			desc:   "a set-file key with a comma naming a sidecar file",
			params: []map[string]any{{"name": "set-file", "map": map[string]string{"file=" + outsideFile + ",x": "values.yaml"}}},
			want:   `digestpin-cmp: set-file key "file=`,
		},
		{
			name: "values-comma",
			desc: "a values file with a comma and a sidecar file after it",
			prepare: func(t *testing.T, work string) {
				// The whole path exists in the repository: Helm would
				// read the sidecar's file after the comma too.
				mkfile(t, filepath.Join(work, "single", "values-two.yaml,"+outsideFile), "tag: dev\n")
			},
			params: []map[string]any{{"name": "values-files", "array": []string{"values-two.yaml," + outsideFile}}},
			want:   "digestpin-cmp: values file values-two.yaml,",
		},
		// Parameters and env the plugin refuses (argocd_params_test.go,
		// argocd_seed_test.go, retired_test.go, cmpserver).
		{
			name:   "unknown-param",
			desc:   "an unknown parameter",
			params: []map[string]any{{"name": "valueFiles", "array": []string{"values.yaml"}}},
			want:   `digestpin: error: plugin parameter "valueFiles": unknown; the digestpin plugin takes api-versions,`,
		},
		{
			name:   "bad-bool",
			desc:   "a bad boolean",
			params: []map[string]any{{"name": "skip-crds", "string": "yes"}},
			want:   "digestpin-cmp: skip-crds=yes: want true or false",
		},
		{
			name:   "seed-param",
			desc:   "a seed-file parameter",
			params: []map[string]any{{"name": "seed-file", "string": outsideFile}},
			want:   `digestpin: error: plugin parameter "seed-file": an Application cannot choose the seed`,
		},
		{
			name: "seed-env",
			desc: "the Application's DIGESTPIN_SEED_FILE",
			env:  []string{"DIGESTPIN_SEED_FILE=" + outsideFile},
			want: "digestpin: error: plugin env DIGESTPIN_SEED_FILE: an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)",
		},
		{
			name: "steady-newline",
			desc: "a retired DIGESTPIN_STEADY with a line break in its value",
			env:  []string{"DIGESTPIN_STEADY=yes\nplease"},
			want: `the Argo CD plugin env DIGESTPIN_STEADY="yes\nplease" was`,
		},
		{
			name: "bad-mode",
			desc: "a bad option",
			env:  []string{"DIGESTPIN_MODE=sideways"},
			want: `digestpin: error: invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`,
		},
		// An oversized file (argocd_hostile_test.go).
		{
			name: "values-huge",
			desc: "a values file over 64 MiB",
			prepare: func(t *testing.T, work string) {
				if err := os.MkdirAll(filepath.Join(work, "single"), 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := os.Create(filepath.Join(work, "single", "huge.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				// Sparse here; git stores it compressed, the checkout is
				// whole.
				if err := f.Truncate(64<<20 + 1); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			},
			params: []map[string]any{{"name": "values-files", "array": []string{"huge.yaml"}}},
			want:   "digestpin-cmp: values file huge.yaml: 67108865 bytes, more than 67108864 (64 MiB)",
		},
	}

	// All the Applications first, each with a repository and a namespace
	// of its own (a link out of one repository fails every Application of
	// it), so that Argo CD renders them side by side.
	files := chartFiles(t, "single", "single", reg.Host())
	for _, tc := range cases {
		repo := a.git.Repo(t, tc.name)
		if tc.prepare != nil {
			tc.prepare(t, repo.Work)
		}
		repo.Commit(t, tc.desc, files)
		path := tc.path
		if path == "" {
			path = "single"
		}
		a.create(t, app{name: tc.name, ns: tc.name, repo: repo, path: path, env: tc.env, params: tc.params})
	}
	// The control: a benign Application whose env names sidecar settings
	// (argocd_hostile_test.go, TestArgoCDApplicationEnv), which change
	// nothing.
	control := a.git.Repo(t, "benign")
	control.Commit(t, "benign", files)
	a.create(t, app{name: "benign", ns: "benign", repo: control, path: "single", env: []string{
		"DIGESTPIN_LOG_FILE=" + logFile, "DIGESTPIN_CACHE_DIR=" + cacheDir, "DOCKER_CONFIG=" + dockerConfig,
		"DIGESTPIN_INSECURE_REGISTRY=" + reg.Host(),
	}})

	t.Run("benign", func(t *testing.T) {
		t.Parallel()
		if ap := a.reconciled(t, "benign"); syncStatus(ap) != "OutOfSync" {
			t.Fatalf("benign Application: sync status %q, conditions %v; want OutOfSync", syncStatus(ap), ap.Status.Conditions)
		}
		a.sync(t, "benign")
		img := a.kubectl(t, nil, "-n", "benign", "get", "deployment", "benign", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if want := reg.Ref("app:dev") + "@" + digest.String(); img != want {
			t.Errorf("benign Application's Deployment runs %q, want %q", img, want)
		}
		for _, p := range []string{logFile, cacheDir, dockerConfig} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("the Application's env named %s: it exists (%v), want it untouched", p, err)
			}
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ap := a.reconciled(t, tc.name)
			var msgs []string
			for _, c := range ap.Status.Conditions {
				msgs = append(msgs, c.Type+": "+c.Message)
			}
			msg := strings.Join(msgs, "\n")
			t.Logf("%s: sync status %q; conditions:\n%s", tc.desc, syncStatus(ap), msg)
			i := strings.Index(msg, tc.want)
			switch {
			case i < 0:
				t.Errorf("%s: the conditions do not say %q", tc.desc, tc.want)
			case strings.Contains(msg[i:], "\n"):
				t.Errorf("%s: the refusal is not one line: %q", tc.desc, msg[i:])
			}
			if strings.Contains(msg, passwdMark) {
				t.Errorf("%s: the conditions quote %s", tc.desc, outsideFile)
			}
			if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic:") {
				t.Errorf("%s: a stack trace in the conditions", tc.desc)
			}
			if syncStatus(ap) == "Synced" {
				t.Errorf("%s: sync status Synced, want the generation failed", tc.desc)
			}
			// A sync asked for anyway applies nothing.
			ap = a.trySync(t, tc.name)
			if ap.Status.OperationState == nil || ap.Status.OperationState.Phase == "Succeeded" {
				t.Errorf("%s: sync of a refused Application: %+v, want it to fail", tc.desc, ap.Status.OperationState)
			}
			if out := a.kubectl(t, nil, "-n", tc.name, "get", "deployments,replicasets,pods,configmaps,secrets", "-o", "name"); !onlyDefaults(out) {
				t.Errorf("%s: the namespace holds %s, want nothing applied", tc.desc, out)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s: the Application's x.sh ran in the sidecar", tc.desc)
			}
		})
	}
}

// onlyDefaults reports whether `get ... -o name` lists nothing but what
// Kubernetes puts in every namespace (the kube-root-ca.crt ConfigMap).
func onlyDefaults(out string) bool {
	for _, l := range strings.Fields(out) {
		if l != "configmap/kube-root-ca.crt" {
			return false
		}
	}
	return true
}

// mkfile writes a file, creating its folder.
func mkfile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil { //nolint:gosec // a repository's files
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
