package cmpserver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/utils/kube"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
)

// shopImages are the images of testdata/argocd-app, by repository:tag.
var shopImages = []string{"shop/migrate:1.4", "shop/web:1.4", "shop/proxy:2.1", "shop/worker:2.0"}

// pushFixed pushes an image whose digest depends only on repoTag and
// version, as e2e/argocd_test.go does, so that the digests are those of
// testdata/argocd-app/argocd-generate.golden.yaml.
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

// shopRepo copies testdata/argocd-app, the Git repository of the shop
// Application (source folder web/), writes web/values-e2e.yaml with the
// given values, and returns the repository's folder.
func shopRepo(t *testing.T, values string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(repoRoot(t), "testdata", "argocd-app"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "web", "values-e2e.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// registryValues points the shop's chart at reg.
func registryValues(reg *testregistry.Registry) string {
	return "global:\n  registry: " + reg.Host() + "\n"
}

// prodValues is the plugin env of the shop Application in production.
const prodValues = "VALUES_FILES=values-prod.yaml, values-e2e.yaml"

var checksumJSON = regexp.MustCompile(`("checksum/images":)"[0-9a-f]{64}"`)

// normalized reads manifests as the repo server does, with what changes
// between test runs replaced as in the golden files: the registry's
// address, and the checksums that cover it.
func normalized(t *testing.T, manifests []string, reg *testregistry.Registry) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range manifests {
		m = strings.ReplaceAll(m, reg.Host(), "REGISTRY")
		m = checksumJSON.ReplaceAllString(m, `${1}"CHECKSUM"`)
		objs, err := kube.SplitYAML([]byte(m))
		if err != nil {
			t.Fatalf("reading a manifest: %v\n%s", err, m)
		}
		for _, o := range objs {
			out = append(out, o.Object)
		}
	}
	return out
}

// images returns the images of each workload among objs, by kind/name.
func images(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		for _, path := range [][]string{
			{"spec", "template", "spec"},
			{"spec", "jobTemplate", "spec", "template", "spec"},
		} {
			spec, ok, _ := unstructured.NestedMap(o.Object, path...)
			if !ok {
				continue
			}
			for _, list := range []string{"initContainers", "containers"} {
				cs, _, _ := unstructured.NestedSlice(spec, list)
				for _, c := range cs {
					if im, ok := c.(map[string]any)["image"].(string); ok {
						out[key] = append(out[key], im)
					}
				}
			}
		}
	}
	return out
}

