//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// lastDeployed is the line of helm's status that says when: the only one
// that differs between two runs.
var lastDeployed = regexp.MustCompile(`(?m)^LAST DEPLOYED: .*\n`)

// statusDocs returns the objects of the HOOKS and MANIFEST sections of
// what helm install or upgrade printed.
func statusDocs(t *testing.T, out string) map[string]doc {
	t.Helper()
	h := strings.Index(out, "\nHOOKS:\n")
	if h < 0 {
		t.Fatalf("no HOOKS: section in\n%s", out)
	}
	hooks := out[h+len("\nHOOKS:\n"):]
	m := strings.Index("\n"+hooks, "\nMANIFEST:\n")
	if m < 0 {
		t.Fatalf("no MANIFEST: section in\n%s", out)
	}
	manifest := hooks[m+len("MANIFEST:\n"):]
	if n := strings.Index(manifest, "\nNOTES:\n"); n >= 0 {
		manifest = manifest[:n]
	}
	return parseDocs(t, hooks[:m]+"\n"+manifest)
}

// normalYAML is doc as kyaml writes it, comments included.
func normalYAML(t *testing.T, doc string) string {
	t.Helper()
	n, err := yaml.Parse(doc)
	if err != nil {
		t.Fatalf("parsing %q: %v", doc, err)
	}
	return n.MustString()
}

