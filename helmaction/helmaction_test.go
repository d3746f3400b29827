package helmaction

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the renders")

const shop = "testdata/charts/shop"

// templateCases are helm template command lines, each rendered here and by
// the Helm 4.3.1 CLI, with the same golden file for both.
var templateCases = []struct {
	name string
	args []string
}{
	{"default", []string{shop}},
	{"named", []string{"web", shop, "-n", "prod"}},
	{"values", []string{"web", shop, "-f", "testdata/values-prod.yaml", "--set", "title=New title", "--set-string", "image.tag=2.0", "--set-json", `extraEnv=[{"name":"A","value":"b"}]`, "--set-literal", "cache.image=a,b"}},
	{"no-subchart", []string{"web", shop, "--set", "cache.enabled=false"}},
	{"show-only", []string{"web", shop, "--show-only", "templates/deployment.yaml", "-s", "charts/cache/templates/*.yaml"}},
	{"skip-tests", []string{"web", shop, "--skip-tests"}},
	{"no-hooks", []string{"web", shop, "--no-hooks"}},
	{"include-crds", []string{"web", shop, "--include-crds"}},
	{"capabilities", []string{"web", shop, "--kube-version", "1.31.2", "--api-versions", "monitoring.coreos.com/v1", "--is-upgrade"}},
	{"archive", []string{"web", "ARCHIVE"}},
}

// isolate points Helm's folders at a fresh temporary folder, so that
// neither this machine's repositories nor its registry logins count.
func isolate(t *testing.T) {
	t.Helper()
	d := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(d, v))
	}
	t.Setenv("HELM_NAMESPACE", "")
	t.Setenv("HELM_KUBECONTEXT", "")
}

// archive packages the shop chart as a .tgz, once per test.
func archive(t *testing.T) string {
	t.Helper()
	ch, err := loader.LoadDir(shop)
	if err != nil {
		t.Fatal(err)
	}
	p, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// args returns the case's arguments with ARCHIVE replaced and, unless the
// case sets one, --kube-version v1.37.0: Helm's default is the version of
// k8s.io/client-go in the binary's build information, which a test binary
// lacks (the e2e tests compare the default through the digestpin binary).
func args(t *testing.T, in []string) []string {
	out := make([]string, 0, len(in)+1)
	kube := false
	for _, a := range in {
		if a == "ARCHIVE" {
			a = archive(t)
		}
		kube = kube || a == "--kube-version"
		out = append(out, a)
	}
	if !kube {
		out = append(out, "--kube-version=v1.37.0")
	}
	return out
}

// render parses args as digestpin template does and renders.
func render(t *testing.T, args []string) ([]byte, error) {
	t.Helper()
	var o Options
	fs := pflag.NewFlagSet("template", pflag.ContinueOnError)
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	if err := o.SetArgs(fs.Args()); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	return Template(context.Background(), o)
}

func TestTemplateGolden(t *testing.T) {
	for _, tc := range templateCases {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			a := args(t, tc.args)
			got, err := render(t, a)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("render differs from %s:\n%s", golden, got)
			}
			// Idempotence: a second render in the same process is the same.
			again, err := render(t, a)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("a second render differs (err %v)", err)
			}
		})
	}
}

// TestTemplateMatchesHelmCLI runs every case through the real Helm 4.3.1
// CLI: its helm template output is the golden file, byte for byte.
func TestTemplateMatchesHelmCLI(t *testing.T) {
	helm := os.Getenv("DIGESTPIN_TEST_HELM4")
	if _, err := os.Stat(helm); helm == "" || err != nil {
		msg := "DIGESTPIN_TEST_HELM4 does not name the Helm 4 CLI; run the tests with `make test`, which builds it"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, tc := range templateCases {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			cmd := exec.Command(helm, append([]string{"template"}, args(t, tc.args)...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			got, err := cmd.Output()
			if err != nil {
				t.Fatalf("helm template: %v: %s", err, stderr.String())
			}
			want, err := os.ReadFile(filepath.Join("testdata", tc.name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("helm template %q differs from the golden file:\n%s", tc.args, got)
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no chart", []string{"web", "testdata/charts/absent"}, "testdata/charts/absent"},
		{"required value", []string{"web", "testdata/charts/broken"}, "value a is required"},
		{"missing dependency", []string{"web", "testdata/charts/missingdep"}, "helm dependency build"},
		{"library chart", []string{"web", "testdata/charts/lib"}, "library charts are not installable"},
		{"kube version", []string{"web", shop, "--kube-version", "one"}, `--kube-version "one"`},
		{"server dry run", []string{"web", shop, "--dry-run=server"}, "--dry-run=client"},
		{"show-only missing", []string{"web", shop, "-s", "templates/absent.yaml"}, "could not find template templates/absent.yaml"},
		{"bad set", []string{"web", shop, "--set", "a[x]=b"}, "failed parsing --set data"},
		{"values file", []string{"web", shop, "-f", "testdata/absent.yaml"}, "testdata/absent.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			out, err := render(t, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if out != nil {
				t.Errorf("an error came with output: %q", out)
			}
		})
	}
}
