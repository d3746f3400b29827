package helmcmd

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	helmcli "helm.sh/helm/v4/pkg/cli"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/detgen"
	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// helmWorld runs digestpin install and upgrade in-process against Helm's
// own memory release driver, shared by every run as a cluster's Secrets
// would be, and Helm's printing fake Kubernetes client, with Helm's
// default capabilities: no cluster, as examples/helmsdk renders for Helm 3.
type helmWorld struct {
	t     *testing.T
	store *storage.Storage
	seed  string
	// cluster gives the configuration the settings' cluster, so that a
	// lookup goes there.
	cluster bool
}

func newHelmWorld(t *testing.T) *helmWorld {
	t.Helper()
	d := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME", "DOCKER_CONFIG"} {
		t.Setenv(v, filepath.Join(d, v))
	}
	for _, v := range []string{"HELM_NAMESPACE", "HELM_KUBECONTEXT", "HELM_DRIVER", "HELM_DEBUG", "KUBECONFIG"} {
		t.Setenv(v, "")
	}
	return &helmWorld{t: t, store: storage.Init(driver.NewMemory()), seed: writeSeed(t)}
}

// writeSeed writes a new seed file and returns its path.
func writeSeed(t *testing.T) string {
	t.Helper()
	s, err := detgen.NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(p, append(text, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// configure is the configureHelm of the world.
func (w *helmWorld) configure(settings *helmcli.EnvSettings, log io.Writer) (*action.Configuration, error) {
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	w.store.Driver.(*driver.Memory).SetNamespace(settings.Namespace())
	cfg.Releases = w.store
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	cfg.Capabilities = common.DefaultCapabilities.Copy()
	if w.cluster {
		cfg.RESTClientGetter = settings.RESTClientGetter()
	}
	return cfg, nil
}

// run runs digestpin install or upgrade with args and the world's seed.
func (w *helmWorld) run(cmd string, args ...string) (stdout, stderr string, err error) {
	w.t.Helper()
	var out, errb bytes.Buffer
	err = runDeploy(context.Background(), cmd, append(args, "--seed-file", w.seed), &out, &errb, w.configure)
	return out.String(), errb.String(), err
}

// mustRun is run that fails the test on error.
func (w *helmWorld) mustRun(cmd string, args ...string) string {
	w.t.Helper()
	out, stderr, err := w.run(cmd, args...)
	if err != nil {
		w.t.Fatalf("digestpin %s %q: %v\n%s", cmd, args, err, stderr)
	}
	return out
}

// release returns revision version of release name, as stored.
func (w *helmWorld) release(name string, version int) *release.Release {
	w.t.Helper()
	r, err := w.store.Get(name, version)
	if err != nil {
		w.t.Fatalf("release %s revision %d: %v", name, version, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		w.t.Fatalf("release %s revision %d is a %T", name, version, r)
	}
	return rel
}

// revisions is the number of revisions stored of release name.
func (w *helmWorld) revisions(name string) int {
	h, err := w.store.History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		w.t.Fatal(err)
	}
	return len(h)
}

// manifestObjects maps "Kind/name" to each document of a release's
// manifest, as text.
func manifestObjects(t *testing.T, manifest string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range regexp.MustCompile(`(?m)^---\n`).Split(manifest, -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		n, err := yaml.Parse(d)
		if err != nil {
			t.Fatalf("parsing %q: %v", d, err)
		}
		out[n.GetKind()+"/"+n.GetName()] = d
	}
	return out
}

// objectField is the string at path in the document doc.
func objectField(t *testing.T, doc string, path ...string) string {
	t.Helper()
	n, err := yaml.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Pipe(yaml.Lookup(path...))
	if err != nil || v == nil {
		t.Fatalf("no %v in\n%s", path, doc)
	}
	return yaml.GetValue(v)
}

// changed lists the objects that differ between two manifests.
func changed(t *testing.T, a, b string) []string {
	t.Helper()
	oa, ob := manifestObjects(t, a), manifestObjects(t, b)
	var out []string
	for k, v := range ob {
		if oa[k] != v {
			out = append(out, k)
		}
	}
	for k := range oa {
		if _, ok := ob[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

var digestRE = regexp.MustCompile(`@sha256:[0-9a-f]{64}`)

// TestDeployInstallThenUpgrade installs testdata/generated (a webhook
// certificate, passwords, htpasswd, a checksum/config over them) with
// digestpin install, then upgrades it with digestpin upgrade, as a release
// lives: an upgrade with nothing changed stores a manifest byte-identical
// to the installed one (generated values stable, images pinned); a new
// clusterDomain changes the certificate and what hashes it, nothing else;
// --reuse-values keeps the values; a re-pushed image changes only the pod
// template; a lock file written at install time, checked at upgrade,
// stops an upgrade after the push (exit 3) and stores nothing.
func TestDeployInstallThenUpgrade(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	chart := filepath.Join(repoRoot, "testdata", "generated")
	dir := t.TempDir()
	lock, report := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "report.json")
	flags := []string{"-n", "ns", "--set", "image=" + reg.Ref("app:1.0")}

	out := w.mustRun("install", append([]string{"r", chart, "--write-lock", lock, "--report", report}, flags...)...)
	for _, want := range []string{"NAME: r\n", "NAMESPACE: ns\n", "STATUS: deployed\n", "REVISION: 1\n", "DESCRIPTION: Install complete\n", "TEST SUITE: None\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("digestpin install printed\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, "MANIFEST:") {
		t.Errorf("an install printed its manifest:\n%s", out)
	}
	rev1 := w.release("r", 1)
	objs1 := manifestObjects(t, rev1.Manifest)
	image := objectField(t, objs1["Deployment/r-webhook"], "spec", "template", "spec", "containers", "[name=webhook]", "image")
	if !digestRE.MatchString(image) || !strings.HasPrefix(image, reg.Ref("app:1.0")+"@") {
		t.Errorf("stored image %q, want %s pinned", image, reg.Ref("app:1.0"))
	}
	for _, f := range []string{lock, report} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after the install: %v", err)
		}
	}
	// The release records the chart as given, not as rewritten.
	for _, tpl := range rev1.Chart.Templates {
		orig, err := os.ReadFile(filepath.Join(chart, tpl.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tpl.Data, orig) {
			t.Errorf("stored template %s is not the chart's:\n%s", tpl.Name, tpl.Data)
		}
	}

	out = w.mustRun("upgrade", append([]string{"r", chart}, flags...)...)
	if !strings.HasPrefix(out, "Release \"r\" has been upgraded. Happy Helming!\nNAME: r\n") || !strings.Contains(out, "REVISION: 2\n") {
		t.Errorf("digestpin upgrade printed\n%s", out)
	}
	rev2 := w.release("r", 2)
	if rev2.Manifest != rev1.Manifest {
		t.Errorf("an upgrade with nothing changed stored another manifest:\n%s\n--- installed:\n%s", rev2.Manifest, rev1.Manifest)
	}

	t.Run("a new cluster domain changes the certificate and what hashes it", func(t *testing.T) {
		w.mustRun("upgrade", append([]string{"r", chart, "--set", "clusterDomain=example.internal"}, flags...)...)
		rev3 := w.release("r", 3)
		objs3 := manifestObjects(t, rev3.Manifest)
		got := changed(t, rev2.Manifest, rev3.Manifest)
		want := map[string]bool{"Secret/r-tls": true, "Deployment/r-webhook": true}
		if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
			t.Errorf("changed %v, want the certificate's Secret and the Deployment that hashes it", got)
		}
		crt := objectField(t, objs3["Secret/r-tls"], "data", "tls.crt")
		if !strings.Contains(strings.Join(certNames(t, crt), " "), "r-webhook.ns.svc.example.internal") {
			t.Errorf("certificate names %v lack the new domain", certNames(t, crt))
		}
		ann := func(o map[string]string) string {
			return objectField(t, o["Deployment/r-webhook"], "spec", "template", "metadata", "annotations", "checksum/config")
		}
		if ann(objs3) == ann(objs1) {
			t.Error("checksum/config kept the old certificate's hash")
		}
	})

	t.Run("reuse-values keeps the values", func(t *testing.T) {
		before := w.release("r", w.revisions("r"))
		w.mustRun("upgrade", "r", chart, "-n", "ns", "--reuse-values", "--set", "title=New title")
		after := w.release("r", w.revisions("r"))
		for _, k := range []string{"image", "clusterDomain"} {
			if after.Config[k] != before.Config[k] {
				t.Errorf("--reuse-values: %s = %v, want %v", k, after.Config[k], before.Config[k])
			}
		}
		if after.Config["title"] != "New title" {
			t.Errorf("--reuse-values --set title: title = %v", after.Config["title"])
		}
		got := changed(t, before.Manifest, after.Manifest)
		want := map[string]bool{"Secret/r-app": true, "Deployment/r-webhook": true}
		if len(got) != 2 || !want[got[0]] || !want[got[1]] {
			t.Errorf("a new title changed %v, want the config Secret and the Deployment that hashes it", got)
		}
	})

	t.Run("a re-pushed image changes only the pod template", func(t *testing.T) {
		before := w.release("r", w.revisions("r"))
		reg.PushImage(t, "app:1.0")
		w.mustRun("upgrade", "r", chart, "-n", "ns", "--reuse-values")
		after := w.release("r", w.revisions("r"))
		got := changed(t, before.Manifest, after.Manifest)
		if len(got) != 1 || got[0] != "Deployment/r-webhook" {
			t.Fatalf("a new image changed %v, want the Deployment only", got)
		}
		strip := func(doc string) string {
			var keep []string
			for _, l := range strings.Split(doc, "\n") {
				if !strings.Contains(l, "image: ") && !strings.Contains(l, "checksum/images: ") {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "\n")
		}
		b, a := manifestObjects(t, before.Manifest)["Deployment/r-webhook"], manifestObjects(t, after.Manifest)["Deployment/r-webhook"]
		if strip(a) == strip(b) {
			return
		}
		t.Errorf("the Deployment changed beyond its image and checksum/images:\n%s\n--- before:\n%s", a, b)
	})

	t.Run("a lock file checked at upgrade stops it", func(t *testing.T) {
		n := w.revisions("r")
		out, stderr, err := w.run("upgrade", "r", chart, "-n", "ns", "--reuse-values", "--lock", lock, "--check")
		if !errors.Is(err, pin.ErrLockDiffers) || cli.ExitCode(err) != 3 {
			t.Errorf("upgrade --check after a push: %v (exit %d), want the lock file to differ (exit 3)", err, cli.ExitCode(err))
		}
		if out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, reg.Ref("app:1.0")) {
			t.Errorf("stdout %q, stderr %q: want nothing and one line naming the image", out, stderr)
		}
		if w.revisions("r") != n {
			t.Errorf("a failed upgrade stored revision %d", w.revisions("r"))
		}
	})
}

// TestDeployHooks installs and upgrades testdata/chart, whose pre-install
// Job and test Pod are hooks: Helm 4 hands them to the post-renderer, so
// they are pinned too, and an upgrade with nothing changed stores the same
// manifest and hooks.
func TestDeployHooks(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		reg.PushImage(t, img)
	}
	chart := filepath.Join(repoRoot, "testdata", "chart")
	flags := []string{"--set", "image.app=" + reg.Ref("app:1.0"), "--set", "image.db=" + reg.Ref("db:1.0"), "--set", "image.tools=" + reg.Ref("tools:1.0")}
	w.mustRun("install", append([]string{"demo", chart}, flags...)...)
	w.mustRun("upgrade", append([]string{"demo", chart}, flags...)...)
	rev1, rev2 := w.release("demo", 1), w.release("demo", 2)
	if rev1.Manifest != rev2.Manifest {
		t.Errorf("manifests differ:\n%s\n---\n%s", rev1.Manifest, rev2.Manifest)
	}
	if len(rev1.Hooks) != 2 || len(rev2.Hooks) != 2 {
		t.Fatalf("%d and %d hooks, want the Job and the test Pod", len(rev1.Hooks), len(rev2.Hooks))
	}
	for i, h := range rev1.Hooks {
		if h.Manifest != rev2.Hooks[i].Manifest {
			t.Errorf("hook %s differs:\n%s\n---\n%s", h.Name, h.Manifest, rev2.Hooks[i].Manifest)
		}
		if !digestRE.MatchString(h.Manifest) || !strings.Contains(h.Manifest, "checksum/images") {
			t.Errorf("hook %s is not pinned:\n%s", h.Name, h.Manifest)
		}
	}
	if strings.Contains(rev1.Manifest+rev1.Hooks[0].Manifest, "postrenderer.helm.sh") {
		t.Errorf("Helm's file annotation was stored:\n%s", rev1.Manifest)
	}
}

// TestDeployUpgradeInstall: upgrade --install installs a release that is
// not there, saying so as helm upgrade does, then upgrades it.
func TestDeployUpgradeInstall(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	args := []string{"--install", "r", filepath.Join(repoRoot, "testdata", "generated"), "--set", "image=" + reg.Ref("app:1.0")}
	out := w.mustRun("upgrade", args...)
	if !strings.HasPrefix(out, "Release \"r\" does not exist. Installing it now.\nNAME: r\n") || !strings.Contains(out, "REVISION: 1\n") {
		t.Errorf("upgrade --install of a new release printed\n%s", out)
	}
	out = w.mustRun("upgrade", args...)
	if !strings.HasPrefix(out, "Release \"r\" has been upgraded.") || !strings.Contains(out, "REVISION: 2\n") {
		t.Errorf("upgrade --install of a release printed\n%s", out)
	}
	if a, b := w.release("r", 1).Manifest, w.release("r", 2).Manifest; a != b {
		t.Errorf("upgrade --install twice: the manifests differ:\n%s\n---\n%s", a, b)
	}
}

// TestDeployDryRun: --dry-run=client stores nothing and prints the hooks
// and the manifest, pinned, the same on each run; -o yaml prints the
// release.
func TestDeployDryRun(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	args := []string{"r", filepath.Join(repoRoot, "testdata", "generated"), "--dry-run=client", "--set", "image=" + reg.Ref("app:1.0")}
	a, b := w.mustRun("install", args...), w.mustRun("install", args...)
	lastDeployed := regexp.MustCompile(`(?m)^LAST DEPLOYED: .*\n`)
	if lastDeployed.ReplaceAllString(a, "") != lastDeployed.ReplaceAllString(b, "") {
		t.Errorf("two dry runs differ:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(a, "STATUS: pending-install\n") || !strings.Contains(a, "DESCRIPTION: Dry run complete\n") || !strings.Contains(a, "\nHOOKS:\n") || !strings.Contains(a, "\nMANIFEST:\n") {
		t.Errorf("digestpin install --dry-run=client printed\n%s", a)
	}
	if !strings.Contains(a, reg.Ref("app:1.0")+"@sha256:") {
		t.Errorf("the manifest printed is not pinned:\n%s", a)
	}
	if n := w.revisions("r"); n != 0 {
		t.Errorf("a dry run stored %d revisions", n)
	}
	y := w.mustRun("install", append(args, "-o", "yaml")...)
	var rel release.Release
	if err := sigsyaml.Unmarshal([]byte(y), &rel); err != nil || rel.Name != "r" || !strings.Contains(rel.Manifest, reg.Ref("app:1.0")+"@sha256:") {
		t.Errorf("-o yaml: %v, %+v", err, rel.Name)
	}
}

// TestDeployLookup: against a cluster, lookup reads it through Helm's own
// lookup (here a cluster whose API server is not there, so the read
// fails naming it); with --dry-run=client it reads nothing, finds nothing,
// and says so in one warning line.
func TestDeployLookup(t *testing.T) {
	w := newHelmWorld(t)
	w.cluster = true
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	args := []string{"r", filepath.Join(repoRoot, "testdata", "generated"), "--kube-apiserver", "http://127.0.0.1:1", "--set", "withLookup=true", "--set", "image=" + reg.Ref("app:1.0")}
	out, stderr, err := w.run("install", args...)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || out != "" {
		t.Errorf("install with a lookup and no API server: %v, stdout %q, want it to fail naming the server", err, out)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("stderr %q, want one line", stderr)
	}
	out, stderr, err = w.run("install", append(args, "--dry-run=client")...)
	if err != nil {
		t.Fatalf("--dry-run=client: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, `found: "no"`) {
		t.Errorf("--dry-run=client found something:\n%s", out)
	}
	var warnings []string
	for l := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		if strings.Contains(l, "lookup") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "warning: webhook/templates/lookup.yaml:2: lookup varies") {
		t.Errorf("stderr %q, want one warning naming lookup and its template", stderr)
	}
}

// TestDeployErrors: each bad input is one line, the exit status that says
// what it was, nothing on stdout, no revision stored and no lock file or
// report written.
func TestDeployErrors(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	chart := filepath.Join(repoRoot, "testdata", "generated")
	good := "image=" + reg.Ref("app:1.0")
	w.mustRun("install", "taken", chart, "--set", good)
	report := filepath.Join(t.TempDir(), "report.json")
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
		code int
		want string
	}{
		{"unknown flag", "install", []string{"r", chart, "--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{"no chart", "install", []string{"r"}, 2, "--generate-name"},
		{"upgrade without chart", "upgrade", []string{"r"}, 2, "RELEASE CHART"},
		{"missing image", "install", []string{"r", chart, "--set", "image=" + reg.Ref("missing:1.0")}, 1, reg.Ref("missing:1.0")},
		{"chart does not render", "install", []string{"r", chart, "--set", "certDays=notanumber", "--set", good}, 1, "installing release r"},
		{"chart missing", "install", []string{"r", filepath.Join(t.TempDir(), "nochart")}, 1, "nochart"},
		{"name taken", "install", []string{"taken", chart, "--set", good}, 1, "cannot reuse a name that is still in use"},
		{"no release", "upgrade", []string{"absent", chart, "--set", good}, 1, `"absent" has no deployed releases`},
		{"force and conflicts", "install", []string{"r", chart, "--force-replace", "--force-conflicts", "--set", good}, 2, "exclude each other"},
		{"bad wait", "upgrade", []string{"r", chart, "--wait=soon"}, 2, `"--wait"`},
		{"retired flag", "install", []string{"r", chart, "--previous", "x"}, 2, "--previous was retired"},
		{"dns", "upgrade", []string{"--install", "r", chart, "--enable-dns", "--set", good}, 2, "--enable-dns: digestpin upgrade renders without DNS lookups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := w.run(tc.cmd, append(tc.args, "--report", report)...)
			if code := cli.ExitCode(err); code != tc.code {
				t.Errorf("exit %d, want %d (%v)", code, tc.code, err)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "digestpin: error: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stdout %q, stderr %q: want nothing and one error line with %q", out, stderr, tc.want)
			}
			if n := w.revisions("r"); n != 0 {
				t.Errorf("%d revisions of r stored", n)
			}
			if _, err := os.Stat(report); err == nil {
				t.Error("a failed run wrote the report")
			}
		})
	}
	t.Run("no seed", func(t *testing.T) {
		var out, errb bytes.Buffer
		err := runDeploy(context.Background(), "install", []string{"r", chart}, &out, &errb, w.configure)
		if cli.ExitCode(err) != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "digestpin install needs a seed: --seed-file") {
			t.Errorf("exit %d, stdout %q, stderr %q", cli.ExitCode(err), out.String(), errb.String())
		}
	})
}

// TestDeployTimeouts: --timeout is Helm's, --pin-timeout (and
// DIGESTPIN_PIN_TIMEOUT) digestpin's bound on pinning, named when it runs
// out.
func TestDeployTimeouts(t *testing.T) {
	w := newHelmWorld(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	// Far longer than any slowness of a busy machine: a run that the pin
	// timeout did not stop takes at least this long.
	reg.SetLatency(time.Minute)
	args := []string{"r", filepath.Join(repoRoot, "testdata", "generated"), "--timeout", "1s", "--set", "image=" + reg.Ref("app:1.0")}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"flag", []string{"--pin-timeout", "200ms"}, "", "--pin-timeout 200ms ran out"},
		{"environment", nil, "200ms", "DIGESTPIN_PIN_TIMEOUT 200ms ran out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DIGESTPIN_PIN_TIMEOUT", tc.env)
			start := time.Now()
			_, stderr, err := w.run("install", append(args, tc.args...)...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("err %v, stderr %q, want %q", err, stderr, tc.want)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s: the pin timeout did not stop it", d)
			}
		})
	}
}