// TestHelm4DigestpinCommands runs digestpin's commands as a Helm 4 user
// does, through the real Helm 4.3.1 CLI with the checkout's root plugin
// installed: helm digestpin template, install --dry-run=client and upgrade
// --install --dry-run=client. For a chart without generators each prints
// what Helm prints with the digestpin-postrenderer plugin (but for the
// time); with generators, the same objects as digestpin template; each
// repeat is the same; every image is pinned, hooks included. Helm's -n and
// environment reach the command. Without a cluster, what needs one fails
// as Helm does, in one line; a real cluster is another test's.
func TestHelm4DigestpinCommands(t *testing.T) {
	t.Parallel()
	bin, h4 := digestpinBin(t), helm4(t)
	reg := testregistry.New(t)
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		reg.PushImage(t, img)
	}
	src := checkout(t, bin)
	chart := filepath.Join(src, "testdata", "chart")
	generated := filepath.Join(src, "testdata", "generated")
	home := helmHome(t, t.TempDir())
	// The root plugin keeps the checkout's bin/digestpin and
	// bin/digestpin-helm (they report the plugin's version); the
	// post-renderer plugin gets the same binaries (DIGESTPIN_PLUGIN_BINARY
	// and the digestpin-helm beside it).
	if out := mustRun(t, home, h4, "plugin", "install", src); !strings.Contains(out, "Installed plugin: digestpin") {
		t.Fatalf("helm plugin install %s printed\n%s", src, out)
	}
	mustRun(t, append(home, "DIGESTPIN_PLUGIN_BINARY="+bin), h4, "plugin", "install", filepath.Join(src, h4PluginDir))
	seed := newSeed(t)
	sets := []string{
		"--set", "image.app=" + reg.Ref("app:1.0"),
		"--set", "image.db=" + reg.Ref("db:1.0"),
		"--set", "image.tools=" + reg.Ref("tools:1.0"),
	}
	pinned := map[string]string{
		"Deployment/demo-web":      pinnedRef(t, reg.Ref("app:1.0")),
		"StatefulSet/demo-db":      pinnedRef(t, reg.Ref("db:1.0")),
		"Job/demo-migrate":         pinnedRef(t, reg.Ref("app:1.0")),
		"Pod/demo-test-connection": pinnedRef(t, reg.Ref("tools:1.0")),
	}
	genSet := []string{"--set", "image=" + reg.Ref("app:1.0")}
	// memory is Helm's memory release driver with no releases: with it,
	// helm upgrade --install --dry-run=client needs no cluster, ours nor
	// Helm's.
	empty := filepath.Join(t.TempDir(), "releases.yaml")
	if err := os.WriteFile(empty, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	memory := append(append([]string{}, home...), "HELM_DRIVER=memory", "HELM_MEMORY_DRIVER_DATA="+empty)

	t.Run("template", func(t *testing.T) {
		args := append([]string{"template", "demo", chart, "--seed-file", seed}, sets...)
		got := mustRun(t, home, h4, append([]string{"digestpin"}, args...)...)
		direct := runCmd(t, "", nil, home, bin, args...)
		if direct.err != nil || got != direct.stdout {
			t.Errorf("helm digestpin template differs from digestpin template (%v):\n%s\n---\n%s", direct.err, got, direct.stdout)
		}
		wantImages(t, "helm digestpin template", parseDocs(t, got), pinned)

		// Helm's own -n, before or after the command, as the
		// environment Helm passes (HELM_NAMESPACE).
		for _, ns := range [][]string{{"-n", "prod", "digestpin"}, {"digestpin"}} {
			a := append(append(ns, "template", "r", generated, "--seed-file", seed), genSet...)
			if len(ns) == 1 {
				a = append(a, "--namespace=prod")
			}
			viaHelm := mustRun(t, home, h4, a...)
			d := runCmd(t, "", nil, home, bin, append([]string{"template", "r", generated, "-n", "prod", "--seed-file", seed}, genSet...)...)
			if d.err != nil || viaHelm != d.stdout || !strings.Contains(viaHelm, "namespace: prod\n") {
				t.Errorf("helm %s: the namespace did not reach digestpin template (%v):\n%s", strings.Join(a, " "), d.err, viaHelm)
			}
		}
	})

	t.Run("install --dry-run=client", func(t *testing.T) {
		args := append([]string{"install", "demo", chart, "--dry-run=client"}, sets...)
		got := mustRun(t, home, h4, append(append([]string{"digestpin"}, args...), "--seed-file", seed)...)
		helm := mustRun(t, home, h4, append(args, "--post-renderer", h4PluginName)...)
		if lastDeployed.ReplaceAllString(got, "") != lastDeployed.ReplaceAllString(helm, "") {
			t.Errorf("helm digestpin install --dry-run=client differs from helm install --post-renderer %s:\n%s\n---\n%s", h4PluginName, got, helm)
		}
		again := mustRun(t, home, h4, append(append([]string{"digestpin"}, args...), "--seed-file", seed)...)
		if lastDeployed.ReplaceAllString(again, "") != lastDeployed.ReplaceAllString(got, "") {
			t.Errorf("a second run differs:\n%s\n---\n%s", again, got)
		}
		if !strings.HasPrefix(got, "NAME: demo\nLAST DEPLOYED: ") || !strings.Contains(got, "\nSTATUS: pending-install\n") {
			t.Errorf("helm digestpin install --dry-run=client printed\n%s", got)
		}
		wantImages(t, "helm digestpin install --dry-run=client", statusDocs(t, got), pinned)
	})

	t.Run("install --dry-run=client with generators", func(t *testing.T) {
		args := append([]string{"digestpin", "install", "r", generated, "-n", "ns", "--dry-run=client", "--seed-file", seed}, genSet...)
		a, b := mustRun(t, home, h4, args...), mustRun(t, home, h4, args...)
		if lastDeployed.ReplaceAllString(a, "") != lastDeployed.ReplaceAllString(b, "") {
			t.Errorf("two runs differ:\n%s\n---\n%s", a, b)
		}
		tmpl := runCmd(t, "", nil, home, bin, append([]string{"template", "r", generated, "-n", "ns", "--seed-file", seed}, genSet...)...)
		if tmpl.err != nil {
			t.Fatal(tmpl.err, tmpl.stderr)
		}
		// Helm 4 re-encodes what a post-renderer returns (kyaml's
		// sequence indentation), where digestpin template prints what
		// `helm template | digestpin` does: the same objects.
		got, want := statusDocs(t, a), parseDocs(t, tmpl.stdout)
		if len(got) != len(want) {
			t.Errorf("install has %d objects, template %d", len(got), len(want))
		}
		for k, w := range want {
			if g, w := normalYAML(t, got[k].raw), normalYAML(t, w.raw); g != w {
				t.Errorf("%s: install printed\n%s\nwant what digestpin template prints:\n%s", k, g, w)
			}
		}
		if img := got["Deployment/r-webhook"].image; !strings.Contains(img, reg.Ref("app:1.0")+"@sha256:") {
			t.Errorf("the webhook's image %q is not pinned", img)
		}
	})

	t.Run("upgrade --install --dry-run=client", func(t *testing.T) {
		args := append([]string{"upgrade", "--install", "demo", chart, "--dry-run=client"}, sets...)
		got := mustRun(t, memory, h4, append(append([]string{"digestpin"}, args...), "--seed-file", seed)...)
		helm := mustRun(t, memory, h4, append(args, "--post-renderer", h4PluginName)...)
		if lastDeployed.ReplaceAllString(got, "") != lastDeployed.ReplaceAllString(helm, "") {
			t.Errorf("helm digestpin upgrade --install differs from helm upgrade --install --post-renderer %s:\n%s\n---\n%s", h4PluginName, got, helm)
		}
		again := mustRun(t, memory, h4, append(append([]string{"digestpin"}, args...), "--seed-file", seed)...)
		if lastDeployed.ReplaceAllString(again, "") != lastDeployed.ReplaceAllString(got, "") {
			t.Errorf("a second run differs:\n%s\n---\n%s", again, got)
		}
		if !strings.HasPrefix(got, "Release \"demo\" does not exist. Installing it now.\nNAME: demo\n") {
			t.Errorf("helm digestpin upgrade --install printed\n%s", got)
		}
		wantImages(t, "helm digestpin upgrade --install --dry-run=client", statusDocs(t, got), pinned)
	})

	// Bad input and what needs a cluster: helm's exit status, nothing on
	// stdout, digestpin's one line and Helm's own line about the plugin.
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", home, []string{"install", "r", generated, "--seed-file", seed, "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"no seed", home, []string{"upgrade", "--install", "r", generated, "--dry-run=client"}, "needs a seed: --seed-file"},
		{"chart does not render", home, append([]string{"install", "r", generated, "--dry-run=client", "--seed-file", seed, "--set", "certDays=notanumber"}, genSet...), "installing release r: template: webhook/templates/webhook.yaml"},
		{"missing image", home, []string{"install", "r", generated, "--dry-run=client", "--seed-file", seed, "--set", "image=" + reg.Ref("missing:1.0")}, reg.Ref("missing:1.0")},
		{"upgrade needs the cluster's releases", home, append([]string{"upgrade", "--install", "r", generated, "--dry-run=client", "--seed-file", seed}, genSet...), "upgrading release r: kubernetes cluster unreachable"},
		{"install needs the cluster", memory, append([]string{"install", "r", generated, "--seed-file", seed}, genSet...), "installing release r: could not get server version from Kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runHelm(t, tc.env, h4, append([]string{"digestpin"}, tc.args...)...)
			if res.err == nil || res.stdout != "" {
				t.Errorf("exit %v, stdout %q: want a failure and nothing", res.err, res.stdout)
			}
			var ours, others []string
			for l := range strings.SplitSeq(strings.TrimSpace(res.stderr), "\n") {
				if strings.HasPrefix(l, "digestpin: ") {
					ours = append(ours, l)
				} else if l != `Error: plugin "digestpin" exited with error` {
					others = append(others, l)
				}
			}
			if len(ours) != 1 || !strings.HasPrefix(ours[0], "digestpin: error: ") || !strings.Contains(ours[0], tc.want) || len(others) != 0 {
				t.Errorf("stderr %q, want one digestpin error line with %q and Helm's line about the plugin", res.stderr, tc.want)
			}
		})
	}
}