// TestGenerateLive renders the shop Application through argocd-cmp-server
// and the plugin, resolving at the loopback registry: the manifests are
// those of the plugin's own end-to-end test (e2e/argocd_test.go, which
// runs the scripts directly), as JSON objects; a second generation gives
// the same bytes; a tag pushed again changes exactly the workloads that
// use it.
func TestGenerateLive(t *testing.T) {
	startServer(t)
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	repo := shopRepo(t, registryValues(reg))
	app := shopApp(t, prodValues)

	first, objs, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest: %v", err)
	}
	// Each distinct image is asked for once, with one HEAD request.
	if n := reg.Count("HEAD manifests"); n != len(shopImages) {
		t.Errorf("HEAD manifests = %d, want %d", n, len(shopImages))
	}
	if n := reg.Count("GET manifests"); n != 0 {
		t.Errorf("GET manifests = %d, want 0", n)
	}
	pinned := func(im string, d v1.Hash) string { return reg.Ref(im) + "@" + d.String() }
	wantImages := map[string][]string{
		"Deployment/shop-worker": {pinned("shop/worker:2.0", digests["shop/worker:2.0"])},
		"Deployment/shop-web": {
			pinned("shop/migrate:1.4", digests["shop/migrate:1.4"]),
			pinned("shop/web:1.4", digests["shop/web:1.4"]),
			pinned("shop/proxy:2.1", digests["shop/proxy:2.1"]),
		},
		"CronJob/shop-report": {pinned("shop/web:1.4", digests["shop/web:1.4"])},
	}
	if diff := cmp.Diff(wantImages, images(objs)); diff != "" {
		t.Errorf("images of the generated workloads (-want +got):\n%s", diff)
	}

	// The same objects as the scripts give when run directly (the golden
	// file of e2e/argocd_test.go, same Application, same images).
	golden, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "argocd-app", "argocd-generate.golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(normalized(t, []string{string(golden)}, reg), normalized(t, first, reg)); diff != "" {
		t.Errorf("manifests differ from testdata/argocd-app/argocd-generate.golden.yaml (-want +got):\n%s", diff)
	}

	// Argo CD renders again every few minutes: the same registry state
	// gives the same bytes.
	again, _, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("second GenerateManifest: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("second generation differs (-first +second):\n%s", diff)
	}

	// The mutable-tag workflow: CI pushes shop/web:1.4 again and asks for
	// a hard refresh; the next generation pins the new digest in exactly
	// the workloads that use it.
	moved := pushFixed(t, reg, "shop/web:1.4", "2")
	refreshed, objs, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest after a push: %v", err)
	}
	wantImages["Deployment/shop-web"][1] = pinned("shop/web:1.4", moved)
	wantImages["CronJob/shop-report"][0] = pinned("shop/web:1.4", moved)
	if diff := cmp.Diff(wantImages, images(objs)); diff != "" {
		t.Errorf("images after a push of shop/web:1.4 (-want +got):\n%s", diff)
	}
	var changed []string
	for i := range min(len(first), len(refreshed)) {
		if first[i] != refreshed[i] {
			o, err := kube.SplitYAML([]byte(refreshed[i]))
			if err != nil || len(o) != 1 {
				t.Fatalf("reading manifest %d: %v", i, err)
			}
			changed = append(changed, o[0].GetKind()+"/"+o[0].GetName())
		}
	}
	slices.Sort(changed)
	if want := []string{"CronJob/shop-report", "Deployment/shop-web"}; len(first) != len(refreshed) || !cmp.Equal(want, changed) {
		t.Errorf("manifests changed by a push of shop/web:1.4 = %v (of %d, then %d), want %v", changed, len(first), len(refreshed), want)
	}
}

// ciEnv is the environment of a CI job with helm and digestpin on PATH.
func ciEnv(t *testing.T, s *server) []string {
	t.Helper()
	return []string{"PATH=" + s.path, "HOME=" + t.TempDir(), "RELEASE=shop"}
}