// certNames are the DNS names of the base64 PEM certificate b64.
func certNames(t *testing.T, b64 string) []string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		t.Fatalf("no PEM in %q", raw)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.DNSNames
}

// TestDeployRefusesTargetThatIsAnInput: install and upgrade start as every
// command does (one preamble): a report, lock file or log file that is the
// seed or a values file is refused before anything runs, with exit status
// 2 and the file left as it was; before, install replaced the values file
// with the report.
func TestDeployRefusesTargetThatIsAnInput(t *testing.T) {
	w := newHelmWorld(t)
	dir := t.TempDir()
	values := filepath.Join(dir, "v.yaml")
	const text = "replicas: 1\n"
	if err := os.WriteFile(values, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(repoRoot, "testdata", "generated")
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"install", []string{"r", chart, "--dry-run=client", "-f", values, "--report", values}, "--report " + values + " is the values file " + values},
		{"upgrade", []string{"r", chart, "--install", "--dry-run=client", "-f", values, "--write-lock", values}, "--write-lock " + values + " is the values file " + values},
		{"install", []string{"r", chart, "--dry-run=client", "--log-file", w.seed}, "--log-file " + w.seed + " is the seed file of --seed-file"},
	} {
		out, stderr, err := w.run(tc.cmd, tc.args...)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(stderr, "digestpin: error: "+tc.want) || strings.Count(stderr, "\n") != 1 || out != "" {
			t.Errorf("digestpin %s %q = %v, stdout %q, stderr %q; want a usage error with %q", tc.cmd, tc.args, err, out, stderr, tc.want)
		}
		if b, _ := os.ReadFile(values); string(b) != text {
			t.Errorf("digestpin %s: the values file is now %q", tc.cmd, b)
		}
	}
	if b, err := os.ReadFile(w.seed); err != nil || len(b) < 32 {
		t.Errorf("the seed file is now %q (%v)", b, err)
	}
}
