//go:build unix

package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The install without an image: the init container digestpin-install
// (scripts/argocd/plugin-install.sh, inline in argocd-values.yaml and
// repo-server-patch.yaml) places the release's binary and plugin files in
// the volume digestpin-plugin, and the sidecar runs Argo CD's own image.

const (
	pluginVolume  = "digestpin-plugin"
	pluginBinDir  = "/usr/local/digestpin/bin"
	installScript = "plugin-install.sh"
)

// container returns the container or init container name of a pod spec.
func container(t *testing.T, pod any, list, name string) map[string]any {
	t.Helper()
	c := byName(t, dig(t, pod, list))[name]
	if c == nil {
		t.Fatalf("the pod has no %s %s", list, name)
	}
	return c
}

// inlineScript returns the script of the init container digestpin-install
// in pod, failing unless it runs as `sh -c SCRIPT digestpin-install DIR`.
func inlineScript(t *testing.T, pod any) (script, dest string) {
	t.Helper()
	cmd, _ := container(t, pod, "initContainers", "digestpin-install")["command"].([]any)
	if len(cmd) != 5 || cmd[0] != "sh" || cmd[1] != "-c" || cmd[3] != "digestpin-install" {
		t.Fatalf("digestpin-install runs %q, want [sh -c SCRIPT digestpin-install DIR]", cmd)
	}
	return cmd[2].(string), cmd[4].(string)
}

// envOf returns a container's env as name → value.
func envOf(c map[string]any) map[string]string {
	out := map[string]string{}
	for _, e := range c["env"].([]any) {
		m := e.(map[string]any)
		v, _ := m["value"].(string)
		out[m["name"].(string)] = v
	}
	return out
}

