//go:build linux

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/e2e/kube/controlplane"
	"github.com/digestpin/digestpin/internal/testfiles"
)

// cluster is the running control plane (package controlplane) with what
// the tests keep of it.
type cluster struct {
	*controlplane.Cluster

	mu         sync.Mutex
	namespaces map[string]bool        // made by dryRun
	resources  map[string]apiResource // "apiVersion kind", from discovery
}

// clusterConfig says how to start a control plane.
type clusterConfig = controlplane.Config

// controlPlaneBinaries are the binaries startCluster needs.
var controlPlaneBinaries = controlplane.Binaries

// startCluster starts a control plane (controlplane.Start).
func startCluster(ctx context.Context, cfg clusterConfig) (*cluster, error) {
	c, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{Cluster: c}, nil
}

// The one control plane of the package's tests, started by the first test
// that needs it and stopped by TestMain after the last.
var shared struct {
	once sync.Once
	c    *cluster
	dir  string
	err  error
}

// figures are the numbers the tests print at the end: start-up time and
// the rollouts counted in each scenario.
var figures struct {
	mu    sync.Mutex
	lines []string
}

// figure logs a figure and keeps it for the summary TestMain prints.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	figures.mu.Lock()
	defer figures.mu.Unlock()
	figures.lines = append(figures.lines, t.Name()+": "+line)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	if len(figures.lines) > 0 {
		fmt.Println("rollout figures:")
		for _, l := range figures.lines {
			fmt.Println("  " + l)
		}
	}
	os.Exit(code)
}

// tool returns the path named by env (testfiles.Tool: skipped outside
// CI when missing, failed in CI).
func tool(t *testing.T, env string) string {
	t.Helper()
	return testfiles.Tool(t, env, env+" does not name what the test needs; run the tests with `make test-kube`, which builds it")
}

func digestpinBin(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_BIN") }
func helm3(t *testing.T) string        { return tool(t, "DIGESTPIN_TEST_HELM3") }
func helm4(t *testing.T) string        { return tool(t, "DIGESTPIN_TEST_HELM4") }
func kubeBin(t *testing.T) string      { return tool(t, "DIGESTPIN_TEST_KUBE") }

// repoRoot returns the digestpin repository's root folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// controlPlane returns the package's running control plane, starting it
// the first time.
func controlPlane(t *testing.T) *cluster {
	t.Helper()
	bin := kubeBin(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "digestpin-kube-")
		if shared.err != nil {
			return
		}
		shared.c, shared.err = startCluster(context.Background(), clusterConfig{Bin: bin, Dir: shared.dir})
		if shared.err == nil {
			figures.mu.Lock()
			figures.lines = append(figures.lines, fmt.Sprintf("control plane: Kubernetes %s (etcd, kube-apiserver, kube-controller-manager) ready in %.1f s",
				shared.c.Version, shared.c.Startup.Seconds()))
			figures.mu.Unlock()
		}
	})
	if shared.err != nil {
		t.Fatalf("starting the control plane: %v", shared.err)
	}
	return shared.c
}

// result is what a command printed and how it ended.
type result struct {
	stdout, stderr string
	err            error
}

// run runs name with args, stdin and the environment plus env.
// DIGESTPIN_* settings of the developer's own are dropped, so that they
// cannot change a test.
func run(stdin []byte, env []string, name string, args ...string) result {
	r := testfiles.Run(stdin, env, name, args...)
	return result{stdout: r.Stdout, stderr: r.Stderr, err: r.Err}
}

// mustRun is run that fails the test when the command fails.
func mustRun(t *testing.T, stdin []byte, env []string, name string, args ...string) string {
	t.Helper()
	res := run(stdin, env, name, args...)
	if res.err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), res.err, res.stderr)
	}
	return res.stdout
}

// env is the environment that points kubectl and Helm at the cluster.
func (c *cluster) env() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig, "KUBECACHEDIR=" + c.File("kubecache")}
}

// kubectl runs kubectl against the cluster and fails the test on error.
func (c *cluster) kubectlT(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	return mustRun(t, stdin, c.env(), c.Kubectl, args...)
}

// namespace creates a namespace for one test.
func (c *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	c.kubectlT(t, nil, "create", "namespace", name)
	return name
}

// apply applies a stream with server-side apply into ns.
func (c *cluster) apply(t *testing.T, ns string, stream string) {
	t.Helper()
	c.kubectlT(t, []byte(stream), "apply", "--server-side", "--field-manager=digestpin-test", "-n", ns, "-f", "-")
}

