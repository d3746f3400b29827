//go:build linux

package kube

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestArgoCDInstallDryRun sends the repo server's Deployment, as the Argo
// CD plugin's two installs make it (scripts/argocd/repo-server-patch.yaml
// applied with kustomize to a Deployment in the shape of Argo CD's
// install.yaml; scripts/argocd/argocd-values.yaml rendered through a chart
// with the argo-cd chart's keys and functions, both in
// testdata/argocd-install), to the real API server as a server-side dry
// run: it accepts both (every mount names a volume, the init container and
// the sidecar are valid containers), and keeps the init container's script
// and the sidecar's mounts as sent. e2e/argocd_plugin_install_test.go
// checks the rest of them without a server.
func TestArgoCDInstallDryRun(t *testing.T) {
	c := controlPlane(t)
	root := repoRoot(t)
	kustomize := tool(t, "DIGESTPIN_TEST_KUSTOMIZE")
	h4 := helm4(t)

	dir := t.TempDir()
	for from, to := range map[string]string{
		filepath.Join(root, "testdata", "argocd-install", "repo-server.yaml"): "install.yaml",
		filepath.Join(root, "scripts", "argocd", "repo-server-patch.yaml"):    "repo-server-patch.yaml",
	} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kust := "resources:\n  - install.yaml\npatches:\n  - path: repo-server-patch.yaml\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "argocd", "plugin-install.sh"))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc string
		args []string
		bin  string
	}{
		{desc: "kustomize with the patch", bin: kustomize, args: []string{"build", dir}},
		{desc: "the argo-cd chart's values", bin: h4, args: []string{
			"template", "argocd", filepath.Join(root, "testdata", "argocd-install", "chart"),
			"-f", filepath.Join(root, "scripts", "argocd", "argocd-values.yaml"),
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := run(nil, nil, tc.bin, tc.args...)
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", tc.bin, r.err, r.stderr)
			}
			var m map[string]any
			if err := yaml.Unmarshal([]byte(r.stdout), &m); err != nil {
				t.Fatalf("parsing the Deployment: %v\n%s", err, r.stdout)
			}
			out, why := c.dryRun(t, m, "argocd")
			if why != "" {
				t.Fatalf("the API server refuses the repo server's Deployment: %s", why)
			}
			pod, _ := out["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			var install, sidecar map[string]any
			for _, ic := range pod["initContainers"].([]any) {
				if m := ic.(map[string]any); m["name"] == "digestpin-install" {
					install = m
				}
			}
			for _, ct := range pod["containers"].([]any) {
				if m := ct.(map[string]any); m["name"] == "digestpin" {
					sidecar = m
				}
			}
			if install == nil || sidecar == nil {
				t.Fatalf("the stored pod has no init container digestpin-install (%v) or sidecar digestpin (%v)", install != nil, sidecar != nil)
			}
			if cmd, _ := install["command"].([]any); len(cmd) != 5 || cmd[2] != string(script) {
				t.Errorf("the stored init container does not run scripts/argocd/plugin-install.sh as it is")
			}
			subPaths := map[string]string{}
			for _, vm := range sidecar["volumeMounts"].([]any) {
				m := vm.(map[string]any)
				if m["name"] == "digestpin-plugin" {
					subPaths[m["mountPath"].(string)], _ = m["subPath"].(string)
				}
			}
			if subPaths["/home/argocd/cmp-server/config"] != "config" || subPaths["/usr/local/digestpin/bin"] != "bin" {
				t.Errorf("the stored sidecar mounts digestpin-plugin as %v, want config and bin", subPaths)
			}
		})
	}
}

// TestArgoCDRefreshCronJobDryRun sends every object of
// scripts/argocd/refresh-cronjob.yaml (the service account, its Role and
// RoleBinding, the NetworkPolicy to Argo CD's Redis, the CronJob) to the
// real API server as a server-side dry run into the namespace argocd: it
// accepts each, and keeps the CronJob's schedule policy as sent.
// e2e/argocd_refresh_cronjob_test.go checks the rest of them, and that
// argocd-values.yaml's extraObjects are the same objects.
func TestArgoCDRefreshCronJobDryRun(t *testing.T) {
	c := controlPlane(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "refresh-cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := 0
	for _, d := range splitDocs(t, b) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("parsing refresh-cronjob.yaml: %v", err)
		}
		if m == nil {
			continue
		}
		kinds++
		out, why := c.dryRun(t, m, "argocd")
		if why != "" {
			t.Errorf("the API server refuses the %s of refresh-cronjob.yaml: %s", m["kind"], why)
			continue
		}
		if m["kind"] != "CronJob" {
			continue
		}
		spec, _ := out["spec"].(map[string]any)
		if spec["concurrencyPolicy"] != "Forbid" || spec["startingDeadlineSeconds"] == nil {
			t.Errorf("the stored CronJob has concurrencyPolicy %v, startingDeadlineSeconds %v", spec["concurrencyPolicy"], spec["startingDeadlineSeconds"])
		}
	}
	if kinds != 5 {
		t.Errorf("refresh-cronjob.yaml holds %d objects, want 5", kinds)
	}
}