// checkRepoServerPod checks the repo server's pod spec after the install
// (the kustomize patch applied, or the chart rendered with the values):
// the repo server and copyutil are untouched, the init container and the
// sidecar are there, locked down, every mount names a volume that exists
// once, the sidecar finds the files and the binary where digestpin-install
// puts them, and runs Argo CD's image wantImage.
func checkRepoServerPod(t *testing.T, pod any, repoServer string, wantImage string) {
	t.Helper()
	if got := dig(t, pod, "securityContext", "fsGroup"); got != 999 {
		t.Errorf("the pod's fsGroup = %v, want 999 (the sidecar reads the seed through it)", got)
	}
	var names []string
	for _, list := range []string{"containers", "initContainers"} {
		for _, c := range dig(t, pod, list).([]any) {
			names = append(names, list+"/"+c.(map[string]any)["name"].(string))
		}
	}
	slices.Sort(names)
	want := []string{"containers/digestpin", "containers/" + repoServer, "initContainers/copyutil", "initContainers/digestpin-install"}
	slices.Sort(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}

	// Every volume once; every mount of every container names one.
	volumes := map[string]map[string]any{}
	for _, v := range dig(t, pod, "volumes").([]any) {
		m := v.(map[string]any)
		name := m["name"].(string)
		if volumes[name] != nil {
			t.Errorf("volume %s is defined twice", name)
		}
		volumes[name] = m
	}
	for _, list := range []string{"containers", "initContainers"} {
		for _, c := range dig(t, pod, list).([]any) {
			cm := c.(map[string]any)
			seen := map[string]bool{}
			for _, m := range cm["volumeMounts"].([]any) {
				mm := m.(map[string]any)
				if volumes[mm["name"].(string)] == nil {
					t.Errorf("%s mounts volume %s, which the pod does not define", cm["name"], mm["name"])
				}
				if p := mm["mountPath"].(string); seen[p] {
					t.Errorf("%s mounts two volumes at %s", cm["name"], p)
				} else {
					seen[p] = true
				}
			}
		}
	}
	if !cmp.Equal(volumes[pluginVolume], map[string]any{"name": pluginVolume, "emptyDir": map[string]any{}}) {
		t.Errorf("volume %s = %v, want an emptyDir", pluginVolume, volumes[pluginVolume])
	}
	for name, v := range volumes {
		if s, ok := v["secret"].(map[string]any); ok && s["optional"] != true && name != "argocd-repo-server-tls" {
			t.Errorf("Secret volume %s is not optional: the repo server would not start without the Secret", name)
		}
	}

	locked := map[string]any{
		"runAsNonRoot": true, "runAsUser": 999, "allowPrivilegeEscalation": false,
		"readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}},
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
	}
	install := container(t, pod, "initContainers", "digestpin-install")
	sidecar := container(t, pod, "containers", "digestpin")
	for _, c := range []map[string]any{install, sidecar} {
		if diff := cmp.Diff(locked, c["securityContext"]); diff != "" {
			t.Errorf("%s's securityContext (-want +got):\n%s", c["name"], diff)
		}
	}
	if got := sidecar["image"]; got != wantImage {
		t.Errorf("the sidecar runs %v, want Argo CD's image %s", got, wantImage)
	}
	if !cmp.Equal(sidecar["command"], []any{"/var/run/argocd/argocd-cmp-server"}) {
		t.Errorf("the sidecar runs %v, want argocd-cmp-server", sidecar["command"])
	}

	// Where digestpin-install writes, and where the sidecar reads it.
	script, dest := inlineScript(t, pod)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", installScript))
	if err != nil {
		t.Fatal(err)
	}
	if script != string(b) {
		t.Errorf("digestpin-install's script is not scripts/argocd/%s as it is", installScript)
	}
	if !cmp.Equal(install["volumeMounts"], []any{map[string]any{"name": pluginVolume, "mountPath": dest}}) {
		t.Errorf("digestpin-install mounts %v, want only %s at %s", install["volumeMounts"], pluginVolume, dest)
	}
	mounts := map[string]map[string]any{}
	for _, m := range sidecar["volumeMounts"].([]any) {
		mm := m.(map[string]any)
		mounts[mm["mountPath"].(string)] = mm
	}
	for path, sub := range map[string]string{strings.TrimSuffix(cmpConfigDir, "/"): "config", pluginBinDir: "bin"} {
		want := map[string]any{"name": pluginVolume, "mountPath": path, "subPath": sub, "readOnly": true}
		if diff := cmp.Diff(want, mounts[path]); diff != "" {
			t.Errorf("the sidecar's mount at %s (-want +got):\n%s", path, diff)
		}
	}
	for path, name := range map[string]string{"/var/run/argocd": "var-files", "/home/argocd/cmp-server/plugins": "plugins", "/tmp": "digestpin-tmp"} {
		if mounts[path]["name"] != name {
			t.Errorf("the sidecar mounts %v at %s, want volume %s", mounts[path]["name"], path, name)
		}
	}
	env := envOf(sidecar)
	if first, _, _ := strings.Cut(env["PATH"], ":"); first != pluginBinDir || !strings.Contains(env["PATH"], ":/usr/local/bin:") {
		t.Errorf("the sidecar's PATH %q: want %s first, then the image's /usr/local/bin (helm, kustomize)", env["PATH"], pluginBinDir)
	}
	if v := envOf(install)["DIGESTPIN_VERSION"]; v != pluginVersion(t) {
		t.Errorf("digestpin-install installs DIGESTPIN_VERSION %q, want this version, %s", v, pluginVersion(t))
	}
}

// TestArgoCDRepoServerPatchKustomize applies repo-server-patch.yaml with
// the real kustomize to a repo-server Deployment in the shape of Argo CD's
// install.yaml, as the patch's comment tells kustomize users, and checks
// the result.
func TestArgoCDRepoServerPatchKustomize(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	dir := t.TempDir()
	for _, f := range []struct{ from, to string }{
		{filepath.Join(root, "testdata", "argocd-install", "repo-server.yaml"), "install.yaml"},
		{filepath.Join(root, "scripts", "argocd", "repo-server-patch.yaml"), "repo-server-patch.yaml"},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		mkfile(t, filepath.Join(dir, f.to), string(b))
	}
	mkfile(t, filepath.Join(dir, "kustomization.yaml"), `resources:
  - install.yaml
patches:
  - path: repo-server-patch.yaml
`)
	r := runCmd(t, dir, nil, nil, kustomizeBin(t), "build", ".")
	if r.err != nil {
		t.Fatalf("kustomize build: %v\n%s", r.err, r.stderr)
	}
	var out map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("kustomize build wrote no Deployment: %v\n%s", err, r.stdout)
	}
	pod := dig(t, out, "spec", "template", "spec")
	checkRepoServerPod(t, pod, "argocd-repo-server", "quay.io/argoproj/argocd:v3.3.0")

	// The repo server's own container and copyutil are as they were.
	var base map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err := yaml.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	basePod := dig(t, base, "spec", "template", "spec")
	for _, c := range []struct{ list, name string }{{"containers", "argocd-repo-server"}, {"initContainers", "copyutil"}} {
		if diff := cmp.Diff(container(t, basePod, c.list, c.name), container(t, pod, c.list, c.name)); diff != "" {
			t.Errorf("the patch changed %s (-before +after):\n%s", c.name, diff)
		}
	}
	// The sidecar runs the repo server's own image.
	if got, want := container(t, pod, "containers", "digestpin")["image"], container(t, basePod, "containers", "argocd-repo-server")["image"]; got != want {
		t.Errorf("the sidecar runs %v, the repo server %v: want the same Argo CD image", got, want)
	}
}

