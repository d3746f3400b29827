package renderer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// snapWeb is a Deployment as digestpin writes it: a pinned image, the
// checksum annotation, a checksum/config annotation, an env value.
const snapWeb = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
spec:
  replicas: 2
  template:
    metadata:
      annotations:
        checksum/config: aaaa
        checksum/images: '1111'
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: registry.example/shop/web:1.4@sha256:0000000000000000000000000000000000000000000000000000000000000000
        env:
        - name: MODE
          value: "blue"
        args: ["--sidecar=registry.example/shop/side:1@sha256:0000000000000000000000000000000000000000000000000000000000000000"]
      volumes:
      - name: data
        emptyDir: {}
`

// snapSecret is a Secret with a password that must never show.
const snapSecret = `apiVersion: v1
kind: Secret
metadata:
  name: web-tls
  namespace: prod
data:
  tls.crt: Y2VydC1vbmU=
  tls.key: a2V5LW9uZQ==
stringData:
  password: hunter2-one
`

// TestCompare checks the pod templates and Secrets that Compare names
// between two streams: what digestpin writes (digests, the checksum
// annotation) and how YAML spells a value (key order, quoting) never
// count; a changed annotation, env value, new container or volume, a
// Secret's changed, added and removed keys do, by name only.
func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		before, now   string
		wantTemplates []TemplateChange
		wantSecrets   []SecretChange
	}{
		{
			desc:   "only digests and the checksum moved",
			before: snapWeb + "---\n" + snapSecret,
			now: strings.NewReplacer("sha256:0000", "sha256:9999", "'1111'", "'2222'").Replace(snapWeb) +
				"---\n" + snapSecret,
		},
		{
			desc:   "key order and quoting",
			before: snapWeb,
			now: strings.NewReplacer(`value: "blue"`, `value: blue`, "        checksum/config: aaaa\n        checksum/images: '1111'\n",
				"        \"checksum/images\": '1111'\n        checksum/config: 'aaaa'\n").Replace(snapWeb),
		},
		{
			desc:   "a config checksum and an env value",
			before: snapWeb,
			now:    strings.NewReplacer("checksum/config: aaaa", "checksum/config: bbbb", `value: "blue"`, `value: "green"`).Replace(snapWeb),
			wantTemplates: []TemplateChange{{Kind: "Deployment", Namespace: "prod", Name: "web", Template: "spec.template", Change: ChangeChanged,
				Fields: []string{"metadata.annotations.checksum/config", "spec.containers[web].env"}}},
		},
		{
			desc:   "a container and a volume added, replicas aside",
			before: snapWeb,
			now: strings.NewReplacer("replicas: 2", "replicas: 3",
				"      volumes:\n", "      - name: side\n        image: registry.example/shop/side:1\n        args: [a]\n      volumes:\n      - name: cache\n        emptyDir: {}\n").Replace(snapWeb),
			wantTemplates: []TemplateChange{{Kind: "Deployment", Namespace: "prod", Name: "web", Template: "spec.template", Change: ChangeChanged,
				Fields: []string{"spec.containers[side]", "spec.volumes[cache]"}}},
		},
		{
			desc:   "a workload and a Secret added, another removed",
			before: strings.ReplaceAll(snapWeb, "name: web\n  namespace", "name: old\n  namespace"),
			now:    snapWeb + "---\n" + snapSecret,
			wantTemplates: []TemplateChange{
				{Kind: "Deployment", Namespace: "prod", Name: "web", Template: "spec.template", Change: ChangeAdded},
				{Kind: "Deployment", Namespace: "prod", Name: "old", Template: "spec.template", Change: ChangeRemoved},
			},
			wantSecrets: []SecretChange{{Namespace: "prod", Name: "web-tls", Change: ChangeAdded, Added: []string{"tls.crt", "tls.key", "password"}}},
		},
		{
			desc:   "a key re-issued, one added, one removed, one moved to stringData",
			before: snapSecret,
			now: `apiVersion: v1
kind: Secret
metadata: {namespace: prod, name: web-tls}
data:
  tls.key: a2V5LXR3bw==
  ca.crt: Y2E=
stringData:
  tls.crt: cert-one
