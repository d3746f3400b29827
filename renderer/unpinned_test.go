package renderer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/kindpath"
)

// TestUnpinned lists what looks like an image left as a tag, and nothing
// else: values of args, command and env of containers whose name says
// image or that name their registry, and image-named fields of custom
// resources.
func TestUnpinned(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: registry.example/c:1\n"
	c := func(field string) Workload {
		return Workload{Kind: "Deployment", Namespace: "ns", Name: "d", Container: "c", Field: field}
	}
	for _, tc := range []struct {
		desc string
		in   string
		want []Unpinned
	}{
		{
			desc: "images in args and env",
			in: head + "        args:\n        - --sidecar-image=registry.example/side:1\n        - --sidecar-image\n        - registry.example/side:2\n        - quay.io/tools/helper:3\n        - bitnami/redis:7\n" +
				"        command: [run, --init-image, 'registry.example/init:1']\n        env:\n        - name: SIDECAR_IMAGE\n          value: registry.example/side:4\n        - name: HELPER\n          value: ghcr.io/org/helper:5\n",
			want: []Unpinned{
				{Reference: "registry.example/side:1", Workload: c("args[flag=--sidecar-image]")},
				{Reference: "registry.example/side:2", Workload: c("args[flag=--sidecar-image]")},
				{Reference: "quay.io/tools/helper:3", Workload: c("args[3]")},
				{Reference: "registry.example/init:1", Workload: c("command[flag=--init-image]")},
				{Reference: "registry.example/side:4", Workload: c("env[name=SIDECAR_IMAGE].value")},
				{Reference: "ghcr.io/org/helper:5", Workload: c("env[name=HELPER].value")},
			},
		},
		{
			desc: "what is no image: host and port, URLs, paths, policies, untagged or pinned names, placeholders, no repository path",
			in: head + "        args: [--endpoint=otel.monitoring.svc:4317, --url=http://registry.example/x:1, --config=/etc/app/x:1, --image-pull-policy=IfNotPresent, " +
				"--image=registry.example/app, --image=registry.example/app:1@sha256:0000000000000000000000000000000000000000000000000000000000000000, --image=$(IMAGE), --image=nginx:1.27, --image, --verbose]\n" +
				"        env:\n        - {name: REDIS_ADDR, value: 'redis:6379'}\n        - {name: IMAGE_URL, value: 'https://images.example/app:1'}\n        - {name: IMAGE_DIR, value: /var/lib/images:ro}\n" +
				"        - {name: IMAGE_TAG, value: '1.4'}\n        - {name: IMAGE, value: '{{ .Values.image }}'}\n        - {name: IMAGE, value: 'a b/c:1'}\n        - {name: IMAGE, valueFrom: {configMapKeyRef: {name: x, key: y}}}\n        - {name: IMAGE, value: 7}\n",
		},
		{
			desc: "the defaults' fields are pinned, not listed",
			in:   head + "        args: [--collector-image=registry.example/col:1]\n        env:\n        - {name: AGENT_IMAGE, value: registry.example/agent:1}\n",
		},
		{
			desc: "a custom resource's image fields, outside metadata, status, labels and annotations",
			in: "apiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\n  annotations:\n    image: registry.example/a:1\nspec:\n  runnerImage: registry.example/r:1\n  images: [registry.example/i:1, registry.example/j]\n" +
				"  version: registry.example/v:1\n  template:\n    metadata:\n      labels: {image: registry.example/l:1}\n    containers:\n    - name: m\n      image: registry.example/m:1\nstatus:\n  image: registry.example/s:1\n",
			want: []Unpinned{
				{Reference: "registry.example/r:1", Workload: Workload{Kind: "Runner", Name: "r", Container: "field/spec.runnerImage"}},
				{Reference: "registry.example/i:1", Workload: Workload{Kind: "Runner", Name: "r", Container: "field/spec.images[0]"}},
				{Reference: "registry.example/m:1", Workload: Workload{Kind: "Runner", Name: "r", Container: "field/spec.template.containers[0].image"}},
			},
		},
		{
			desc: "built-in kinds' data: a ConfigMap, a CRD's schema default",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  image: registry.example/a:1\n---\n" +
				"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: runners.example.com\nspec:\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        properties:\n          image: {type: string, default: registry.example/a:1}\n",
		},
		{
			desc: "a KafkaConnect's build output, where Strimzi pushes",
			in:   "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnect\nmetadata:\n  name: c\nspec:\n  build:\n    output: {type: docker, image: registry.example/connect:1}\n",
		},
		{
			desc: "a shared container, listed once",
			in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a}\n  spec:\n    template:\n      spec:\n        containers:\n        - &c {name: c, image: registry.example/c:1, env: [{name: X_IMAGE, value: registry.example/x:1}]}\n" +
				"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: b}\n  spec:\n    template:\n      spec:\n        containers: [*c]\n",
			want: []Unpinned{{Reference: "registry.example/x:1", Workload: Workload{Kind: "Deployment", Name: "a", Container: "c", Field: "env[name=X_IMAGE].value"}}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var mu sync.Mutex
			var warnings []string
			r := &Renderer{Resolver: newFixed(), Warnf: func(f string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				warnings = append(warnings, f)
			}}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.want, res.Unpinned, cmpIgnoreWhere); diff != "" {
				t.Errorf("Render() unpinned (-want +got):\n%s", diff)
			}
			if want := min(len(tc.want), 1); len(warnings) != want {
				t.Errorf("Render() warned %d times (%q), want %d", len(warnings), warnings, want)
			}
			// Strict fails on the same stream, naming each reference.
			r.Strict = true
			res, err = r.Render(context.Background(), []byte(tc.in))
			switch {
			case len(tc.want) == 0 && err != nil:
				t.Errorf("Render() with Strict = %v", err)
			case len(tc.want) > 0 && err == nil:
				t.Errorf("Render() with Strict = nil error, want one")
			case len(tc.want) > 0:
				if res.Bytes() != nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.want[0].Reference) || !strings.HasPrefix(err.Error(), "document ") {
					t.Errorf("Render() with Strict = %q, want one line from the document naming %s", err, tc.want[0].Reference)
				}
			}
		})
	}
}

