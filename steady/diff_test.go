package steady

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/renderer"
)

const deploy = `# Source: app/templates/deploy.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns
spec:
  template:
    metadata:
      annotations:
        checksum/config: %s
    spec:
      containers:
      - name: app
        image: nginx:1.27
        env:
        - name: TOKEN
          value: %s
      - name: sidecar
        image: envoy:1.30
`

// dep is a Deployment with a checksum and a token.
func dep(sum, token string) string {
	return strings.NewReplacer("%s", sum).Replace(strings.Replace(deploy, "value: %s", "value: "+token, 1))
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		input, second string
		want          []string // warnings
	}{
		{
			desc:  "same",
			input: dep("a", "x"), second: dep("a", "x"),
		},
		{
			desc:   "formatting, comments, key order and quoting do not matter",
			input:  "# Source: c/t.yaml\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  a: \"1\"\n  b: two # note\n",
			second: "---\n# Source: c/t.yaml\ndata:\n  b: 'two'\n  a: '1'\nmetadata:\n    name: cm\nkind: ConfigMap\n",
		},
		{
			desc:  "pod template annotation and env of a named container",
			input: dep("a", "x"), second: dep("b", "y"),
			want: []string{`Deployment/ns/web (app/templates/deploy.yaml): pod template annotation checksum/config, pod template field spec.containers[name=app].env[name=TOKEN].value differ between two renders of the same input: this workload restarts on every render`},
		},
		{
			desc:   "a field outside the pod template does not restart",
			input:  "kind: Deployment\nmetadata:\n  name: web\n  labels: {at: \"1\"}\nspec: {}\n",
			second: "kind: Deployment\nmetadata:\n  name: web\n  labels: {at: \"2\"}\nspec: {}\n",
			want:   []string{"Deployment/web: metadata.labels.at differs between two renders of the same input"},
		},
		{
			desc:   "CronJob job template",
			input:  "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        metadata: {labels: {at: \"1\"}}\n",
			second: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        metadata: {labels: {at: \"2\"}}\n",
			want:   []string{"CronJob/c: pod template label at differs between two renders of the same input: this workload restarts on every render"},
		},
		{
			desc:   "Argo Rollout",
			input:  "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  template:\n    spec: {containers: [{name: a, image: x, args: [\"--seed=1\"]}]}\n",
			second: "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  template:\n    spec: {containers: [{name: a, image: x, args: [\"--seed=2\"]}]}\n",
			want:   []string{"Rollout/r: pod template field spec.containers[name=a].args[0] differs between two renders of the same input: this workload restarts on every render"},
		},
		{
			// A SidecarSet's containers go into other pods; it has no
			// pod template of its own to restart.
			desc:   "an OpenKruise SidecarSet is no workload",
			input:  "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: s, labels: {at: \"1\"}}\nspec: {containers: [{name: a, image: x, args: [\"--seed=1\"]}]}\n",
			second: "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: s, labels: {at: \"2\"}}\nspec: {containers: [{name: a, image: x, args: [\"--seed=2\"]}]}\n",
			want:   []string{"SidecarSet/s: metadata.labels.at, spec.containers[name=a].args[0] differ between two renders of the same input"},
		},
		{
			desc:   "a Deployment of another API group has no pod template",
			input:  "apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {metadata: {labels: {at: \"1\"}}}}\n",
			second: "apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {metadata: {labels: {at: \"2\"}}}}\n",
			want:   []string{"Deployment/d: spec.template.metadata.labels.at differs between two renders of the same input"},
		},
		{
			desc:   "a test hook Pod with a random name, matched by source and position",
			input:  "# Source: c/templates/tests/t.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: c-test-abcde\n  annotations: {helm.sh/hook: test}\nspec: {containers: [{name: t, image: busybox}]}\n",
			second: "# Source: c/templates/tests/t.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: c-test-vwxyz\n  annotations: {helm.sh/hook: test}\nspec: {containers: [{name: t, image: busybox}]}\n",
			want:   []string{"Pod/c-test-abcde (c/templates/tests/t.yaml): pod field metadata.name differs between two renders of the same input: this workload restarts on every render"},
		},
		{
			desc:   "a document in one render only",
			input:  "# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a}\n---\n# Source: c/job.yaml\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j-123}\n",
			second: "# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a}\n---\n# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\n",
			want: []string{
				"Job/j-123 (c/job.yaml): in the input, but not in a second render of the same input: this workload restarts on every render",
				"ConfigMap/b (c/b.yaml): in a second render of the same input, but not in the input",
			},
		},
		{
			desc:   "documents are matched by source and position, whatever the order of sources",
			input:  "# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a1}\ndata: {v: \"1\"}\n---\n# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\n---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a2}\n",
			second: "# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\n---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a1}\ndata: {v: \"2\"}\n---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: a2}\n",
			want:   []string{"ConfigMap/a1 (c/a.yaml): data.v differs between two renders of the same input"},
		},
		{
			desc:   "documents without a source are matched by position",
			input:  "kind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: x}\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: y}\n",
			want:   []string{"ConfigMap/b: data.v differs between two renders of the same input"},
		},
		{
			desc:   "empty documents and comment-only documents are no objects",
			input:  "---\n---\n# Source: c/empty.yaml\n---\nkind: ConfigMap\nmetadata: {name: a}\n...\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\n---\n\n",
		},
		{
			desc:   "CRLF line ends",
			input:  "---\r\n# Source: c/a.yaml\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\ndata:\r\n  v: x\r\n",
			second: "---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: y\n",
			want:   []string{"ConfigMap/a (c/a.yaml): data.v differs between two renders of the same input"},
		},
		{
			desc:   "a repeated key means its last value, as the API server's decoder reads it",
			input:  "kind: ConfigMap\nmetadata: {name: a}\ndata:\n  v: random1\n  v: fixed\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\ndata:\n  v: random2\n  v: fixed\n",
		},
		{
			desc:   "merge keys and anchors are followed",
			input:  "kind: ConfigMap\nmetadata: {name: a}\nx: &base {p: 1, q: 2}\ndata:\n  <<: *base\n  q: 3\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\nx: {p: 1, q: 2}\ndata: {p: 1, q: 3}\n",
		},
		{
			desc:   "a merged value that differs",
			input:  "kind: ConfigMap\nmetadata: {name: a}\nx: &base {p: r1}\ndata:\n  <<: *base\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\nx: &base {p: r2}\ndata:\n  <<: *base\n",
			want:   []string{"ConfigMap/a: data.p, x.p differ between two renders of the same input"},
		},
		{
			desc:   "items of a List are objects of their own",
			input:  "apiVersion: v1\nkind: List\nitems:\n- kind: Secret\n  metadata: {name: s, namespace: prod}\n  data: {k: r1}\n- kind: ConfigMap\n  metadata: {name: c}\n",
			second: "apiVersion: v1\nkind: List\nitems:\n- kind: Secret\n  metadata: {name: s, namespace: prod}\n  data: {k: r2}\n- kind: ConfigMap\n  metadata: {name: c}\n- kind: ConfigMap\n  metadata: {name: extra}\n",
			want: []string{
				"Secret/prod/s: data.k differs between two renders of the same input",
				"ConfigMap/extra: in a second render of the same input, but not in the input",
			},
		},
		{
			desc:   "a document that is not a mapping",
			input:  "# Source: c/odd.yaml\n- a\n- b\n",
			second: "# Source: c/odd.yaml\n- a\n- c\n",
			want:   []string{"document 1 (c/odd.yaml): [1] differs between two renders of the same input"},
		},
		{
			desc:   "a mapping that became a scalar",
			input:  "kind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\ndata: none\n",
			want:   []string{"ConfigMap/a: data differs between two renders of the same input"},
		},
		{
			desc:   "a document that changed from a mapping to a list",
			input:  "# Source: c/odd.yaml\na: 1\n",
			second: "# Source: c/odd.yaml\n- a\n",
			want:   []string{"document 1 (c/odd.yaml): . differs between two renders of the same input"},
		},
		{
			desc:   "yes is a boolean, as the API server's decoder reads YAML 1.1",
			input:  "kind: ConfigMap\nmetadata: {name: a}\nx: yes\ny: true\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\nx: \"yes\"\ny: yes\n",
			want:   []string{"ConfigMap/a: x differs between two renders of the same input"},
		},
		{
			desc:   "a number and its string differ",
			input:  "kind: ConfigMap\nmetadata: {name: a}\nx: 1\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\nx: \"1\"\n",
			want:   []string{"ConfigMap/a: x differs between two renders of the same input"},
		},
		{
			desc:   "named items in another order, added and removed",
			input:  "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec:\n  volumes: [{name: a}, {name: b}, {name: gone}]\n",
			second: "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec:\n  volumes: [{name: b}, {name: a}, {name: new-1}]\n",
			want:   []string{`Pod/p: pod field spec.volumes[name=gone], pod field spec.volumes[name=new-1], pod field spec.volumes differ between two renders of the same input: this workload restarts on every render`},
		},
		{
			desc:   "items without distinct names go by index",
			input:  "kind: ConfigMap\nmetadata: {name: a}\nl: [{name: x, v: 1}, {name: x, v: 2}]\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\nl: [{name: x, v: 1}, {name: x, v: 3}, {name: y}]\n",
			want:   []string{"ConfigMap/a: l[1].v, l[2] differ between two renders of the same input"},
		},
		{
			desc:   "keys that need quotes",
			input:  "kind: ConfigMap\nmetadata: {name: a}\ndata: {\"a b\": 1, \"q\\\"\": 1, \"\": 1, \"x]\": [{name: \"n m\"}]}\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\ndata: {\"a b\": 2, \"q\\\"\": 2, \"\": 2, \"x]\": [{name: \"n m\", v: 1}]}\n",
			want:   []string{`ConfigMap/a: data[""], data["a b"], data["q\""], data["x]"][name="n m"].v differ between two renders of the same input`},
		},
		{
			desc:   "a long list of fields is cut in the warning",
			input:  "kind: ConfigMap\nmetadata: {name: a}\ndata: {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, j: 1}\n",
			second: "kind: ConfigMap\nmetadata: {name: a}\ndata: {a: 2, b: 2, c: 2, d: 2, e: 2, f: 2, g: 2, h: 2, i: 2, j: 2}\n",
			want:   []string{"ConfigMap/a: data.a, data.b, data.c, data.d, data.e, data.f, data.g, data.h and 2 more differ between two renders of the same input"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v, err := Diff([]byte(tc.input), []byte(tc.second), Options{})
			if err != nil {
				t.Fatalf("Diff() = %v", err)
			}
			if diff := cmp.Diff(tc.want, v.Warnings()); diff != "" {
				t.Errorf("Diff().Warnings() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDiffSameBytes: a document that both renders hold, byte for byte,
// means the same whatever it is, and is not decoded.
func TestDiffSameBytes(t *testing.T) {
	bad := "kind: ConfigMap\nmetadata: {name: a}\n---\nx: [\n"
	v, err := Diff([]byte(bad), []byte(bad), Options{})
	if err != nil || len(v.Volatile) != 0 {
		t.Errorf("Diff(same bytes) = %v, %v; want nothing volatile", v.Volatile, err)
	}
}

// TestDiffPodSpecPaths: the pod spec paths of the options decide which
// fields restart a workload, "*" steps into any item, and a path without
// fields is ignored.
func TestDiffPodSpecPaths(t *testing.T) {
	custom, err := renderer.ParsePodSpecPath("example.com/Worker=spec.pools.*.template.spec")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{PodSpecPaths: []renderer.PodSpecPath{{Kind: "Worker", Group: "*"}, custom}}
	in := "apiVersion: example.com/v1\nkind: Worker\nmetadata: {name: w}\nspec:\n  pools:\n  - name: a\n    template: {metadata: {annotations: {at: \"1\"}}}\n"
	second := strings.Replace(in, `at: "1"`, `at: "2"`, 1)
	v, err := Diff([]byte(in), []byte(second), o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Worker/w: pod template annotation at differs between two renders of the same input: this workload restarts on every render"}
	if diff := cmp.Diff(want, v.Warnings()); diff != "" {
		t.Errorf("Diff().Warnings() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"spec.pools[name=a].template.metadata.annotations.at"}, v.Volatile[0].Fields); diff != "" {
		t.Errorf("Diff().Volatile[0].Fields (-want +got):\n%s", diff)
	}
}

// laughs is a document whose aliases expand to a billion strings.
func laughs() string {
	var b strings.Builder
	b.WriteString(`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	return b.String()
}

func TestDiffErrors(t *testing.T) {
	ok := "kind: ConfigMap\nmetadata: {name: a}\n"
	for _, tc := range []struct {
		desc          string
		input, second string
		want          string
	}{
		{desc: "bad input", input: "# Source: c/a.yaml\na: [1,\n", second: ok, want: "reading the input: document 1 (c/a.yaml): "},
		{desc: "bad second render", input: ok, second: ok + "---\nb: {\n", want: "reading the second render: document 2: "},
		{desc: "a cyclic alias", input: ok, second: "a: &x [*x]\n", want: "reading the second render: document 1: "},
		{desc: "a document in one render only", input: ok + "---\nx: [\n", second: ok, want: "reading the input: document 2: "},
		{desc: "a billion laughs", input: ok, second: laughs(), want: "reading the second render: document 1: yaml: document contains excessive aliasing"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Diff([]byte(tc.input), []byte(tc.second), Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Diff() = %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

// TestDiffRefusesAnotherInput checks that a second render whose documents
// are other kinds of objects is refused: paired with the wrong documents,
// every field would count as volatile and hide a real change.
func TestDiffRefusesAnotherInput(t *testing.T) {
	cm := "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"
	dep := "---\n# Source: c/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  replicas: 1\n"
	list := func(items ...string) string {
		return "---\napiVersion: v1\nkind: List\nitems:\n" + strings.Join(items, "")
	}
	for _, tc := range []struct {
		desc, input, second, want string
	}{
		{desc: "another kind", input: cm, second: dep, want: "document 1 (c/templates/a.yaml): v1 ConfigMap in the input, apps/v1 Deployment in the second render"},
		{desc: "another apiVersion", input: dep, second: strings.Replace(dep, "apps/v1", "apps/v1beta2", 1), want: "apps/v1 Deployment in the input, apps/v1beta2 Deployment in the second render"},
		{desc: "another kind in a List", input: list("- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"), second: list("- {apiVersion: v1, kind: Secret, metadata: {name: a}}\n"), want: "v1 ConfigMap in the input, v1 Secret in the second render"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Diff([]byte(tc.input), []byte(tc.second), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Diff() = %v, want an error with %q", err, tc.want)
			}
		})
	}
	// A generated name is what steady renders are for: not refused.
	if _, err := Diff([]byte(cm), []byte(strings.Replace(cm, "name: a", "name: a-x7k2p", 1)), Options{}); err != nil {
		t.Errorf("Diff(generated name) = %v, want no error", err)
	}
}
