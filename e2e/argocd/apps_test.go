//go:build linux

package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testgit"
)

// app is an Application of the tests: the plugin renders path of repo
// into the namespace ns, with the plugin env env (NAME=value) and the
// plugin parameters params (spec.source.plugin.parameters, as written).
type app struct {
	name, ns string
	repo     *testgit.Repo
	path     string
	env      []string
	params   []map[string]any
	labels   map[string]string
}

// create creates the Application (with no sync policy: the tests sync as
// the API server does, by setting its operation).
func (a *argoCD) create(t *testing.T, ap app) {
	t.Helper()
	a.kubectl(t, nil, "create", "namespace", ap.ns)
	env := []map[string]string{}
	for _, kv := range ap.env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, map[string]string{"name": k, "value": v})
	}
	plugin := map[string]any{"name": pluginName, "env": env}
	if ap.params != nil {
		plugin["parameters"] = ap.params
	}
	obj := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": ap.name, "namespace": argocdNamespace, "labels": ap.labels},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL":        ap.repo.URL,
				"targetRevision": "main",
				"path":           ap.path,
				"plugin":         plugin,
			},
			"destination": map[string]any{"server": inCluster, "namespace": ap.ns},
		},
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	a.kubectl(t, b, "create", "-f", "-")
}

// application is what the tests read of an Application.
type application struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Operation json.RawMessage `json:"operation"`
	Status    struct {
		Sync struct {
			Status   string `json:"status"`
			Revision string `json:"revision"`
		} `json:"sync"`
		Health struct {
			Status string `json:"status"`
		} `json:"health"`
		Conditions []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"conditions"`
		OperationState *struct {
			Phase      string `json:"phase"`
			Message    string `json:"message"`
			StartedAt  string `json:"startedAt"`
			FinishedAt string `json:"finishedAt"`
		} `json:"operationState"`
		Summary struct {
			Images []string `json:"images"`
		} `json:"summary"`
		ReconciledAt string `json:"reconciledAt"`
		Resources    []struct {
			Kind   string `json:"kind"`
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"resources"`
	} `json:"status"`
}

// get reads the Application name.
func (a *argoCD) get(t *testing.T, name string) application {
	t.Helper()
	var ap application
	if err := json.Unmarshal([]byte(a.kubectl(t, nil, "-n", argocdNamespace, "get", "application", name, "-o", "json")), &ap); err != nil {
		t.Fatalf("decoding Application %s: %v", name, err)
	}
	return ap
}

// waitApp polls the Application until done says it is, for up to 3
// minutes, and returns it.
func (a *argoCD) waitApp(t *testing.T, name, what string, done func(application) bool) application {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ap := a.get(t, name)
		if done(ap) {
			return ap
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(ap.Status, "", "  ")
			t.Fatalf("Application %s: %s: not in 3 minutes; status:\n%s", name, what, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// reconciled waits for the controller's first reconciliation of a new
// Application: a sync status, or a condition saying why there is none.
func (a *argoCD) reconciled(t *testing.T, name string) application {
	t.Helper()
	return a.waitApp(t, name, "first reconciliation", func(ap application) bool {
		return ap.Status.ReconciledAt != "" && (ap.Status.Sync.Status == "Synced" || ap.Status.Sync.Status == "OutOfSync" || len(ap.Status.Conditions) > 0)
	})
}

// hardRefresh asks for a hard refresh as `argocd app get --hard-refresh`
// does (the annotation argocd.argoproj.io/refresh: hard) and waits until
// the controller has done it: it removes the annotation in the same patch
// that writes the new status.
func (a *argoCD) hardRefresh(t *testing.T, name string) application {
	t.Helper()
	return a.refresh(t, name, "hard")
}

// refresh asks for a refresh of kind normal (what Argo CD's git webhook
// does for a new commit) or hard, and waits until it is done.
func (a *argoCD) refresh(t *testing.T, name, kind string) application {
	t.Helper()
	a.kubectl(t, nil, "-n", argocdNamespace, "annotate", "--overwrite", "application", name, "argocd.argoproj.io/refresh="+kind)
	return a.refreshed(t, name)
}

// refreshed waits until the controller has removed the refresh annotation.
func (a *argoCD) refreshed(t *testing.T, name string) application {
	t.Helper()
	return a.waitApp(t, name, "hard refresh", func(ap application) bool {
		_, pending := ap.Metadata.Annotations["argocd.argoproj.io/refresh"]
		return !pending
	})
}

// sync syncs the Application as `argocd app sync` does (through the API
// server, which sets its operation) and waits until the operation has
// ended; the controller clears the operation when it records its end.
func (a *argoCD) sync(t *testing.T, name string) application {
	t.Helper()
	ap := a.trySync(t, name)
	if ap.Status.OperationState == nil || ap.Status.OperationState.Phase != "Succeeded" {
		b, _ := json.MarshalIndent(ap.Status.OperationState, "", "  ")
		t.Fatalf("Application %s: sync did not succeed:\n%s", name, b)
	}
	return ap
}

// trySync is sync that returns the Application however the sync ended.
func (a *argoCD) trySync(t *testing.T, name string) application {
	t.Helper()
	a.kubectl(t, nil, "-n", argocdNamespace, "patch", "application", name, "--type=merge",
		"-p", `{"operation":{"initiatedBy":{"username":"digestpin-test"},"sync":{"syncStrategy":{"hook":{}}}}}`)
	return a.waitApp(t, name, "sync", func(ap application) bool {
		return len(ap.Operation) == 0 || string(ap.Operation) == "null"
	})
}

// syncStatus returns the Application's sync status.
func syncStatus(ap application) string { return ap.Status.Sync.Status }

// replicaSets returns the number of ReplicaSets of each Deployment in ns
// (controlplane's ReplicaSets: once the deployment controller has seen
// every Deployment's latest generation).
func (a *argoCD) replicaSets(t *testing.T, ns string) map[string]int {
	t.Helper()
	counts, err := a.cluster.ReplicaSets(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// newSets returns how many ReplicaSets each Deployment gained from before
// to after, as "name +N" sorted by name.
func newSets(before, after map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		parts = append(parts, fmt.Sprintf("%s +%d", k, after[k]-before[k]))
	}
	return strings.Join(parts, ", ")
}
