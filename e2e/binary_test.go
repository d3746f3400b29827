package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// everyKind is a Helm-style stream with one object of every kind digestpin
// knows, plus objects it must leave alone. REG is the registry.
const everyKind = `---
# Source: all/templates/pod.yaml
apiVersion: v1
kind: Pod
metadata:
  name: pod
spec:
  containers:
  - name: a
    image: REG/app:1
  ephemeralContainers:
  - name: debug
    image: REG/tools:1
---
# Source: all/templates/podtemplate.yaml
apiVersion: v1
kind: PodTemplate
metadata:
  name: podtemplate
template:
  spec:
    containers:
    - name: a
      image: REG/app:1
---
# Source: all/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: deployment
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: REG/tools:1
      containers:
      - name: a
        image: REG/app:1
---
# Source: all/templates/replicaset.yaml
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: replicaset
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/db:1
---
# Source: all/templates/statefulset.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: statefulset
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/db:1
---
# Source: all/templates/daemonset.yaml
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: daemonset
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/agent:1
---
# Source: all/templates/rc.yaml
apiVersion: v1
kind: ReplicationController
metadata:
  name: rc
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/agent:1
---
# Source: all/templates/job.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: job
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/tools:1
---
# Source: all/templates/cronjob.yaml
apiVersion: batch/v1
kind: CronJob
metadata:
  name: cronjob
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: a
            image: REG/tools:1
---
# Source: all/templates/rollout.yaml
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: rollout
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/app:1
---
# Source: all/templates/list.yaml
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: in-list
  spec:
    template:
      spec:
        containers:
        - name: a
          image: REG/db:1
---
# Source: all/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: configmap
data:
  image: REG/app:1
---
# Source: all/templates/widget.yaml
apiVersion: example.com/v1
kind: Widget
metadata:
  name: widget
spec:
  template:
    spec:
      containers:
      - name: a
        image: REG/app:1
`

// kindsUsing maps each image to the documents (1-based) whose pod
// templates use it.
var kindsUsing = map[string][]int{
	"app:1":   {1, 2, 3, 10},
	"tools:1": {1, 3, 8, 9},
	"db:1":    {4, 5, 11},
	"agent:1": {6, 7},
}

func TestBinaryStabilityPromises(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	for img := range kindsUsing {
		reg.PushImage(t, img)
	}
	in := []byte(strings.ReplaceAll(everyKind, "REG", reg.Host()))
	dir := t.TempDir()

	first := runCmd(t, dir, in, nil, bin)
	if first.err != nil {
		t.Fatalf("digestpin: %v\n%s", first.err, first.stderr)
	}
	docs := documents(t, first.stdout)
	if len(docs) != 13 {
		t.Fatalf("got %d documents, want 13", len(docs))
	}
	pinned := regexp.MustCompile(`(?m)image: \S+:1@sha256:[0-9a-f]{64}$`)
	for i, d := range docs {
		want := i < 11 // every workload, and nothing after them
		if got := pinned.MatchString(d); got != want {
			t.Errorf("document %d pinned = %v, want %v:\n%s", i+1, got, want, d)
		}
		if got := strings.Contains(d, "checksum/images: '"); got != want {
			t.Errorf("document %d has checksum = %v, want %v", i+1, got, want)
		}
	}
	inDocs := documents(t, string(in))
	for _, i := range []int{11, 12} {
		if docs[i] != inDocs[i] {
			t.Errorf("document %d changed although it has no image to pin:\n%s", i+1, docs[i])
		}
	}

	// Same input and registry: byte-identical. Its own output: unchanged.
	if second := runCmd(t, dir, in, nil, bin); second.stdout != first.stdout {
		t.Errorf("a second run gave different bytes")
	}
	if again := runCmd(t, dir, []byte(first.stdout), nil, bin); again.err != nil || again.stdout != first.stdout {
		t.Errorf("digestpin changed its own output (err %v)", again.err)
	}

	// Moving one tag changes exactly the documents that use it.
	for _, img := range []string{"db:1", "tools:1"} {
		before := runCmd(t, dir, in, nil, bin).stdout
		reg.PushImage(t, img)
		after := runCmd(t, dir, in, nil, bin)
		if after.err != nil {
			t.Fatalf("digestpin: %v\n%s", after.err, after.stderr)
		}
		b, a := documents(t, before), documents(t, after.stdout)
		var changed []int
		for i := range a {
			if a[i] != b[i] {
				changed = append(changed, i+1)
			}
		}
		if want := kindsUsing[img]; !equalInts(changed, want) {
			t.Errorf("after moving %s, documents %v changed, want %v", img, changed, want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBinaryErrors(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	good := strings.ReplaceAll(everyKind, "REG", reg.Host())
	file := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc  string
		in    string
		args  []string
		code  int
		lines []string // each must appear in stderr
	}{
		{desc: "missing images are all listed", in: good, code: 1, lines: []string{"tools:1", "db:1", "agent:1", `Pod/pod container "debug"`}},
		{desc: "malformed YAML", in: "---\n# Source: c/templates/x.yaml\nkind: Pod\nspec:\n  containers:\n  - image: [\n", code: 1, lines: []string{"document 1 (c/templates/x.yaml), line ", "malformed YAML"}},
		{desc: "not a mapping", in: "---\n- image: x\n", code: 1, lines: []string{"document 1, line 2", "want a Kubernetes object"}},
		{desc: "bad flag", in: good, args: []string{"--mode=sideways"}, code: 2, lines: []string{`invalid --mode "sideways": want pin, digest or annotate`}},
		{desc: "-f reads a file", args: []string{"-f", file}, code: 1, lines: []string{"tools:1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res := runCmd(t, t.TempDir(), []byte(tc.in), nil, bin, tc.args...)
			var ee *exec.ExitError
			if !errors.As(res.err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("digestpin = %v, want exit code %d; stderr:\n%s", res.err, tc.code, res.stderr)
			}
			if res.stdout != "" {
				t.Errorf("stdout = %q, want nothing on error", res.stdout)
			}
			for _, l := range tc.lines {
				if !strings.Contains(res.stderr, l) {
					t.Errorf("stderr = %q, want %q", res.stderr, l)
				}
			}
			if strings.Contains(res.stderr, "goroutine ") || strings.Contains(res.stderr, "panic") {
				t.Errorf("stderr has a stack trace:\n%s", res.stderr)
			}
		})
	}
}