// object is what the tests read of an object through the API.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string            `json:"name"`
		Generation      int64             `json:"generation"`
		Annotations     map[string]string `json:"annotations"`
		OwnerReferences []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Spec   map[string]any `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
	} `json:"status"`
}

// list returns the objects of the given kinds in ns.
func (c *cluster) list(t *testing.T, ns, kinds string) []object {
	t.Helper()
	var l struct{ Items []object }
	if err := json.Unmarshal([]byte(c.kubectlT(t, nil, "get", kinds, "-n", ns, "-o", "json")), &l); err != nil {
		t.Fatalf("decoding kubectl get %s: %v", kinds, err)
	}
	return l.Items
}

// The workload kinds whose pod templates the tests compare, and the kinds
// of the revisions their controllers keep.
const (
	workloadKinds = "deployments,statefulsets,daemonsets,cronjobs"
	revisionKinds = "replicasets,controllerrevisions"
)

// workload is one workload's state through the API.
type workload struct {
	generation int64
	template   string   // the pod template, as JSON
	images     []string // name=image of each container and init container, sorted
	checksum   string   // the template's checksum/images annotation
}

// state is a namespace's workloads and revision counts, by "Kind/name".
type state struct {
	workloads map[string]workload
	revisions map[string]int // ReplicaSets of a Deployment, ControllerRevisions of a StatefulSet or DaemonSet
}

// settle waits until the controllers have seen the latest generation of
// every Deployment, StatefulSet and DaemonSet in ns (a controller makes a
// workload's new revision before it records the generation it observed),
// then returns the namespace's state.
func (c *cluster) settle(t *testing.T, ns string) state {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		objs := c.list(t, ns, workloadKinds)
		pending := ""
		for _, o := range objs {
			if o.Kind != "CronJob" && o.Status.ObservedGeneration < o.Metadata.Generation {
				pending = o.Kind + "/" + o.Metadata.Name
			}
		}
		if pending == "" {
			return c.state(t, ns, objs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: the controllers did not observe its generation in a minute", pending, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) state(t *testing.T, ns string, objs []object) state {
	t.Helper()
	s := state{workloads: map[string]workload{}, revisions: map[string]int{}}
	for _, o := range objs {
		key := o.Kind + "/" + o.Metadata.Name
		tmpl := podTemplate(o)
		b, err := json.Marshal(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		w := workload{generation: o.Metadata.Generation, template: string(b)}
		if md, ok := tmpl["metadata"].(map[string]any); ok {
			if a, ok := md["annotations"].(map[string]any); ok {
				w.checksum, _ = a["checksum/images"].(string)
			}
		}
		spec, _ := tmpl["spec"].(map[string]any)
		for _, list := range []string{"initContainers", "containers"} {
			cs, _ := spec[list].([]any)
			for _, ci := range cs {
				cm, _ := ci.(map[string]any)
				w.images = append(w.images, fmt.Sprintf("%s=%s", cm["name"], cm["image"]))
			}
		}
		slices.Sort(w.images)
		s.workloads[key] = w
		if o.Kind != "CronJob" {
			s.revisions[key] = 0
		}
	}
	for _, r := range c.list(t, ns, revisionKinds) {
		for _, own := range r.Metadata.OwnerReferences {
			s.revisions[own.Kind+"/"+own.Name]++
		}
	}
	return s
}

// podTemplate returns a workload's pod template.
func podTemplate(o object) map[string]any {
	spec := o.Spec
	if o.Kind == "CronJob" {
		jt, _ := spec["jobTemplate"].(map[string]any)
		spec, _ = jt["spec"].(map[string]any)
	}
	tmpl, _ := spec["template"].(map[string]any)
	return tmpl
}

// newRevisions returns how many revisions each workload gained from
// before to after.
func newRevisions(before, after state) map[string]int {
	d := map[string]int{}
	for k, n := range after.revisions {
		d[k] = n - before.revisions[k]
	}
	return d
}

// checkMoves checks what changed from before to after: the workloads in
// moved have exactly one new revision and a new pod template (CronJobs: a
// new template and generation); every other workload has no new revision,
// the same generation and the same template, byte for byte.
func checkMoves(t *testing.T, desc string, before, after state, moved ...string) {
	t.Helper()
	if len(after.workloads) != len(before.workloads) {
		t.Fatalf("%s: %d workloads, were %d", desc, len(after.workloads), len(before.workloads))
	}
	news := newRevisions(before, after)
	for key, b := range before.workloads {
		a, ok := after.workloads[key]
		if !ok {
			t.Errorf("%s: %s is gone", desc, key)
			continue
		}
		want := 0
		if slices.Contains(moved, key) {
			want = 1
		}
		if _, counted := after.revisions[key]; counted && news[key] != want {
			t.Errorf("%s: %s has %d new revisions, want %d", desc, key, news[key], want)
		}
		if changed := a.template != b.template; changed != (want == 1) {
			t.Errorf("%s: %s pod template changed = %v, want %v\nbefore %s\nafter  %s", desc, key, changed, want == 1, b.template, a.template)
		}
		if bumped := a.generation != b.generation; bumped != (want == 1) {
			t.Errorf("%s: %s generation %d → %d, want a new generation = %v", desc, key, b.generation, a.generation, want == 1)
		}
	}
}

// summary formats the new revisions of each workload (a CronJob: whether
// its pod template changed), sorted.
func summary(before, after state) string {
	news := newRevisions(before, after)
	keys := make([]string, 0, len(after.workloads))
	for k := range after.workloads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, counted := after.revisions[k]; counted {
			parts = append(parts, fmt.Sprintf("%s +%d", k, news[k]))
		} else if after.workloads[k].template != before.workloads[k].template {
			parts = append(parts, k+" new template")
		} else {
			parts = append(parts, k+" same template")
		}
	}
	return strings.Join(parts, ", ")
}
