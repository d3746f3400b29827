package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// readDocs returns the documents of a YAML stream, empty ones left out.
func readDocs(t *testing.T, what string, b []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("parsing %s: %v", what, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
}

// refreshCronJobObjects returns the objects of
// scripts/argocd/refresh-cronjob.yaml, by kind.
func refreshCronJobObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "refresh-cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, d := range readDocs(t, "refresh-cronjob.yaml", b) {
		k, _ := d["kind"].(string)
		if out[k] != nil {
			t.Fatalf("refresh-cronjob.yaml holds two %s", k)
		}
		out[k] = d
	}
	return out
}

// TestArgoCDRefreshCronJob checks what refresh-cronjob.yaml promises:
// RBAC of list and patch on Applications alone; a CronJob that never runs
// twice at once, skips what it missed, keeps little history and bounds
// each run; a pod whose init container is plugin-install.sh as it is,
// whose token reaches the digestpin container alone, non-root on
// read-only file systems; and digestpin argocd refresh --moved on Argo
// CD's Redis.
func TestArgoCDRefreshCronJob(t *testing.T) {
	t.Parallel()
	objs := refreshCronJobObjects(t)
	if got, want := slices.Sorted(func(yield func(string) bool) {
		for k := range objs {
			if !yield(k) {
				return
			}
		}
	}), []string{"CronJob", "NetworkPolicy", "Role", "RoleBinding", "ServiceAccount"}; !cmp.Equal(got, want) {
		t.Fatalf("refresh-cronjob.yaml holds %v, want %v", got, want)
	}
	wantRules := []any{map[string]any{
		"apiGroups": []any{"argoproj.io"}, "resources": []any{"applications"}, "verbs": []any{"list", "patch"},
	}}
	if diff := cmp.Diff(wantRules, dig(t, objs["Role"], "rules")); diff != "" {
		t.Errorf("the Role's rules (-want +got):\n%s", diff)
	}
	if got := dig(t, objs["RoleBinding"], "subjects"); !cmp.Equal(got, []any{map[string]any{"kind": "ServiceAccount", "name": "digestpin-refresh", "namespace": "argocd"}}) {
		t.Errorf("the RoleBinding binds %v", got)
	}
	if got := objs["ServiceAccount"]["automountServiceAccountToken"]; got != false {
		t.Errorf("the ServiceAccount's automountServiceAccountToken = %v, want false", got)
	}

	cj := dig(t, objs["CronJob"], "spec").(map[string]any)
	for k, want := range map[string]any{"concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 300, "successfulJobsHistoryLimit": 1} {
		if cj[k] != want {
			t.Errorf("the CronJob's %s = %v, want %v", k, cj[k], want)
		}
	}
	job := dig(t, cj, "jobTemplate", "spec").(map[string]any)
	if job["backoffLimit"] != 0 || job["activeDeadlineSeconds"] == nil {
		t.Errorf("the Job's backoffLimit = %v, activeDeadlineSeconds = %v: want 0 and a bound", job["backoffLimit"], job["activeDeadlineSeconds"])
	}
	pod := dig(t, job, "template", "spec").(map[string]any)
	if pod["automountServiceAccountToken"] != false || pod["serviceAccountName"] != "digestpin-refresh" {
		t.Errorf("the pod's serviceAccountName = %v, automountServiceAccountToken = %v", pod["serviceAccountName"], pod["automountServiceAccountToken"])
	}
	if dig(t, pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the pod may run as root")
	}
	script, _ := inlineScript(t, pod)
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "argocd", "plugin-install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if script != string(want) {
		t.Error("digestpin-install's script is not scripts/argocd/plugin-install.sh as it is")
	}
	for _, list := range []string{"initContainers", "containers"} {
		for name, c := range byName(t, dig(t, pod, list)) {
			sc, _ := c["securityContext"].(map[string]any)
			if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
				t.Errorf("%s %s: securityContext %v, want a read-only root and no privilege escalation", list, name, sc)
			}
		}
	}
	dp := container(t, pod, "containers", "digestpin")
	cmd, _ := dp["command"].([]any)
	if len(cmd) < 4 || !cmp.Equal(cmd[1:4], []any{"argocd", "refresh", "--moved"}) {
		t.Errorf("the container runs %v, want digestpin argocd refresh --moved", cmd)
	}
	env := map[string]any{}
	for _, e := range dig(t, dp, "env").([]any) {
		m := e.(map[string]any)
		env[m["name"].(string)] = m["value"]
	}
	if env["DIGESTPIN_CACHE"] != "redis://argocd-redis:6379/0" || env["DIGESTPIN_CACHE_TTL"] == nil {
		t.Errorf("DIGESTPIN_CACHE = %v, DIGESTPIN_CACHE_TTL = %v: want Argo CD's Redis and a TTL", env["DIGESTPIN_CACHE"], env["DIGESTPIN_CACHE_TTL"])
	}
	mounts := map[string]bool{}
	for _, m := range dig(t, dp, "volumeMounts").([]any) {
		mounts[m.(map[string]any)["mountPath"].(string)] = true
	}
	if !mounts["/var/run/secrets/kubernetes.io/serviceaccount"] {
		t.Error("the digestpin container has no service account token")
	}
	for _, m := range dig(t, container(t, pod, "initContainers", "digestpin-install"), "volumeMounts").([]any) {
		if p := m.(map[string]any)["mountPath"]; p != "/digestpin" {
			t.Errorf("digestpin-install mounts %v: it needs the binary's volume alone", p)
		}
	}
}