// TestArgoCDHelmValuesRender renders argocd-values.yaml through a chart
// that reads the same keys with the same functions as the argo-cd chart
// (testdata/argocd-install/chart), with both Helm CLIs, and checks the pod
// as the kustomize test does: the sidecar follows the chart's Argo CD
// image, its tag overrides included.
func TestArgoCDHelmValuesRender(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	chart := filepath.Join(root, "testdata", "argocd-install", "chart")
	values := filepath.Join(root, "scripts", "argocd", "argocd-values.yaml")
	for _, tc := range []struct {
		desc  string
		helm  func(*testing.T) string
		set   []string
		image string
	}{
		{desc: "helm 3, the chart's appVersion", helm: helm3, image: "quay.io/argoproj/argocd:v3.3.0"},
		{desc: "helm 4, the chart's appVersion", helm: helm4, image: "quay.io/argoproj/argocd:v3.3.0"},
		{desc: "global.image.tag", helm: helm4, set: []string{"--set", "global.image.tag=v3.3.2"}, image: "quay.io/argoproj/argocd:v3.3.2"},
		{
			desc: "a mirror for the repo server", helm: helm4,
			set:   []string{"--set", "repoServer.image.repository=mirror.example/argocd", "--set", "repoServer.image.tag=v3.3.1"},
			image: "mirror.example/argocd:v3.3.1",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			args := append([]string{"template", "argocd", chart, "-f", values}, tc.set...)
			r := runCmd(t, t.TempDir(), nil, nil, tc.helm(t), args...)
			if r.err != nil {
				t.Fatalf("helm template: %v\n%s", r.err, r.stderr)
			}
			var out map[string]any
			if err := yaml.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("helm template wrote no Deployment: %v\n%s", err, r.stdout)
			}
			pod := dig(t, out, "spec", "template", "spec")
			checkRepoServerPod(t, pod, "repo-server", tc.image)
			if got := container(t, pod, "containers", "repo-server")["image"]; got != tc.image {
				t.Errorf("the repo server runs %v, want %s", got, tc.image)
			}
		})
	}
}

// TestArgoCDInstallsAgree checks that the Helm values and the kubectl
// patch install the same init container, sidecar and volumes (the sidecar's
// image aside: the values take the chart's), so that the two cannot drift.
func TestArgoCDInstallsAgree(t *testing.T) {
	t.Parallel()
	values := readYAML(t, "argocd-values.yaml")
	patch := readYAML(t, "repo-server-patch.yaml")
	patchPod := dig(t, patch, "spec", "template", "spec")
	valuesPod := dig(t, values, "repoServer")
	if diff := cmp.Diff(dig(t, patchPod, "initContainers"), dig(t, valuesPod, "initContainers")); diff != "" {
		t.Errorf("the init containers differ (-patch +values):\n%s", diff)
	}
	pc := byName(t, dig(t, patchPod, "containers"))
	vc := byName(t, dig(t, valuesPod, "extraContainers"))
	if len(pc) != 1 || len(vc) != 1 || pc["digestpin"] == nil || vc["digestpin"] == nil {
		t.Fatalf("want one container, digestpin, in both: patch %d, values %d", len(pc), len(vc))
	}
	for field := range pc["digestpin"] {
		if field == "image" {
			continue
		}
		if diff := cmp.Diff(pc["digestpin"][field], vc["digestpin"][field]); diff != "" {
			t.Errorf("the sidecar's %s differs (-patch +values):\n%s", field, diff)
		}
	}
	if len(vc["digestpin"]) != len(pc["digestpin"]) {
		t.Errorf("the sidecar has %d fields in the values, %d in the patch", len(vc["digestpin"]), len(pc["digestpin"]))
	}
	if diff := cmp.Diff(dig(t, patchPod, "volumes"), dig(t, valuesPod, "volumes")); diff != "" {
		t.Errorf("the volumes differ (-patch +values):\n%s", diff)
	}
	if strings.Contains(inlineScriptText(t, valuesPod), "{{") {
		t.Error("the script holds {{, which the chart's tpl would read as a template")
	}
}