// TestLockOffline is the lock workflow: CI records the digests in a lock
// file committed beside the chart; Argo CD renders from git alone (the
// plugin env DIGESTPIN_LOCK, frozen by default), without asking the
// registry, even after a tag moved; an image missing from the lock fails
// the generation, naming it.
func TestLockOffline(t *testing.T) {
	s := startServer(t)
	reg := testregistry.New(t)
	pushShop(t, reg)
	repo := shopRepo(t, registryValues(reg))
	live, _, err := shopApp(t, prodValues).generate(t, repo)
	if err != nil {
		t.Fatalf("live GenerateManifest: %v", err)
	}

	// The CI job works in a checkout of its own, where it builds the
	// chart's dependencies, and writes web/digests.lock into the
	// repository (and commits it).
	checkout := filepath.Join(t.TempDir(), "checkout")
	if err := os.CopyFS(checkout, os.DirFS(repo)); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(checkout, "web")
	for _, step := range [][]string{
		{filepath.Join(s.bin, "helm"), "dependency", "build", chart},
		{filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh"), "--lock", filepath.Join(repo, "web", "digests.lock"),
			chart, "--values", filepath.Join(chart, "values-prod.yaml"), "--values", filepath.Join(chart, "values-e2e.yaml"),
			"--api-versions", "batch/v1/CronJob"},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Env = ciEnv(t, s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(step, " "), err, out)
		}
	}

	// Argo CD renders from git alone: the same manifests, no registry
	// request, even after the tag moved.
	pushFixed(t, reg, "shop/web:1.4", "2")
	reg.ResetCounts()
	locked := shopApp(t, prodValues, "DIGESTPIN_LOCK=digests.lock")
	got, _, err := locked.generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest with the lock: %v", err)
	}
	if diff := cmp.Diff(live, got); diff != "" {
		t.Errorf("lock-mode manifests differ from the live ones (-live +locked):\n%s", diff)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("lock mode made %d registry requests, want 0", n)
	}

	// An image missing from the lock fails the generation, naming it,
	// still without a registry request.
	lockPath := filepath.Join(repo, "web", "digests.lock")
	l, err := lockfile.Read(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	short, err := lockfile.New(slices.DeleteFunc(l.Entries(), func(e lockfile.Entry) bool {
		return strings.HasSuffix(e.Reference, "/shop/worker:2.0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := short.WriteFile(lockPath); err != nil {
		t.Fatal(err)
	}
	_, _, err = locked.generate(t, repo)
	if err == nil {
		t.Fatal("GenerateManifest with an incomplete lock succeeded")
	}
	if want := ": " + reg.Ref("shop/worker:2.0") + ": not in the lock file"; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not contain %q:\n%v", want, err)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("lock mode made %d registry requests, want 0", n)
	}
}

// TestGenerateFailures checks that a failed generation's reason reaches
// the error Argo CD shows in the Application's conditions, and that
// nothing a repository links outside itself is read.
func TestGenerateFailures(t *testing.T) {
	startServer(t)
	reg := testregistry.New(t)
	pushShop(t, reg)
	// What Argo CD v3.3.0 shows when the generate command fails: the
	// repo server's wrapping, the server's status, the server's wrapping,
	// the command and its exit status, then the command's stderr.
	failed := func(status int) string {
		return "error generating manifests in cmp: rpc error: code = Unknown desc = error generating manifests: " +
			"`digestpin argocd generate` failed exit status " + strconv.Itoa(status) + ": "
	}
	for _, tc := range []struct {
		desc   string
		values string
		env    []string
		links  map[string]string // link in the source folder → target
		allow  bool              // the repo server allows out-of-bounds symlinks
		want   []string
	}{
		{
			desc:   "an image the registry does not have",
			values: registryValues(reg) + "image:\n  tag: \"9.9\"\n",
			want: []string{
				failed(1) + "digestpin: error: ", "web/templates/deployment.yaml",
				": " + reg.Ref("shop/migrate:9.9") + ": ", ": " + reg.Ref("shop/web:9.9") + ": ",
			},
		},
		{
			desc:   "helm fails",
			values: "global:\n  registry: \"\"\n",
			want:   []string{failed(1), "global.registry is required"},
		},
		{
			desc:   "a bad option",
			values: registryValues(reg),
			env:    []string{"DIGESTPIN_MODE=sideways"},
			want:   []string{failed(2) + `digestpin: error: invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`},
		},
		{
			// The script's own check: Argo CD passes the path on as is.
			desc:   "an absolute lock file path",
			values: registryValues(reg),
			env:    []string{"DIGESTPIN_LOCK=/etc/hostname"},
			want:   []string{failed(1) + "digestpin-cmp: lock file /etc/hostname: want a path relative to the source folder"},
		},
		{
			// The repo server's check, before the plugin sees the
			// repository.
			desc:   "a lock file linked out of the repository",
			values: registryValues(reg),
			env:    []string{"DIGESTPIN_LOCK=digests.lock"},
			links:  map[string]string{"digests.lock": "../../outside.yaml"},
			want:   []string{"repository contains out-of-bounds symlinks. file: web/digests.lock"},
		},
		{
			// With the repo server's check turned off, argocd-cmp-server
			// refuses the link when it unpacks the repository: the
			// plugin's commands do not run.
			desc:   "a lock file linked out of the repository, out-of-bounds symlinks allowed",
			values: registryValues(reg),
			env:    []string{"DIGESTPIN_LOCK=digests.lock"},
			links:  map[string]string{"digests.lock": "../../outside.yaml"},
			allow:  true,
			want: []string{"error generating manifests in cmp: rpc error: code = Unknown desc = " +
				"generate manifest error receiving stream: error decompressing tgz file: illegal filepath in symlink: "},
		},
		{
			desc:   "a values file in a folder linked out of the repository, out-of-bounds symlinks allowed",
			values: registryValues(reg),
			env:    []string{"VALUES_FILES=elsewhere/outside.yaml"},
			links:  map[string]string{"elsewhere": "../../elsewhere"},
			allow:  true,
			want:   []string{"illegal filepath in symlink: "},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			repo := shopRepo(t, tc.values)
			// A file and a folder beside the repository, which no
			// Application may read.
			outside := filepath.Dir(repo)
			if err := os.MkdirAll(filepath.Join(outside, "elsewhere"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"outside.yaml", "elsewhere/outside.yaml"} {
				if err := os.WriteFile(filepath.Join(outside, f), []byte("replicas: 1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for link, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(repo, "web", link)); err != nil {
					t.Fatal(err)
				}
			}
			app := shopApp(t, append([]string{"VALUES_FILES=values-e2e.yaml"}, tc.env...)...)
			app.allowOutOfBoundsSymlinks = tc.allow
			manifests, _, err := app.generate(t, repo)
			if err == nil {
				t.Fatalf("GenerateManifest succeeded, want a failure; manifests:\n%s", strings.Join(manifests, "\n"))
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "replicas") {
				t.Errorf("error quotes the outside file:\n%s", msg)
			}
			if tc.links != nil && strings.Contains(msg, "digestpin argocd generate") {
				t.Errorf("the plugin ran on a repository with an escaping link:\n%s", msg)
			}
			if st, ok := status.FromError(err); tc.links == nil && (!ok || st.Code() != codes.Unknown) {
				t.Errorf("gRPC status of %v = %v, want Unknown", err, st.Code())
			}
		})
	}
}

// TestDiscovery checks that the plugin renders only the Applications that
// name it: MatchRepository declines the chart, so that Argo CD's plugin
// discovery leaves an Application without a plugin name to its built-in
// Helm.
func TestDiscovery(t *testing.T) {
	s := startServer(t)
	reg := testregistry.New(t)
	repo := shopRepo(t, registryValues(reg))
	resp, err := match(t, s, repo, "web")
	if err != nil {
		t.Fatalf("MatchRepository: %v", err)
	}
	if resp.GetIsSupported() || resp.GetIsDiscoveryEnabled() {
		t.Errorf("MatchRepository = supported %v, discovery enabled %v; want false, false", resp.GetIsSupported(), resp.GetIsDiscoveryEnabled())
	}
	unnamed := shopApp(t)
	unnamed.plugin = nil
	if _, _, err := unnamed.generate(t, repo); err == nil || !strings.Contains(err.Error(), "could not find plugin supporting the given repository") {
		t.Errorf("GenerateManifest of an Application that names no plugin: %v, want Argo CD's \"could not find plugin supporting the given repository\"", err)
	}
}

// announced reads the parameters plugin.yaml announces
// (spec.parameters.static), as JSON objects, the form the UI gets them in.
func announced(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Spec struct {
			Parameters struct {
				Static []map[string]any `json:"static"`
			} `json:"parameters"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("parsing scripts/argocd/plugin.yaml: %v", err)
	}
	return p.Spec.Parameters.Static
}

// asJSON returns v as JSON objects.
func asJSON(t *testing.T, v any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// find returns the object of the given kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// TestParameters checks the plugin's parameters under Argo CD: the
// announcement the UI gets is what plugin.yaml declares, and each
// parameter, sent as Argo CD sends it (ARGOCD_APP_PARAMETERS and PARAM_*),
// changes the manifests as its source.helm field does. Every announced
// parameter must have a case here; a case whose parameter plugin.yaml does
// not announce is not run.
func TestParameters(t *testing.T) {
	startServer(t)
	reg := testregistry.New(t)
	pushShop(t, reg)
	// The tag Argo CD Image Updater hands over (set-from-env).
	handed := map[string]v1.Hash{}
	for _, im := range []string{"shop/web:1.5", "shop/migrate:1.5"} {
		handed[im] = pushFixed(t, reg, im, "1")
	}
	want := announced(t)

	// The UI's announcement.
	repo := shopRepo(t, registryValues(reg))
	resp, err := shopApp(t).parameters(t, repo)
	if err != nil {
		t.Fatalf("GetParametersAnnouncement: %v", err)
	}
	if diff := cmp.Diff(want, asJSON(t, resp.GetParameterAnnouncements()), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("announced parameters differ from plugin.yaml's spec.parameters.static (-plugin.yaml +announced):\n%s", diff)
	}
	names := map[string]bool{}
	for _, p := range want {
		name, _ := p["name"].(string)
		names[name] = true
	}

	str := func(s string) *string { return &s }
	param := func(name string) v1alpha1.ApplicationSourcePluginParameter {
		return v1alpha1.ApplicationSourcePluginParameter{Name: name}
	}
	withString := func(name, v string) v1alpha1.ApplicationSourcePluginParameter {
		p := param(name)
		p.String_ = str(v)
		return p
	}
	withArray := func(name string, vs ...string) v1alpha1.ApplicationSourcePluginParameter {
		p := param(name)
		p.OptionalArray = &v1alpha1.OptionalArray{Array: vs}
		return p
	}
	withMap := func(name string, m map[string]string) v1alpha1.ApplicationSourcePluginParameter {
		p := param(name)
		p.OptionalMap = &v1alpha1.OptionalMap{Map: m}
		return p
	}
	// probe returns the data of the probe ConfigMap (testdata/params).
	probe := func(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]string {
		t.Helper()
		o := find(objs, "ConfigMap", name)
		if o == nil {
			t.Fatalf("no ConfigMap %s in the manifests", name)
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		data["namespace"] = o.GetNamespace()
		return data
	}
	for _, tc := range []struct {
		name   string // the parameter; "" for none
		params []v1alpha1.ApplicationSourcePluginParameter
		env    []string // plugin env entries, NAME=value, beside VALUES_FILES
		files  []string // files of testdata/params to add to web/ beside the probe
		check  func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{
			name: "",
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				got := probe(t, objs, "shop-probe")
				want := map[string]string{"namespace": "prod", "kubeVersion": "v1.34.1", "cronJobAPI": "true", "probeAPI": "false"}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("without parameters, probe %s = %q, want %q", k, got[k], v)
					}
				}
				if find(objs, "CustomResourceDefinition", "carts.shop.example.com") == nil || find(objs, "Pod", "shop-probe-test") == nil {
					t.Error("without parameters, the CRD or the test hook is missing")
				}
			},
		},
		{
			name:   "release-name",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("release-name", "store")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				probe(t, objs, "store-probe")
			},
		},
		{
			name:   "namespace",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("namespace", "staging")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["namespace"]; got != "staging" {
					t.Errorf("namespace = %q, want staging", got)
				}
			},
		},
		{
			name:   "values-files",
			params: []v1alpha1.ApplicationSourcePluginParameter{withArray("values-files", "probe-values.yaml")},
			files:  []string{"probe-values.yaml"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["fromFile"]; got != "probe-values.yaml" {
					t.Errorf("fromFile = %q, want probe-values.yaml", got)
				}
			},
		},
		{
			name:   "values",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("values", "probe:\n  inline: from the values parameter\n")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["inline"]; got != "from the values parameter" {
					t.Errorf("inline = %q, want %q", got, "from the values parameter")
				}
			},
		},
		{
			// A comma is part of the value, as in Argo CD's Helm.
			name:   "set",
			params: []v1alpha1.ApplicationSourcePluginParameter{withMap("set", map[string]string{"probe.set": "a,b"})},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["set"]; got != "a,b" {
					t.Errorf("set = %q, want a,b", got)
				}
			},
		},
		{
			name:   "set-string",
			params: []v1alpha1.ApplicationSourcePluginParameter{withMap("set-string", map[string]string{"probe.setString": "007"})},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["setString"]; got != "007" {
					t.Errorf("setString = %q, want 007", got)
				}
			},
		},
		{
			name:   "set-file",
			params: []v1alpha1.ApplicationSourcePluginParameter{withMap("set-file", map[string]string{"probe.setFile": "motd.txt"})},
			files:  []string{"motd.txt"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["setFile"]; got != "hello from a file\n" {
					t.Errorf("setFile = %q, want the file's text", got)
				}
			},
		},
		{
			// Argo CD Image Updater (v1.3, manifestTargets.plugin with
			// name and tag) writes the image's repository and tag into
			// spec.source.plugin.env; the Application maps the tag's
			// entry to the chart's key. That tag is rendered, over the
			// Application's own set, and pinned to its digest.
			name: "set-from-env",
			params: []v1alpha1.ApplicationSourcePluginParameter{
				withMap("set", map[string]string{"image.tag": "1.4"}),
				withMap("set-from-env", map[string]string{"image.tag": "WEB_IMAGE_TAG", "probe.set": "NOT_WRITTEN"}),
			},
			env: []string{"WEB_IMAGE_NAME=" + reg.Ref("shop/web"), "WEB_IMAGE_TAG=1.5"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pinned := func(im string) string { return reg.Ref(im) + "@" + handed[im].String() }
				got := images(objs)
				if want := []string{pinned("shop/web:1.5")}; !cmp.Equal(got["CronJob/shop-report"], want) {
					t.Errorf("CronJob/shop-report runs %v, want %v", got["CronJob/shop-report"], want)
				}
				if web := got["Deployment/shop-web"]; len(web) < 2 || web[0] != pinned("shop/migrate:1.5") || web[1] != pinned("shop/web:1.5") {
					t.Errorf("Deployment/shop-web runs %v, want %s and %s first", web, pinned("shop/migrate:1.5"), pinned("shop/web:1.5"))
				}
				if got := probe(t, objs, "shop-probe")["set"]; got != "" {
					t.Errorf("probe.set = %q from an env entry not written, want the chart's empty value", got)
				}
			},
		},
		{
			name: "ignore-missing-value-files",
			params: []v1alpha1.ApplicationSourcePluginParameter{
				withArray("values-files", "missing.yaml"), withString("ignore-missing-value-files", "true"),
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) { probe(t, objs, "shop-probe") },
		},
		{
			name:   "skip-crds",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("skip-crds", "true")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if find(objs, "CustomResourceDefinition", "carts.shop.example.com") != nil {
					t.Error("skip-crds: the CRD is rendered")
				}
			},
		},
		{
			name:   "skip-tests",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("skip-tests", "true")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if find(objs, "Pod", "shop-probe-test") != nil {
					t.Error("skip-tests: the test hook is rendered")
				}
			},
		},
		{
			// values.schema.json requires a value the chart does not
			// have: only a render without validation succeeds.
			name:   "skip-schema-validation",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("skip-schema-validation", "true")},
			files:  []string{"values.schema.json"},
			check:  func(t *testing.T, objs []*unstructured.Unstructured) { probe(t, objs, "shop-probe") },
		},
		{
			name:   "kube-version",
			params: []v1alpha1.ApplicationSourcePluginParameter{withString("kube-version", "1.30.0")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := probe(t, objs, "shop-probe")["kubeVersion"]; got != "v1.30.0" {
					t.Errorf("kubeVersion = %q, want v1.30.0", got)
				}
			},
		},
		{
			// The list replaces the destination cluster's.
			name:   "api-versions",
			params: []v1alpha1.ApplicationSourcePluginParameter{withArray("api-versions", "probe.example.com/v1")},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				got := probe(t, objs, "shop-probe")
				if got["probeAPI"] != "true" || got["cronJobAPI"] != "false" {
					t.Errorf("probeAPI, cronJobAPI = %q, %q; want true, false", got["probeAPI"], got["cronJobAPI"])
				}
			},
		},
	} {
		if tc.name != "" && !names[tc.name] {
			t.Logf("plugin.yaml does not announce %s: its case does not run", tc.name)
			continue
		}
		delete(names, tc.name)
		t.Run("parameter "+tc.name, func(t *testing.T) {
			repo := shopRepo(t, registryValues(reg))
			web := filepath.Join(repo, "web")
			params := filepath.Join("testdata", "params")
			if err := os.CopyFS(filepath.Join(web, "templates"), os.DirFS(filepath.Join(params, "templates"))); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				b, err := os.ReadFile(filepath.Join(params, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(web, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			app := shopApp(t, append([]string{"VALUES_FILES=values-e2e.yaml"}, tc.env...)...)
			app.plugin.Parameters = tc.params
			if slices.Contains(tc.files, "values.schema.json") {
				// The schema fails the chart without the parameter.
				app.plugin.Parameters = nil
				if _, _, err := app.generate(t, repo); err == nil || !strings.Contains(err.Error(), "probeRequired") {
					t.Errorf("GenerateManifest against values.schema.json without %s: %v, want a schema error naming probeRequired", tc.name, err)
				}
				app.plugin.Parameters = tc.params
			}
			_, objs, err := app.generate(t, repo)
			if err != nil {
				t.Fatalf("GenerateManifest: %v", err)
			}
			tc.check(t, objs)
		})
	}
	for name := range names {
		t.Errorf("plugin.yaml announces the parameter %s, which TestParameters has no case for", name)
	}
}