// extraObjectsChart is a chart with the argo-cd chart's extraObjects
// template (templates/extra-manifests.yaml: each item through tpl, a
// string as it is, an object as YAML) and the values its items read.
var extraObjectsChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: argo-cd\nversion: 9.4.0\nappVersion: v3.3.0\n",
	"values.yaml": "global:\n  networkPolicy:\n    create: false\nredis:\n  enabled: true\nredis-ha:\n  enabled: false\n" +
		"extraObjects: []\n",
	"templates/extra-manifests.yaml": `{{ range .Values.extraObjects }}
---
{{ if typeIs "string" . }}
    {{- tpl . $ }}
{{- else }}
    {{- tpl (toYaml .) $ }}
{{- end }}
{{ end }}
`,
}

// TestArgoCDRefreshCronJobValues renders argocd-values.yaml's
// extraObjects as the argo-cd chart does, into the namespace argocd, and
// checks that they are refresh-cronjob.yaml's objects (the chart's tpl
// changed nothing but the namespace); the NetworkPolicy
// to Redis only when the chart makes Redis's own (without it, a policy of
// the job's alone would shut Argo CD's pods out of Redis).
func TestArgoCDRefreshCronJobValues(t *testing.T) {
	t.Parallel()
	chart := t.TempDir()
	for p, content := range extraObjectsChart {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	values := filepath.Join(repoRoot(t), "scripts", "argocd", "argocd-values.yaml")
	want := refreshCronJobObjects(t)
	for _, tc := range []struct {
		desc    string
		set     []string
		network bool
	}{
		{desc: "without network policies"},
		{desc: "with the chart's network policies", set: []string{"--set", "global.networkPolicy.create=true"}, network: true},
		{desc: "with redis-ha", set: []string{"--set", "global.networkPolicy.create=true", "--set", "redis-ha.enabled=true"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			args := append([]string{"template", "argocd", chart, "-n", "argocd", "-f", values}, tc.set...)
			r := runCmd(t, t.TempDir(), nil, nil, helm4(t), args...)
			if r.err != nil {
				t.Fatalf("helm template: %v\n%s", r.err, r.stderr)
			}
			got := map[string]map[string]any{}
			for _, d := range readDocs(t, "the rendered extraObjects", []byte(r.stdout)) {
				got[d["kind"].(string)] = d
			}
			w := map[string]map[string]any{}
			for k, v := range want {
				if k != "NetworkPolicy" || tc.network {
					w[k] = v
				}
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("the chart's extraObjects differ from refresh-cronjob.yaml (-refresh-cronjob.yaml +values):\n%s", diff)
			}
		})
	}
}