// inlineScriptText returns digestpin-install's script from the values'
// repoServer (initContainers only, no other lists needed).
func inlineScriptText(t *testing.T, repoServer any) string {
	t.Helper()
	s, _ := inlineScript(t, repoServer)
	return s
}

// TestArgoCDPluginInstall runs digestpin-install's script, as the values
// and the patch hold it, against this checkout's release (make release)
// served on loopback: a good archive puts the binary and the plugin's files
// where the sidecar reads them; a wrong checksum, a missing file or a
// missing SHA256SUMS line fails it with one line and leaves the volume as
// an earlier run left it.
func TestArgoCDPluginInstall(t *testing.T) {
	t.Parallel()
	dist, version := releaseFiles(t)
	archive, _, _ := releaseNames(version)
	script, _ := inlineScript(t, dig(t, readYAML(t, "repo-server-patch.yaml"), "spec", "template", "spec"))
	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	good := sums[archive]

	// Releases on loopback: the real one, and copies with one thing wrong.
	serve := filepath.Join(t.TempDir(), "srv")
	release := func(name string, sums string, files ...string) {
		d := filepath.Join(serve, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dist, f))
			if err != nil {
				t.Fatal(err)
			}
			mkfile(t, filepath.Join(d, f), string(b))
		}
		mkfile(t, filepath.Join(d, "SHA256SUMS"), sums)
	}
	bad := strings.Repeat("0", 64)
	release("good", good+"  "+archive+"\n", archive)
	release("bad-sum", bad+"  "+archive+"\n", archive)
	release("missing", good+"  "+archive+"\n")
	release("unlisted", good+"  digestpin_0.0.1_linux_amd64.tar.gz\n", archive)
	// An archive of a release before the plugin's files were in it.
	oldDir := t.TempDir()
	oldSum := writeTarGz(t, filepath.Join(oldDir, archive), map[string]string{"digestpin": "#!/bin/sh\necho digestpin " + version + "\n"})
	b, _ := os.ReadFile(filepath.Join(oldDir, archive))
	mkfile(t, filepath.Join(serve, "old", archive), string(b))
	mkfile(t, filepath.Join(serve, "old", "SHA256SUMS"), oldSum+"  "+archive+"\n")
	srv := httptest.NewServer(http.FileServer(http.Dir(serve)))
	t.Cleanup(srv.Close)

	// A PATH without curl: the script's wget branch (busybox images).
	noCurl := t.TempDir()
	for _, name := range []string{"sh", "wget", "awk", "sha256sum", "cut", "tar", "gzip", "mktemp", "rm", "mkdir", "mv", "chmod", "uname", "cat", "find"} {
		if p, err := exec.LookPath(name); err == nil {
			if err := os.Symlink(p, filepath.Join(noCurl, name)); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Fatalf("%s is not on PATH: %v", name, err)
		}
	}

	run := func(t *testing.T, dest string, env ...string) result {
		t.Helper()
		return runCmd(t, t.TempDir(), nil, append([]string{"DIGESTPIN_VERSION=" + version}, env...),
			"sh", "-c", script, "digestpin-install", dest)
	}
	checkInstalled := func(t *testing.T, dest string) {
		t.Helper()
		got := runCmd(t, "", nil, nil, filepath.Join(dest, "bin", "digestpin"), "--version")
		if got.err != nil || strings.TrimSpace(got.stdout) != "digestpin "+version {
			t.Errorf("bin/digestpin --version = %q, %v", got.stdout, got.err)
		}
		// digestpin template runs the digestpin-helm placed beside it.
		if got := runCmd(t, "", nil, nil, filepath.Join(dest, "bin", "digestpin"), "template", "--help"); got.err != nil || !strings.Contains(got.stderr, "Helm 4's engine") {
			t.Errorf("bin/digestpin template --help = %v, stderr:\n%s", got.err, got.stderr)
		}
		for _, f := range []string{"plugin.yaml", "init.sh", "generate.sh"} {
			want, _ := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", f))
			got, err := os.ReadFile(filepath.Join(dest, "config", f))
			if err != nil || string(got) != string(want) {
				t.Errorf("config/%s is not scripts/argocd/%s (%v)", f, f, err)
			}
		}
		// Every file the plugin's commands run is there, and parses
		// (the generate command is digestpin itself, in bin/).
		pluginYAML, _ := os.ReadFile(filepath.Join(dest, "config", "plugin.yaml"))
		paths := regexp.MustCompile(regexp.QuoteMeta(cmpConfigDir)+`[\w.-]+\.sh`).FindAllString(string(pluginYAML), -1)
		if len(paths) != 1 {
			t.Errorf("plugin.yaml runs %q, want init.sh", paths)
		}
		for _, p := range paths {
			f := filepath.Join(dest, "config", strings.TrimPrefix(p, cmpConfigDir))
			if r := runCmd(t, "", nil, nil, "bash", "-n", f); r.err != nil {
				t.Errorf("plugin.yaml runs %s: bash -n: %v %s", p, r.err, r.stderr)
			}
		}
		des, _ := os.ReadDir(dest)
		var left []string
		for _, de := range des {
			left = append(left, de.Name())
		}
		if !cmp.Equal(left, []string{"bin", "config"}) {
			t.Errorf("the volume holds %q, want bin and config only", left)
		}
	}

	for _, tc := range []struct {
		desc string
		env  []string
		want string // the one line on stderr; "" for success
	}{
		{desc: "a good archive", env: []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/good"}},
		{desc: "a good archive through wget", env: []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/good/", "PATH=" + noCurl}},
		{desc: "a good archive, pinned", env: []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/good", "DIGESTPIN_SHA256=" + good}},
		{desc: "a v in the version", env: []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/good", "DIGESTPIN_VERSION=v" + version}},
		{
			desc: "SHA256SUMS says another checksum",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/bad-sum"},
			want: "digestpin-install: " + archive + " has the SHA-256 " + good + ", but SHA256SUMS says " + bad + ": refusing it\n",
		},
		{
			desc: "the pinned checksum differs",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/good", "DIGESTPIN_SHA256=" + bad},
			want: "digestpin-install: " + archive + " has the SHA-256 " + good + ", but DIGESTPIN_SHA256 says " + bad + ": refusing it\n",
		},
		{
			desc: "the archive is missing",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/missing"},
			want: "digestpin-install: cannot download " + srv.URL + "/missing/" + archive + "\n",
		},
		{
			desc: "the archive is missing, through wget",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/missing", "PATH=" + noCurl},
			want: "digestpin-install: cannot download " + srv.URL + "/missing/" + archive + "\n",
		},
		{
			desc: "no release at the URL",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/gone"},
			want: "digestpin-install: cannot download " + srv.URL + "/gone/SHA256SUMS\n",
		},
		{
			desc: "SHA256SUMS does not list the archive",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/unlisted"},
			want: "digestpin-install: " + srv.URL + "/unlisted/SHA256SUMS has no line for " + archive + ": refusing it\n",
		},
		{
			desc: "a release without the plugin's files",
			env:  []string{"DIGESTPIN_RELEASE_URL=" + srv.URL + "/old"},
			want: "digestpin-install: " + archive + " does not hold digestpin digestpin-helm argocd/plugin.yaml argocd/init.sh argocd/generate.sh (a release before the plugin was in it?)\n",
		},
		{
			desc: "no version",
			env:  []string{"DIGESTPIN_VERSION=", "DIGESTPIN_RELEASE_URL=" + srv.URL + "/good"},
			want: "digestpin-install: DIGESTPIN_VERSION is not set: set it to the digestpin release to install, e.g. 0.1.0\n",
		},
		{
			desc: "a version that is a path",
			env:  []string{"DIGESTPIN_VERSION=../x", "DIGESTPIN_RELEASE_URL=" + srv.URL + "/good"},
			want: "digestpin-install: DIGESTPIN_VERSION \"../x\" is not a version\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dest := t.TempDir()
			if tc.want == "" {
				r := run(t, dest, tc.env...)
				if r.err != nil {
					t.Fatalf("digestpin-install: %v\n%s", r.err, r.stderr)
				}
				if r.stderr != "" || strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "digestpin-install: digestpin "+version+" ("+archive+", SHA-256 "+good+") placed in ") {
					t.Errorf("digestpin-install said %q on stdout and %q on stderr, want one line on stdout", r.stdout, r.stderr)
				}
				checkInstalled(t, dest)
				// Again, as a restarted init container: the same files.
				if r := run(t, dest, tc.env...); r.err != nil {
					t.Fatalf("digestpin-install again: %v\n%s", r.err, r.stderr)
				}
				checkInstalled(t, dest)
				return
			}
			// Into an empty volume, then over what a good run placed.
			r := run(t, dest, tc.env...)
			if r.err == nil || r.stderr != tc.want || r.stdout != "" {
				t.Errorf("digestpin-install: err %v, stdout %q, stderr %q; want a failure with %q", r.err, r.stdout, r.stderr, tc.want)
			}
			if des, _ := os.ReadDir(dest); len(des) != 0 {
				t.Errorf("a failed install left %d files in the volume", len(des))
			}
			if r := run(t, dest, "DIGESTPIN_RELEASE_URL="+srv.URL+"/good"); r.err != nil {
				t.Fatalf("digestpin-install: %v\n%s", r.err, r.stderr)
			}
			if r := run(t, dest, tc.env...); r.err == nil || r.stderr != tc.want {
				t.Errorf("over a good install: err %v, stderr %q; want %q", r.err, r.stderr, tc.want)
			}
			checkInstalled(t, dest)
		})
	}

	t.Run("the volume is not there", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "none")
		r := run(t, dest, "DIGESTPIN_RELEASE_URL="+srv.URL+"/good")
		if want := "digestpin-install: " + dest + " is not a folder: mount the shared volume there\n"; r.err == nil || r.stderr != want {
			t.Errorf("err %v, stderr %q; want %q", r.err, r.stderr, want)
		}
	})
}