var cmpIgnoreWhere = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Where" }, cmp.Ignore())

// goldenUnpinned is how many values the inputs of testdata leave as
// tags (TestGoldenUnpinned): every one a real image reference, none a
// false positive. A change of it is a new false positive, a miss, or a
// field to pin.
const goldenUnpinned = 8

// TestGoldenUnpinned lists what each input of testdata (the golden
// inputs, oddinput, and the hostile documents that render) leaves as a
// tag: image references in fields that no image path names, each a real
// image reference; a new entry here is a new false positive or a field to
// pin. testdata/unpinned.golden holds the count and each input's warning
// line (go test -update rewrites it); each output, rendered again, leaves
// the same values as tags.
func TestGoldenUnpinned(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		// Argo creates the resource template's manifest as written.
		"argo-workflows": {`WorkflowTemplate/ci/ci-build field spec.templates[5].resource.manifest embedded spec.containers[0].image "registry.example/ci/curl:8.10"`},
		// The controller creates the PolicyServer, which runs the image.
		"embedded-manifests": {
			`ConfigMap/kubewarden/kubewarden-controller-default-policyserver field data["policy-server.yaml"] embedded spec.image "ghcr.io/kubewarden/policy-server:v1.20.0"`,
			`Deployment/kubewarden/kubewarden-controller field metadata.annotations["kubewarden.io/default-policy-server"] embedded spec.image "ghcr.io/kubewarden/policy-server:v1.20.0"`,
		},
		// The sidecar's image, which no image path names.
		"embedded-pinned": {`ConfigMap/policies/policy-server-default field data["policy-server.yaml"] embedded spec.sidecar.image "registry.example/policies/verifier:v1.0.0"`},
		// A custom resource digestpin knows no pod spec of: whatever
		// its controller runs.
		"helm-all-kinds": {`Widget/not-a-workload field spec.template.spec.containers[0].image "registry.example/shop/web:1.4"`},
		// Pulled onto the nodes ahead of a rollout.
		"openkruise": {`ImagePullJob/shop/shop-prepull field spec.image "registry.example/shop/web:2.0"`},
		// The custom deployer's image, and a lookalike's container.
		"openshift-deploymentconfig": {`DeploymentConfig/finance/ledger field spec.strategy.customParams.image "registry.example/finance/deployer:1.0"`, `DeploymentConfig/ledger-lookalike field spec.template.spec.containers[0].image "registry.example/finance/ledger:5.2"`},
	}
	var inputs []string
	for _, g := range []string{"testdata/*.input.yaml", "testdata/oddinput/*.input.yaml", "testdata/hostile/handled-*.input.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, m...)
	}
	// Each input's warning line, in the order of inputs, for the golden
	// file; each subtest writes its own.
	lines := make([]string, len(inputs))
	counts := make([]int, len(inputs))
	t.Run("inputs", func(t *testing.T) {
		for i, in := range inputs {
			name := strings.TrimSuffix(strings.TrimPrefix(in, "testdata/"), ".input.yaml")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				var warnings []string
				r := &Renderer{Resolver: newFixed(), Warnf: func(f string, args ...any) {
					mu.Lock()
					defer mu.Unlock()
					if msg := fmt.Sprintf(f, args...); strings.Contains(msg, "where digestpin knows no image field") {
						warnings = append(warnings, msg)
					}
				}}
				switch name {
				case "custom-path":
					custom, _ := kindpath.ParsePodSpec("example.com/Worker=spec.pools.*.template.spec")
					r.PodSpecPaths = append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], custom)
				case "embedded-pinned":
					r.ImagePaths = embeddedPaths(t)
				}
				res, err := r.Render(context.Background(), testfiles.Read(t, in))
				if err != nil {
					t.Fatalf("Render(%s) = %v", in, err)
				}
				var got []string
				for _, u := range res.Unpinned {
					got = append(got, u.String())
				}
				if diff := cmp.Diff(want[name], got); diff != "" {
					t.Errorf("Render(%s) unpinned (-want +got):\n%s", in, diff)
				}
				counts[i] = len(got)
				if len(warnings) > 0 {
					lines[i] = name + ": " + strings.Join(warnings, "\n")
				}
				// Digestpin's own output leaves the same values as tags.
				golden := strings.TrimSuffix(in, ".input.yaml") + ".golden.yaml"
				again, err := r.Render(context.Background(), testfiles.Read(t, golden))
				if err != nil {
					t.Fatalf("Render(%s) = %v", golden, err)
				}
				if diff := cmp.Diff(res.Unpinned, again.Unpinned, cmpIgnoreWhere); diff != "" {
					t.Errorf("Render(%s) unpinned other than its input (-input +output):\n%s", golden, diff)
				}
			})
		}
	})
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != goldenUnpinned {
		t.Errorf("the %d inputs of testdata leave %d values as tags, want goldenUnpinned = %d", len(inputs), total, goldenUnpinned)
	}
	text := fmt.Sprintf("# The values that the %d inputs of testdata (*.input.yaml, oddinput/, hostile/handled-*)\n# leave as tags where digestpin knows no image field, and the warning of each input that\n# has any: go test ./renderer -run TestGoldenUnpinned -update rewrites this file.\n%d values\n", len(inputs), total)
	for _, l := range lines {
		if l != "" {
			text += l + "\n"
		}
	}
	checkFixture(t, filepath.Join("testdata", "unpinned.golden"), []byte(text))
}

