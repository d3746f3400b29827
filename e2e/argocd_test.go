package e2e

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
)

func init() {
	// -update rewrites golden files; another test file may define it too.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/")
	}
}

// updating reports whether the tests run with -update.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// cmpConfigDir is where the sidecar finds the plugin's files
// (repo-server-patch.yaml mounts them there); the test runs the same files
// from scripts/argocd/.
const cmpConfigDir = testfiles.ArgoCDConfigDir

// shopImages are the images of testdata/argocd-app, by repository:tag.
var shopImages = []string{"shop/migrate:1.4", "shop/web:1.4", "shop/proxy:2.1", "shop/worker:2.0"}

// pushFixed pushes an image whose digest depends only on repoTag and
// version, so that golden files can hold digests.
func pushFixed(t *testing.T, reg *testregistry.Registry, repoTag, version string) v1.Hash {
	t.Helper()
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS: "linux", Architecture: "amd64",
		Config: v1.Config{Labels: map[string]string{"image": repoTag, "version": version}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg.Push(t, repoTag, img)
}

// pushShop pushes every image of the shop app, at version "1".
func pushShop(t *testing.T, reg *testregistry.Registry) map[string]v1.Hash {
	t.Helper()
	digests := map[string]v1.Hash{}
	for _, im := range shopImages {
		digests[im] = pushFixed(t, reg, im, "1")
	}
	reg.ResetCounts()
	return digests
}

// toolPath returns a PATH with helm (the Helm v4 CLI, or another one
// given in tools) and digestpin first, as in the sidecar image, and the
// other tools given (name → executable).
func toolPath(t *testing.T, tools map[string]string) string {
	t.Helper()
	bin := t.TempDir()
	all := map[string]string{"digestpin": digestpinBin(t)}
	if tools["helm"] == "" {
		all["helm"] = helm4(t)
	}
	maps.Copy(all, tools)
	for name, target := range all {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// cmpCommand is one command of the plugin's ConfigManagementPlugin.
type cmpCommand struct {
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
}

// pluginCommands reads scripts/argocd/plugin.yaml and returns its init and
// generate commands, with the sidecar's config folder mapped to
// scripts/argocd/, and digestpin to the binary under test.
func pluginCommands(t *testing.T) (initCmd, generate []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			Init     cmpCommand `yaml:"init"`
			Generate cmpCommand `yaml:"generate"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("parsing plugin.yaml: %v", err)
	}
	if p.APIVersion != "argoproj.io/v1alpha1" || p.Kind != "ConfigManagementPlugin" {
		t.Fatalf("plugin.yaml is %s %s, want argoproj.io/v1alpha1 ConfigManagementPlugin", p.APIVersion, p.Kind)
	}
	local := filepath.Join(repoRoot(t), "scripts", "argocd") + "/"
	mapPaths := func(c cmpCommand) []string {
		var out []string
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			out = append(out, strings.ReplaceAll(a, cmpConfigDir, local))
		}
		return out
	}
	initCmd, generate = mapPaths(p.Spec.Init), mapPaths(p.Spec.Generate)
	if len(generate) == 0 {
		t.Fatal("plugin.yaml has no generate command")
	}
	// The sidecar finds digestpin on its PATH, where toolPath puts the
	// one under test.
	for _, c := range [][]string{initCmd, generate} {
		if len(c) > 0 && c[0] == "digestpin" {
			c[0] = digestpinBin(t)
		}
	}
	return initCmd, generate
}

// argoApp copies testdata/argocd-app, as Argo CD unpacks a repository for
// the plugin, writes web/values-e2e.yaml with the given values, and returns
// the Application's source folder.
func argoApp(t *testing.T, values string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(repoRoot(t), "testdata", "argocd-app"))); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(repo, "web")
	if err := os.WriteFile(filepath.Join(src, "values-e2e.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// registryValues points the shop's chart at reg.
func registryValues(reg *testregistry.Registry) string {
	return "global:\n  registry: " + reg.Host() + "\n"
}

// sidecar is the environment Argo CD's repo server gives the plugin.
type sidecar struct {
	path  string // PATH with helm and digestpin
	home  string // HOME, Helm's homes and the cache folder live under it
	seeds string // the Secret digestpin-seed's volume, at $HOME/digestpin-seed
}

func newSidecar(t *testing.T) *sidecar {
	t.Helper()
	return newSidecarWith(t, nil)
}

// newSidecarWith returns a sidecar with the given tools on its PATH (see
// toolPath), and a new seed in its Secret volume as
// repo-server-patch.yaml mounts it (key seed, defaultMode 0400 under the
// pod's fsGroup: 0440).
func newSidecarWith(t *testing.T, tools map[string]string) *sidecar {
	t.Helper()
	home := t.TempDir()
	s := &sidecar{path: toolPath(t, tools), home: home, seeds: filepath.Join(home, "digestpin-seed")}
	s.mountSeeds(t, map[string]string{"seed": seedText(t)}, 0o440)
	return s
}

// mountSeeds makes the sidecar's Secret volume hold files (key → content)
// with mode, as the kubelet writes it (testfiles.SecretVolume); with no
// files, the volume is empty, as it is while the optional Secret does not
// exist.
func (s *sidecar) mountSeeds(t *testing.T, files map[string]string, mode os.FileMode) {
	t.Helper()
	if err := os.RemoveAll(s.seeds); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.seeds, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(files) > 0 {
		testfiles.SecretVolume(t, s.seeds, files, mode)
	}
}

// seedText returns a new seed, as `digestpin seed` writes it.
func seedText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(newSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// env returns the sidecar's environment for one generation, with the
// Application's plugin env (NAME=value, prefixed with ARGOCD_ENV_ as Argo
// CD does).
func (s *sidecar) env(appEnv ...string) []string { return s.envWith(nil, appEnv...) }

// envWith is env with the variables in argo (NAME=value, as they are)
// added or replaced: what else Argo CD sets, such as ARGOCD_APP_PARAMETERS.
func (s *sidecar) envWith(argo []string, appEnv ...string) []string {
	env := []string{
		"PATH=" + s.path,
		"HOME=" + s.home,
		"HELM_CONFIG_HOME=" + filepath.Join(s.home, "helm", "config"),
		"HELM_CACHE_HOME=" + filepath.Join(s.home, "helm", "cache"),
		"HELM_DATA_HOME=" + filepath.Join(s.home, "helm", "data"),
		"DOCKER_CONFIG=" + filepath.Join(s.home, ".docker"),
		"XDG_CACHE_HOME=" + filepath.Join(s.home, "cache"),
		// repo-server-patch.yaml's, under this HOME.
		"DIGESTPIN_SEED_FILE=" + filepath.Join(s.seeds, "seed"),
		"ARGOCD_APP_NAME=shop",
		"ARGOCD_APP_NAMESPACE=prod",
		"ARGOCD_APP_PROJECT_NAME=default",
		"ARGOCD_APP_SOURCE_PATH=web",
		"ARGOCD_APP_REVISION=0123456789abcdef0123456789abcdef01234567",
		"KUBE_VERSION=1.34.1",
		"KUBE_API_VERSIONS=admissionregistration.k8s.io/v1,apps/v1,batch/v1,batch/v1/CronJob,v1",
	}
	env = append(env, argo...) // the last one of a name wins
	for _, kv := range appEnv {
		env = append(env, "ARGOCD_ENV_"+kv)
	}
	return env
}

// generate runs the plugin's init command, then its generate command, in
// src, as the sidecar does for every manifest generation.
func (s *sidecar) generate(t *testing.T, src string, appEnv ...string) result {
	t.Helper()
	return s.generateWith(t, src, nil, appEnv...)
}

// generateWith is generate with the variables in argo set as they are (see
// envWith).
func (s *sidecar) generateWith(t *testing.T, src string, argo []string, appEnv ...string) result {
	t.Helper()
	initCmd, gen := pluginCommands(t)
	env := s.envWith(argo, appEnv...)
	if len(initCmd) > 0 {
		if r := runCmd(t, src, nil, env, initCmd[0], initCmd[1:]...); r.err != nil {
			return r
		}
	}
	return runCmd(t, src, nil, env, gen[0], gen[1:]...)
}

var checksumLine = regexp.MustCompile(`(checksum/images: )['"]?[0-9a-f]{64}['"]?`)

// normalize replaces what changes between test runs: the registry's
// address, and the checksums that cover it.
func normalize(out string, reg *testregistry.Registry) string {
	out = strings.ReplaceAll(out, reg.Host(), "REGISTRY")
	return checksumLine.ReplaceAllString(out, "${1}CHECKSUM")
}

func TestArgoCDGenerateLive(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	sc := newSidecar(t)
	src := argoApp(t, registryValues(reg))
	env := []string{"VALUES_FILES=values-prod.yaml, values-e2e.yaml"}

	first := sc.generate(t, src, env...)
	if first.err != nil {
		t.Fatalf("generate: %v\nstderr:\n%s", first.err, first.stderr)
	}
	// Each distinct image is asked for once, with one HEAD request.
	if n := reg.Count("HEAD manifests"); n != len(shopImages) {
		t.Errorf("HEAD manifests = %d, want %d", n, len(shopImages))
	}
	if n := reg.Count("GET manifests"); n != 0 {
		t.Errorf("GET manifests = %d, want 0", n)
	}
	for _, im := range shopImages {
		if want := reg.Ref(im) + "@" + digests[im].String(); !strings.Contains(first.stdout, "image: "+want) {
			t.Errorf("output does not pin %s to %s", im, digests[im])
		}
	}
	golden := filepath.Join(repoRoot(t), "testdata", "argocd-app", "argocd-generate.golden.yaml")
	got := normalize(first.stdout, reg)
	if updating() {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (go test ./e2e -run ArgoCD -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("generate output mismatch (-want +got):\n%s", diff)
	}

	// Argo CD re-renders every few minutes: the same registry state gives
	// the same bytes.
	again := sc.generate(t, src, env...)
	if again.err != nil || again.stdout != first.stdout {
		t.Errorf("second generate differs (err %v):\n%s", again.err, cmp.Diff(first.stdout, again.stdout))
	}

	// The mutable-tag workflow: CI pushes shop/web:1.4 again and asks for a
	// hard refresh; the next generation pins the new digest in exactly the
	// templates that use it.
	moved := pushFixed(t, reg, "shop/web:1.4", "2")
	refreshed := sc.generate(t, src, env...)
	if refreshed.err != nil {
		t.Fatalf("generate after a push: %v\n%s", refreshed.err, refreshed.stderr)
	}
	changed := changedSources(t, first.stdout, refreshed.stdout)
	if want := []string{"web/templates/cronjob.yaml", "web/templates/deployment.yaml"}; !cmp.Equal(want, changed) {
		t.Errorf("documents changed by a push of shop/web:1.4 = %v, want %v", changed, want)
	}
	if !strings.Contains(refreshed.stdout, moved.String()) {
		t.Errorf("refreshed output does not pin the new digest %s", moved)
	}
}

// changedSources returns the "# Source:" files of the documents that
// differ between two outputs of the same chart.
func changedSources(t *testing.T, a, b string) []string {
	t.Helper()
	da, db := documents(t, a), documents(t, b)
	var out []string
	for i := range min(len(da), len(db)) {
		if da[i] == db[i] {
			continue
		}
		for _, l := range strings.Split(db[i], "\n") {
			if s, ok := strings.CutPrefix(l, "# Source: "); ok {
				out = append(out, s)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestArgoCDGenerateFailures(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	for _, tc := range []struct {
		desc   string
		values string
		env    []string
		links  map[string]string // link in the source folder → target
		want   []string
	}{
		{
			desc:   "an image the registry does not have",
			values: registryValues(reg) + "image:\n  tag: \"9.9\"\n",
			env:    []string{"VALUES_FILES=values-e2e.yaml"},
			want: []string{
				"digestpin: error:", "web/templates/deployment.yaml",
				": " + reg.Ref("shop/migrate:9.9") + ": ", ": " + reg.Ref("shop/web:9.9") + ": ",
			},
		},
		{
			desc:   "helm fails",
			values: "global:\n  registry: \"\"\n",
			env:    []string{"VALUES_FILES=values-e2e.yaml"},
			want:   []string{"global.registry is required"},
		},
		{
			desc:   "a values file outside the repository",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml,../../outside.yaml"},
			want:   []string{"digestpin-cmp: values file ", ": outside the repository"},
		},
		{
			desc:   "an absolute lock file path",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_LOCK=/etc/hostname"},
			want:   []string{"digestpin-cmp: lock file /etc/hostname: want a path relative to the source folder"},
		},
		// Named as the Application wrote it (before: --mode, which it
		// never wrote).
		{
			desc:   "a bad option",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_MODE=sideways"},
			want:   []string{`invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`},
		},
		{
			desc:   "a bad platform",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_PLATFORM=linux"},
			want:   []string{`invalid DIGESTPIN_PLATFORM "linux": want os/arch`},
		},
		{
			desc:   "a bad cache TTL",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_CACHE_TTL=soon"},
			want:   []string{`invalid DIGESTPIN_CACHE_TTL "soon"`},
		},
		{
			desc:   "a lock file linked out of the repository",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_LOCK=digests.lock"},
			links:  map[string]string{"digests.lock": "../../outside.yaml"},
			// Every link of the repository is checked first.
			want: []string{"digestpin-cmp: web/digests.lock: a symbolic link to outside the repository (../../outside.yaml)"},
		},
		{
			desc:   "a values file in a folder linked out of the repository",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=values-e2e.yaml,elsewhere/outside.yaml"},
			links:  map[string]string{"elsewhere": "../../elsewhere"},
			want:   []string{"digestpin-cmp: web/elsewhere: a symbolic link to outside the repository (../../elsewhere)"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src := argoApp(t, tc.values)
			// A file beside the repository, which no Application may read.
			if err := os.WriteFile(filepath.Join(src, "..", "..", "outside.yaml"), []byte("replicas: 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// And a folder beside it.
			if err := os.MkdirAll(filepath.Join(src, "..", "..", "elsewhere"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "..", "..", "elsewhere", "outside.yaml"), []byte("replicas: 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for link, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(src, link)); err != nil {
					t.Fatal(err)
				}
			}
			r := sc.generate(t, src, tc.env...)
			if strings.Contains(r.stderr, "replicas") {
				t.Errorf("stderr quotes the outside file:\n%s", r.stderr)
			}
			if r.err == nil {
				t.Fatalf("generate succeeded, want a failure; stdout:\n%s", r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stdout, "image:") {
				t.Errorf("a failed generation printed manifests:\n%s", r.stdout)
			}
		})
	}
}

func TestArgoCDLockMode(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	src := argoApp(t, registryValues(reg))
	values := "VALUES_FILES=values-prod.yaml,values-e2e.yaml"
	live := sc.generate(t, src, values)
	if live.err != nil {
		t.Fatalf("live generate: %v\n%s", live.err, live.stderr)
	}

	// CI records the lock next to the chart (and commits it).
	r := runCmd(t, src, nil, sc.env(), filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh"),
		"--lock", "digests.lock", ".", "--values", "values-prod.yaml", "--values", "values-e2e.yaml", "--api-versions", "batch/v1/CronJob")
	if r.err != nil {
		t.Fatalf("digestpin-lock.sh: %v\n%s", r.err, r.stderr)
	}

	// Argo CD renders from git alone: the same manifests, no registry
	// request, even after the tag moved.
	pushFixed(t, reg, "shop/web:1.4", "2")
	reg.ResetCounts()
	locked := sc.generate(t, src, values, "DIGESTPIN_LOCK=digests.lock")
	if locked.err != nil {
		t.Fatalf("generate with the lock: %v\n%s", locked.err, locked.stderr)
	}
	if locked.stdout != live.stdout {
		t.Errorf("lock-mode output differs from the live output:\n%s", cmp.Diff(live.stdout, locked.stdout))
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("lock mode made %d registry requests, want 0", n)
	}

	// An image missing from the lock fails the generation, naming it,
	// still without a registry request.
	l, err := lockfile.Read(filepath.Join(src, "digests.lock"))
	if err != nil {
		t.Fatal(err)
	}
	entries := slices.DeleteFunc(l.Entries(), func(e lockfile.Entry) bool { return strings.HasSuffix(e.Reference, "/shop/worker:2.0") })
	short, err := lockfile.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := short.WriteFile(filepath.Join(src, "digests.lock")); err != nil {
		t.Fatal(err)
	}
	miss := sc.generate(t, src, values, "DIGESTPIN_LOCK=digests.lock")
	if miss.err == nil {
		t.Fatal("generate with an incomplete lock succeeded")
	}
	if want := ": " + reg.Ref("shop/worker:2.0") + ": not in the lock file"; !strings.Contains(miss.stderr, want) {
		t.Errorf("stderr does not contain %q:\n%s", want, miss.stderr)
	}
	if miss.stdout != "" {
		t.Errorf("stdout = %q, want nothing", miss.stdout)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("lock mode made %d registry requests, want 0", n)
	}
}

func TestArgoCDCacheTTL(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	src := argoApp(t, registryValues(reg))
	env := []string{"VALUES_FILES=values-e2e.yaml", "DIGESTPIN_CACHE_TTL=1h"}
	first := sc.generate(t, src, env...)
	if first.err != nil {
		t.Fatalf("generate: %v\n%s", first.err, first.stderr)
	}
	if n := reg.Count("HEAD manifests"); n != len(shopImages) {
		t.Errorf("first generation: HEAD manifests = %d, want %d", n, len(shopImages))
	}
	reg.ResetCounts()
	second := sc.generate(t, src, env...)
	if second.err != nil || second.stdout != first.stdout {
		t.Fatalf("cached generation differs (err %v):\n%s", second.err, second.stderr)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("a generation within the cache TTL made %d registry requests, want 0", n)
	}
	des, err := os.ReadDir(filepath.Join(sc.home, "cache", "digestpin"))
	// An entry per image, and the registry's ping answer (the auth cache).
	if err != nil || len(des) != len(shopImages)+1 {
		t.Errorf("cache folder $XDG_CACHE_HOME/digestpin holds %d entries (%v), want %d", len(des), err, len(shopImages)+1)
	}
}