// TestArgoCDPluginInstallRefusesHostileArchive runs digestpin-install's
// script on archives (listed in SHA256SUMS, so checked) whose binary or
// plugin file is not a regular file with no other name: each is refused in
// one line, no file the archive links to is touched, and the volume stays
// empty.
func TestArgoCDPluginInstallRefusesHostileArchive(t *testing.T) {
	t.Parallel()
	script, _ := inlineScript(t, dig(t, readYAML(t, "repo-server-patch.yaml"), "spec", "template", "spec"))
	victimPath, mark := filepath.Join(t.TempDir(), "victim"), ""
	good := map[string]tarEntry{
		"digestpin":          fileEntry("digestpin", "#!/bin/sh\necho digestpin 0.1.0\n"),
		"digestpin-helm":     fileEntry("digestpin-helm", "#!/bin/sh\necho digestpin 0.1.0\n"),
		"argocd/plugin.yaml": fileEntry("argocd/plugin.yaml", "kind: ConfigManagementPlugin\n"),
		"argocd/init.sh":     fileEntry("argocd/init.sh", "exit 0\n"),
		"argocd/generate.sh": fileEntry("argocd/generate.sh", "exit 0\n"),
	}
	for _, who := range []string{"digestpin", "digestpin-helm", "argocd/plugin.yaml", "argocd/generate.sh"} {
		for _, tc := range hostileEntries(t, who, victimPath) {
			t.Run(who+" "+tc.desc, func(t *testing.T) {
				mark = newVictim(t, victimPath)
				entries := []tarEntry{dirEntry("argocd/")}
				for _, name := range []string{"digestpin", "digestpin-helm", "argocd/plugin.yaml", "argocd/init.sh", "argocd/generate.sh"} {
					if name == who {
						entries = append(entries, tc.entries...)
					} else {
						entries = append(entries, good[name])
					}
				}
				rel := t.TempDir()
				archive := "digestpin_0.1.0_linux_amd64.tar.gz"
				sum := writeArchive(t, filepath.Join(rel, archive), entries...)
				mkfile(t, filepath.Join(rel, "SHA256SUMS"), sum+"  "+archive+"\n")
				srv := httptest.NewServer(http.FileServer(http.Dir(rel)))
				defer srv.Close()
				dest := t.TempDir()
				r := runCmd(t, t.TempDir(), nil, []string{"DIGESTPIN_VERSION=0.1.0", "DIGESTPIN_RELEASE_URL=" + srv.URL, "DIGESTPIN_ARCH=amd64"},
					"sh", "-c", script, "digestpin-install", dest)
				checkVictim(t, victimPath, mark)
				if r.err == nil || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "digestpin-install: ") {
					t.Errorf("digestpin-install = %v, stderr %q; want one error line", r.err, r.stderr)
				}
				if des, _ := os.ReadDir(dest); len(des) != 0 {
					t.Errorf("a refused archive left %d files in the volume", len(des))
				}
			})
		}
	}
}
