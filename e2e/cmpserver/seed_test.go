package cmpserver

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// generatedRepo copies testdata/generated (a webhook certificate signed by
// a generated CA, passwords, both hashed into the pod template's
// checksum/config) into a Git repository's folder generated/, and returns
// the repository.
func generatedRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.CopyFS(filepath.Join(repo, "generated"), os.DirFS(filepath.Join(repoRoot(t), "testdata", "generated"))); err != nil {
		t.Fatal(err)
	}
	return repo
}

// generatedApp is the Application shop (destination namespace prod) of
// the generated chart, its image at reg, with more --set values, as plugin
// parameters, and the plugin env given as NAME=value.
func generatedApp(t *testing.T, reg *testregistry.Registry, set map[string]string, env ...string) application {
	t.Helper()
	app := shopApp(t, env...)
	app.path = "generated"
	m := map[string]string{"image": reg.Ref("app:1.0")}
	maps.Copy(m, set)
	app.plugin.Parameters = v1alpha1.ApplicationSourcePluginParameters{
		{Name: "set", OptionalMap: &v1alpha1.OptionalMap{Map: m}},
	}
	return app
}

// secretData returns the key of the Secret name among objs.
func secretData(t *testing.T, objs []*unstructured.Unstructured, name, key string) string {
	t.Helper()
	o := find(objs, "Secret", name)
	if o == nil {
		t.Fatalf("no Secret %s in the manifests", name)
	}
	v, _, _ := unstructured.NestedString(o.Object, "data", key)
	if v == "" {
		t.Fatalf("Secret %s has no %s", name, key)
	}
	return v
}

// TestGenerateGeneratedSteady renders, through argocd-cmp-server, a chart
// that generates its webhook's certificate and hashes it into the pod
// template: Argo CD's next generation (the repo cache expired, another
// replica with the same Secret) gives the same manifests, so no pod
// restarts; a values change reaches the certificate and the pod
// template's hash.
func TestGenerateGeneratedSteady(t *testing.T) {
	seed := seedText(t)
	startServerWith(t, serverOptions{seeds: map[string]string{"seed": seed}})
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	repo := generatedRepo(t)
	app := generatedApp(t, reg, nil)

	first, objs, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest: %v", err)
	}
	crt := secretData(t, objs, "shop-tls", "tls.crt")
	password := secretData(t, objs, "shop-app", "password")
	checksum := func(objs []*unstructured.Unstructured) string {
		d := find(objs, "Deployment", "shop-webhook")
		if d == nil {
			t.Fatal("no Deployment shop-webhook in the manifests")
		}
		v, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", "checksum/config")
		return v
	}
	sum := checksum(objs)

	again, _, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("second GenerateManifest: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("second generation differs (-first +second):\n%s", diff)
	}

	// Another replica: a server of its own, the same Secret.
	startServerWith(t, serverOptions{seeds: map[string]string{"seed": seed}})
	other, _, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest on another server: %v", err)
	}
	if diff := cmp.Diff(first, other); diff != "" {
		t.Errorf("another server with the same seed generates other manifests (-first +other):\n%s", diff)
	}

	_, objs, err = generatedApp(t, reg, map[string]string{"clusterDomain": "example.internal"}).generate(t, repo)
	if err != nil {
		t.Fatalf("GenerateManifest with another clusterDomain: %v", err)
	}
	if secretData(t, objs, "shop-tls", "tls.crt") == crt || checksum(objs) == sum {
		t.Error("a new clusterDomain kept the old certificate, or the pod template's hash of it")
	}
	if secretData(t, objs, "shop-app", "password") != password {
		t.Error("a new clusterDomain changed an unrelated password")
	}
}

// TestGenerateSeedFailures checks what Argo CD shows in the Application's
// conditions when there is no seed, or an Application names one: one
// line, after Argo CD's own wrapping, that says what to do.
func TestGenerateSeedFailures(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	repo := generatedRepo(t)
	for _, tc := range []struct {
		desc   string // no comma: the test folder's name is in the plugin's command, which argocd-cmp-server splits at commas
		opts   serverOptions
		env    []string // the Application's plugin env
		status int
		want   string // after the wrapping; SEEDS is the Secret's folder
	}{
		{
			desc:   "no Secret",
			opts:   serverOptions{seeds: map[string]string{}},
			status: 1,
			want:   "digestpin-cmp: no seed at SEEDS/seed: create the Secret digestpin-seed: kubectl -n argocd create secret generic digestpin-seed --from-file=seed=<(digestpin seed) (SECURITY.md: The seed); nothing rendered\n",
		},
		{
			desc:   "per project without a key for the project",
			opts:   serverOptions{env: []string{"DIGESTPIN_CMP_SEED_PER_PROJECT=true"}},
			status: 1,
			want:   "digestpin-cmp: no seed for the project default at SEEDS/project.default: add the key project.default to the Secret digestpin-seed (SECURITY.md: The seed); nothing rendered\n",
		},
		{
			desc:   "the Application's DIGESTPIN_SEED_FILE",
			env:    []string{"DIGESTPIN_SEED_FILE=/home/argocd/digestpin-seed/project.team-a"},
			status: 2,
			want:   "digestpin: error: plugin env DIGESTPIN_SEED_FILE: an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := startServerWith(t, tc.opts)
			manifests, _, err := generatedApp(t, reg, nil, tc.env...).generate(t, repo)
			if err == nil {
				t.Fatalf("GenerateManifest succeeded, want a failure; manifests:\n%s", strings.Join(manifests, "\n"))
			}
			want := "error generating manifests in cmp: rpc error: code = Unknown desc = error generating manifests: " +
				"`digestpin argocd generate` failed exit status " + strconv.Itoa(tc.status) + ": " +
				strings.ReplaceAll(tc.want, "SEEDS", s.seeds)
			if got := err.Error(); got != want && got != strings.TrimSuffix(want, "\n") {
				t.Errorf("error:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}