`,
			wantSecrets: []SecretChange{{Namespace: "prod", Name: "web-tls", Change: ChangeChanged,
				Changed: []string{"tls.key"}, Added: []string{"ca.crt"}, Removed: []string{"password"}}},
		},
		{
			desc:   "data and stringData of the same bytes, line breaks in base64",
			before: snapSecret,
			now:    strings.NewReplacer("tls.crt: Y2VydC1vbmU=", "tls.crt: |\n    Y2VydC\n    1vbmU=", "  password: hunter2-one\n", "  tls.key: key-one\n  password: 'hunter2-one'\n").Replace(snapSecret),
		},
		{
			desc:   "a key written twice, a Secret repeated, one without metadata",
			before: snapSecret + "---\n" + snapSecret + "---\napiVersion: v1\nkind: Secret\ndata: {a: YQ==}\n",
			now: snapSecret + "---\n" + strings.Replace(snapSecret, "  password: hunter2-one\n", "  password: hunter2-one\n  password: hunter2-two\n", 1) +
				"---\napiVersion: v1\nkind: Secret\ndata: {a: Yg==}\n",
			wantSecrets: []SecretChange{
				{Namespace: "prod", Name: "web-tls", Change: ChangeChanged, Changed: []string{"password"}},
				{Change: ChangeChanged, Changed: []string{"a"}},
			},
		},
		{
			desc:   "an alias is what it names",
			before: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: x:1\n    env: &env [{name: A, value: '1'}]\n  - name: b\n    image: x:1\n    env: *env\n",
			now:    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: x:1\n    env: [{name: A, value: '1'}]\n  - name: b\n    image: x:1\n    env: [{value: \"1\", name: A}]\n",
		},
		{
			desc:   "a CronJob in a List, an odd key",
			before: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: CronJob\n  metadata: {name: cleanup}\n  spec:\n    jobTemplate:\n      spec:\n        template:\n          metadata:\n            annotations: {\"a b\\n\": x}\n          spec:\n            containers: [{name: c, image: tool:1}]\n",
			now:    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: CronJob\n  metadata: {name: cleanup}\n  spec:\n    jobTemplate:\n      spec:\n        template:\n          metadata:\n            annotations: {\"a b\\n\": y}\n          spec:\n            containers: [{name: c, image: tool:1}]\n",
			wantTemplates: []TemplateChange{{Kind: "CronJob", Name: "cleanup", Template: "spec.jobTemplate.spec.template", Change: ChangeChanged,
				Fields: []string{`metadata.annotations."a b\n"`}}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{}
			before, err := r.Snapshot([]byte(tc.before))
			if err != nil {
				t.Fatalf("Snapshot(before) = %v", err)
			}
			now, err := r.Snapshot([]byte(tc.now))
			if err != nil {
				t.Fatalf("Snapshot(now) = %v", err)
			}
			templates, secrets := Compare(before, now)
			if diff := cmp.Diff(tc.wantTemplates, templates); diff != "" {
				t.Errorf("Compare() templates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSecrets, secrets); diff != "" {
				t.Errorf("Compare() secrets (-want +got):\n%s", diff)
			}
			// Not a value, nor its base64, nor anything of a Snapshot.
			b, err := json.Marshal([]any{templates, secrets, before, now})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"hunter2", "cert-", "key-", "Y2Vyd", "a2V5", "YQ==", "Yg=="} {
				if strings.Contains(string(b), v) {
					t.Errorf("Compare() and the Snapshots show %q: %s", v, b)
				}
			}
		})
	}
}

// TestSnapshotAliasedLists checks that a List of aliases of Lists of
// aliases, which would name a Pod 10^8 times, is read in a moment: each
// object once.
func TestSnapshotAliasedLists(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- &l0 {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: x}]}}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "- &l%d {apiVersion: v1, kind: List, items: [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]}\n", i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	done := make(chan error, 1)
	go func() {
		_, err := (&Renderer{}).Snapshot([]byte(b.String()))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Snapshot() = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Snapshot() of aliased Lists takes longer than 10s")
	}
}

// TestSnapshotSharedPodSpec checks that a pod spec an alias names in
// many objects is read within the bound that Render's finder keeps
// (fanOut: the document's nodes plus 65536 entries): a document that
// would need more is refused, naming the document, its source and the
// object where the bound ran out. The bound holds the time; the test
// asserts none.
func TestSnapshotSharedPodSpec(t *testing.T) {
	_, err := (&Renderer{}).Snapshot([]byte(sharedSpecList(2000, 2000)))
	checkFanOutRefusal(t, err)
}

// TestSnapshotErrors checks that Snapshot refuses what Render refuses on
// the way to a pod template, naming the document.
func TestSnapshotErrors(t *testing.T) {
	_, err := (&Renderer{}).Snapshot([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\nspec:\n  containers: [{name: c, image: x}]\n"))
	if err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("Snapshot(repeated name) = %v, want an error naming document 1", err)
	}
}

// FuzzSnapshot holds Snapshot and Compare to their promises on any
// stream: no panic, the same reading twice, a stream compared with itself
// differs nowhere, and compared with nothing has every object added.
func FuzzSnapshot(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(snapWeb + "---\n" + snapSecret))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- &s {apiVersion: v1, kind: Secret, data: {a: YQ==, a: Yg==}, stringData: {b: c}}\n- *s\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &Renderer{}
		a, err := r.Snapshot(in)
		if err != nil {
			return
		}
		b, err := r.Snapshot(in)
		if err != nil {
			t.Fatalf("Snapshot() = %v the second time only", err)
		}
		if tc, sc := Compare(a, b); len(tc)+len(sc) != 0 {
			t.Fatalf("Compare() of a stream with itself = %+v, %+v", tc, sc)
		}
		if tc, sc := Compare(nil, a); len(tc) != len(a.templates) || len(sc) != len(a.secrets) {
			t.Fatalf("Compare(nil, s) = %d templates and %d Secrets, want %d and %d added", len(tc), len(sc), len(a.templates), len(a.secrets))
		}
	})
}