// TestUnpinnedList names each distinct value in each field once: alone
// as Unpinned.String does, or in several places with their count and
// the first few objects, each object once.
func TestUnpinnedList(t *testing.T) {
	t.Parallel()
	env := func(ns, name, ref string) Unpinned {
		return Unpinned{Reference: ref, Workload: Workload{Kind: "Deployment", Namespace: ns, Name: name, Container: "manager", Field: "env[name=SIDECAR_IMAGE].value"}}
	}
	embedded := func(ns string) Unpinned {
		return Unpinned{Reference: "registry.example/policy-server:1", Workload: Workload{Kind: "ConfigMap", Namespace: ns, Name: "policies", Container: FieldPrefix + `data["policy.yaml"]`, Field: EmbeddedPrefix + "spec.image"}}
	}
	crd := func(name string) Unpinned {
		return Unpinned{Reference: "registry.example/runner:1", Workload: Workload{Kind: "Runner", Name: name, Container: FieldPrefix + "spec.runnerImage"}}
	}
	for _, tc := range []struct {
		desc string
		in   []Unpinned
		want string
	}{
		{
			desc: "one place, as String formats it",
			in:   []Unpinned{env("a", "op", "registry.example/side:1")},
			want: `Deployment/a/op container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1"`,
		},
		{
			desc: "distinct values, each alone, in stream order",
			in:   []Unpinned{env("a", "op", "registry.example/side:2"), env("a", "op", "registry.example/side:1"), crd("r")},
			want: `Deployment/a/op container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:2", Deployment/a/op container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1", Runner/r field spec.runnerImage "registry.example/runner:1"`,
		},
		{
			desc: "the same value in the same field of three objects, all named",
			in:   []Unpinned{env("a", "op", "registry.example/side:1"), env("b", "op", "registry.example/side:1"), env("c", "op", "registry.example/side:1")},
			want: `Deployment container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1" in 3 places (Deployment/a/op, Deployment/b/op, Deployment/c/op)`,
		},
		{
			desc: "a hundred places of an embedded image, cluster-scoped objects, and a value alone between them",
			in: func() []Unpinned {
				var us []Unpinned
				for i := range 100 {
					us = append(us, embedded(fmt.Sprintf("ns%d", i)))
					if i == 50 {
						us = append(us, env("x", "op", "registry.example/side:1"))
					}
					if i < 5 {
						us = append(us, crd(fmt.Sprintf("r%d", i)))
					}
				}
				return us
			}(),
			want: `ConfigMap field data["policy.yaml"] embedded spec.image "registry.example/policy-server:1" in 100 places (ConfigMap/ns0/policies, ConfigMap/ns1/policies, ConfigMap/ns2/policies and 97 more), ` +
				`Runner field spec.runnerImage "registry.example/runner:1" in 5 places (Runner/r0, Runner/r1, Runner/r2 and 2 more), ` +
				`Deployment/x/op container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1"`,
		},
		{
			desc: "one object that holds the value twice in the field, named once; another kind or field is another value",
			in: []Unpinned{
				env("a", "op", "registry.example/side:1"), env("a", "op", "registry.example/side:1"),
				{Reference: "registry.example/side:1", Workload: Workload{Kind: "StatefulSet", Namespace: "a", Name: "op", Container: "manager", Field: "env[name=SIDECAR_IMAGE].value"}},
				{Reference: "registry.example/side:1", Workload: Workload{Kind: "Deployment", Namespace: "a", Name: "op", Container: "manager", Field: "args[flag=--sidecar-image]"}},
			},
			want: `Deployment container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1" in 2 places (Deployment/a/op), ` +
				`StatefulSet/a/op container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1", ` +
				`Deployment/a/op container "manager" field args[flag=--sidecar-image] "registry.example/side:1"`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := unpinnedList(tc.in); got != tc.want {
				t.Errorf("unpinnedList() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestUnpinnedRepeated renders a chart repeated a hundred times: the
// warning and the error of Strict name each value once, in a line that
// does not grow with the repeats, while Result.Unpinned keeps every
// place.
func TestUnpinnedRepeated(t *testing.T) {
	t.Parallel()
	const chart = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: NS\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: registry.example/op:1\n        env:\n        - name: SIDECAR_IMAGE\n          value: registry.example/side:1\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: policies\n  namespace: NS\ndata:\n  policy.yaml: |\n    apiVersion: policies.kubewarden.io/v1\n    kind: PolicyServer\n    spec:\n      image: registry.example/policy-server:1\n"
	var in strings.Builder
	for i := range 100 {
		in.WriteString(strings.ReplaceAll(chart, "NS", fmt.Sprintf("team-%02d", i)))
	}
	var mu sync.Mutex
	var warnings []string
	r := &Renderer{Resolver: newFixed(), Warnf: func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, fmt.Sprintf(f, args...))
	}}
	res, err := r.Render(context.Background(), []byte(in.String()))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if len(res.Unpinned) != 200 {
		t.Errorf("Render() unpinned %d values, want 200 (each place)", len(res.Unpinned))
	}
	const list = `Deployment container "manager" field env[name=SIDECAR_IMAGE].value "registry.example/side:1" in 100 places (Deployment/team-00/op, Deployment/team-01/op, Deployment/team-02/op and 97 more), ` +
		`ConfigMap field data["policy.yaml"] embedded spec.image "registry.example/policy-server:1" in 100 places (ConfigMap/team-00/policies, ConfigMap/team-01/policies, ConfigMap/team-02/policies and 97 more); `
	if len(warnings) != 1 || !strings.Contains(warnings[0], "200 image references are left as tags where digestpin knows no image field, and no lock file or report covers them: "+list) ||
		strings.Contains(warnings[0], "\n") || len(warnings[0]) > 1000 {
		t.Errorf("Render() warned %q, want one line of the two values, each once", warnings)
	}
	r.Strict = true
	if _, err := r.Render(context.Background(), []byte(in.String())); err == nil || !strings.HasPrefix(err.Error(), "document 1, line 15: 200 image references are left as tags where digestpin knows no image field (Strict): "+list) ||
		strings.Contains(err.Error(), "\n") || len(err.Error()) > 1000 {
		t.Errorf("Render() with Strict = %v, want one line of the two values, each once", err)
	}
}
