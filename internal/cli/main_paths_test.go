package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/renderer"
)

// pathsStream holds a Tekton Task (a default image path), an Argo
// Workflow with a parameterised image, and a CRD of the person's own
// whose image fields only declared paths reach.
const pathsStream = `---
# Source: ci/templates/task.yaml
apiVersion: tekton.dev/v1
kind: Task
metadata:
  name: build
spec:
  steps:
  - name: build
    image: REG/ci/builder:1
  - name: push
    image: $(params.pusher)
---
# Source: ci/templates/runner.yaml
apiVersion: example.com/v1
kind: Runner
metadata:
  name: nightly
spec:
  runnerRef: REG/ci/runner:2
  template:
    metadata:
      labels: {app: nightly}
    tool: REG/ci/builder:1
`

// pathsRegistry starts a registry with the images of pathsStream and
// returns it with the stream pointing at it.
func pathsRegistry(t *testing.T) (*testregistry.Registry, string) {
	t.Helper()
	reg := testregistry.New(t)
	reg.PushImage(t, "ci/builder:1")
	reg.PushImage(t, "ci/runner:2")
	return reg, strings.ReplaceAll(pathsStream, "REG", reg.Host())
}

// TestRunImagePaths pins the fields that --image-path declares, writes
// the checksum where --checksum-path says, and reports each field.
func TestRunImagePaths(t *testing.T) {
	t.Parallel()
	reg, in := pathsRegistry(t)
	report := filepath.Join(t.TempDir(), "report.json")
	out, stderr, err := runIn(t, in,
		"--image-path", "example.com/Runner=spec.runnerRef",
		"--image-path", "Runner=spec.template.tool",
		"--checksum-path", "example.com/Runner=spec.template",
		"--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	builder, runner := reg.Ref("ci/builder:1"), reg.Ref("ci/runner:2")
	for _, want := range []string{
		"    image: " + builder + "@sha256:",
		"    image: $(params.pusher)\n",
		"  runnerRef: " + runner + "@sha256:",
		"    tool: " + builder + "@sha256:",
		"    metadata:\n      labels: {app: nightly}\n      annotations:\n        checksum/images: '",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "checksum/images"); n != 1 {
		t.Errorf("output has %d checksums, want 1 (the Runner's template):\n%s", n, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Images []struct {
			Reference string              `json:"reference"`
			Workloads []renderer.Workload `json:"workloads"`
		} `json:"images"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	var got []string
	for _, img := range rep.Images {
		for _, w := range img.Workloads {
			got = append(got, w.String())
		}
	}
	slices.Sort(got)
	want := []string{"Runner/nightly field spec.runnerRef", "Runner/nightly field spec.template.tool", "Task/build field spec.steps[0].image"}
	if !slices.Equal(got, want) {
		t.Errorf("report workloads = %q, want %q\n%s", got, want, b)
	}
	// Without the declarations the Runner is not touched.
	out, _, err = runIn(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  runnerRef: "+runner+"\n") || !strings.Contains(out, "    tool: "+builder+"\n") {
		t.Errorf("without --image-path the Runner changed:\n%s", out)
	}
}

// TestRunImagePathErrors checks that a bad --image-path or
// --checksum-path (or its variable) is a usage error naming it.
func TestRunImagePathErrors(t *testing.T) {
	_, in := pathsRegistry(t)
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
	}{
		{desc: "image path without a field", args: []string{"--image-path", "Runner"}, want: `--image-path: parsing image path "Runner": want KIND=FIELD.PATH`},
		{desc: "image path ending in a star", args: []string{"--image-path", "Runner=spec.images.*"}, want: `--image-path: parsing image path "Runner=spec.images.*": the last field must name the image field`},
		{desc: "image path from the environment", env: map[string]string{"DIGESTPIN_IMAGE_PATH": "a/b/Runner=spec.image"}, want: `DIGESTPIN_IMAGE_PATH: parsing image path "a/b/Runner=spec.image": bad kind`},
		{desc: "image path with a malformed selector", args: []string{"--image-path", "Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE.value"}, want: `--image-path: parsing image path "Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE.value": malformed selector "env[name=AGENT_IMAGE.value": want FIELD[KEY=VALUE]`},
		{desc: "image path with a flag that matches nothing", args: []string{"--image-path", "Deployment=spec.template.spec.containers.*.args[flag=collector-image]"}, want: `--image-path: parsing image path "Deployment=spec.template.spec.containers.*.args[flag=collector-image]": the flag "collector-image" of args[flag=collector-image] matches no argument: a flag starts with "-"`},
		{desc: "checksum path with an empty field", args: []string{"--checksum-path", "Runner=spec..template"}, want: `--checksum-path: parsing checksum path "Runner=spec..template": empty field`},
		// A checksum path no image path goes through writes no checksum.
		{desc: "checksum path that names the image field", args: []string{"--image-path", "Runner=spec.image", "--checksum-path", "Runner=spec.image"}, want: `checksum path Runner=spec.image covers no image path: no image path of Runner goes through spec.image to a field inside it`},
		{desc: "checksum path of a kind without image paths", args: []string{"--mode", "annotate", "--checksum-path", "example.com/Runner=spec.template"}, want: `checksum path example.com/Runner=spec.template covers no image path: there is no image path for Runner`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, stderr, err := runIn(t, in, tc.args...)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("run() = %v, want a usage error", err)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr = %q, want one line with %q", stderr, tc.want)
			}
		})
	}
}

// TestRunConfig reads the paths from --config (or DIGESTPIN_CONFIG), adds
// the flags' to them, and refuses a bad file as a usage error naming the
// file and line.
func TestRunConfig(t *testing.T) {
	reg, in := pathsRegistry(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("digestpin.yaml", "apiVersion: digestpin.dev/v1alpha1\nkind: Config\nimagePaths:\n- example.com/Runner=spec.runnerRef\nchecksumPaths:\n- example.com/Runner=.\n")
	runner, builder := reg.Ref("ci/runner:2"), reg.Ref("ci/builder:1")
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		tool bool // spec.template.tool is pinned
	}{
		{desc: "the file", args: []string{"--config", cfg}},
		{desc: "the file from the environment", env: map[string]string{"DIGESTPIN_CONFIG": cfg}},
		{desc: "the file and a flag", args: []string{"--config", cfg, "--image-path", "Runner=spec.template.tool"}, tool: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, stderr, err := runIn(t, in, tc.args...)
			if err != nil {
				t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
			}
			if !strings.Contains(out, "  runnerRef: "+runner+"@sha256:") {
				t.Errorf("the file's image path was not applied:\n%s", out)
			}
			if !strings.Contains(out, "  name: nightly\n  annotations:\n    checksum/images: '") {
				t.Errorf("the file's checksum path was not applied:\n%s", out)
			}
			if got := !strings.Contains(out, "    tool: "+builder+"\n"); got != tc.tool {
				t.Errorf("spec.template.tool pinned = %v, want %v:\n%s", got, tc.tool, out)
			}
		})
	}
	for _, tc := range []struct {
		desc, content string
		env           bool
		want          string
	}{
		{desc: "an unknown key", content: "apiVersion: digestpin.dev/v1alpha1\nkind: Config\nimagepaths: []\n", want: `--config: DIR/bad.yaml, line 3: unknown key "imagepaths"`},
		{desc: "a bad path, from the environment", env: true, content: "apiVersion: digestpin.dev/v1alpha1\nkind: Config\nimagePaths:\n- Runner\n", want: `DIGESTPIN_CONFIG: DIR/bad.yaml, line 4: imagePaths: parsing image path "Runner"`},
		{desc: "another version", content: "apiVersion: digestpin.dev/v2\nkind: Config\n", want: `--config: DIR/bad.yaml, line 1: apiVersion is "digestpin.dev/v2", want digestpin.dev/v1alpha1`},
		{desc: "no file", want: `--config: reading DIR/bad.yaml: `},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bad := filepath.Join(dir, "bad.yaml")
			_ = os.Remove(bad)
			if tc.content != "" {
				write("bad.yaml", tc.content)
			}
			args := []string{"--config", bad}
			if tc.env {
				t.Setenv("DIGESTPIN_CONFIG", bad)
				args = nil
			}
			out, stderr, err := runIn(t, in, args...)
			var ue *UsageError
			if !errors.As(err, &ue) || ExitCode(err) != 2 {
				t.Fatalf("run() = %v, want a usage error (exit 2)", err)
			}
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if out != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stdout %q, stderr %q, want nothing and one line with %q", out, stderr, want)
			}
		})
	}
}

// TestRunUnpinned checks what a run says about values that look like
// images left as tags: one warning line, an "unpinned" entry in the
// report with the field's path, and with --strict (or DIGESTPIN_STRICT) a
// failure that writes nothing; an --image-path naming the field pins it.
func TestRunUnpinned(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "op:1")
	reg.PushImage(t, "side:2")
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n  namespace: tools\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: " + reg.Ref("op:1") +
		"\n        env:\n        - name: SIDECAR_IMAGE\n          value: " + reg.Ref("side:2") + "\n"
	report := filepath.Join(t.TempDir(), "report.json")
	out, stderr, err := runIn(t, in, "--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if !strings.Contains(out, "value: "+reg.Ref("side:2")+"\n") {
		t.Errorf("the env var changed:\n%s", out)
	}
	want := `1 image references are left as tags where digestpin knows no image field, and no lock file or report covers them: Deployment/tools/op container "manager" field env[name=SIDECAR_IMAGE].value "` + reg.Ref("side:2") + `"`
	if !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line with %q", stderr, want)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Unpinned []renderer.Unpinned `json:"unpinned"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	wantU := []renderer.Unpinned{{Reference: reg.Ref("side:2"), Workload: renderer.Workload{Kind: "Deployment", Namespace: "tools", Name: "op", Container: "manager", Field: "env[name=SIDECAR_IMAGE].value"}}}
	if diff := cmp.Diff(wantU, rep.Unpinned); diff != "" {
		t.Errorf("report unpinned (-want +got):\n%s\n%s", diff, b)
	}

	// --strict, or its variable: a failure, nothing on stdout.
	for _, strict := range []struct {
		args []string
		env  string
		name string // how the message names it
	}{{args: []string{"--strict"}, name: "--strict"}, {env: "true", name: "DIGESTPIN_STRICT"}} {
		if strict.env != "" {
			t.Setenv("DIGESTPIN_STRICT", strict.env)
		}
		out, stderr, err = runIn(t, in, strict.args...)
		if err == nil || out != "" {
			t.Fatalf("run(%q) = %v with stdout %q, want a failure and nothing", strict.args, err, out)
		}
		if !strings.Contains(stderr, "document 1, line 14: 1 image references are left as tags where digestpin knows no image field ("+strict.name+")") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("stderr = %q, want one line naming the document", stderr)
		}
	}

	// Named, it is pinned, and nothing is left.
	out, stderr, err = runIn(t, in, "--strict", "--image-path", "apps/Deployment=spec.template.spec.containers.*.env[name=SIDECAR_IMAGE].value")
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if !strings.Contains(out, "value: "+reg.Ref("side:2")+"@sha256:") || stderr != "" {
		t.Errorf("with --image-path: stderr %q, output:\n%s", stderr, out)
	}
}

// TestRunUnpinnedEmbedded checks what a run says about an image inside
// a string (a manifest that a ConfigMap holds): one warning line that
// says to pin it where the text is made, an "unpinned" entry in the
// report naming the ConfigMap, its key and the path in the text, the
// text left as written, and with --strict a failure naming them.
func TestRunUnpinnedEmbedded(t *testing.T) {
	reg := testregistry.New(t)
	digest := reg.PushImage(t, "policy-server:1").String()
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: default-policyserver\n  namespace: kubewarden\ndata:\n  policy-server.yaml: |\n    apiVersion: policies.kubewarden.io/v1\n    kind: PolicyServer\n    metadata:\n      name: default\n    spec:\n      image: " + reg.Ref("policy-server:1") + "\n"
	report := filepath.Join(t.TempDir(), "report.json")
	out, stderr, err := runIn(t, in, "--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if out != in {
		t.Errorf("the ConfigMap changed:\n%s", out)
	}
	field := `ConfigMap/kubewarden/default-policyserver field data["policy-server.yaml"] embedded spec.image "` + reg.Ref("policy-server:1") + `"`
	if !strings.Contains(stderr, field) || !strings.Contains(stderr, "is pinned where the string is a literal block scalar (|) by naming it with --image-path KIND=FIELD.PATH|PATH.IN.TEXT") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line with %q", stderr, field)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Unpinned []renderer.Unpinned `json:"unpinned"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	wantU := []renderer.Unpinned{{Reference: reg.Ref("policy-server:1"), Workload: renderer.Workload{Kind: "ConfigMap", Namespace: "kubewarden", Name: "default-policyserver", Container: `field/data["policy-server.yaml"]`, Field: "embedded/spec.image"}}}
	if diff := cmp.Diff(wantU, rep.Unpinned); diff != "" {
		t.Errorf("report unpinned (-want +got):\n%s\n%s", diff, b)
	}

	out, stderr, err = runIn(t, in, "--strict")
	if err == nil || out != "" {
		t.Fatalf("run(--strict) = %v with stdout %q, want a failure and nothing", err, out)
	}
	if !strings.Contains(stderr, "document 1, line 7: 1 image references are left as tags where digestpin knows no image field (--strict): "+field) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line naming the ConfigMap and its key", stderr)
	}

	// Named by an image path into the string, it is pinned in its bytes
	// alone, an image of the report and the lock file like any other,
	// and nothing is left.
	lock := filepath.Join(t.TempDir(), "digests.lock")
	out, stderr, err = runIn(t, in, "--strict", "--report", report, "--write-lock", lock, "--image-path", `ConfigMap=data.policy-server\.yaml|spec.image`)
	if err != nil {
		t.Fatalf("run(--image-path) = %v; stderr:\n%s", err, stderr)
	}
	if want := strings.Replace(in, reg.Ref("policy-server:1"), reg.Ref("policy-server:1")+"@"+digest, 1); out != want || stderr != "" {
		t.Errorf("run(--image-path) = stderr %q, output:\n%s\nwant:\n%s", stderr, out, want)
	}
	if b, err = os.ReadFile(report); err != nil {
		t.Fatal(err)
	}
	var pinned struct {
		Images []struct {
			Reference string              `json:"reference"`
			Workloads []renderer.Workload `json:"workloads"`
		} `json:"images"`
		Unpinned []renderer.Unpinned `json:"unpinned"`
	}
	if err := json.Unmarshal(b, &pinned); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if len(pinned.Images) != 1 || len(pinned.Unpinned) != 0 || !slices.Equal(pinned.Images[0].Workloads, []renderer.Workload{wantU[0].Workload}) {
		t.Errorf("report = %s, want the one image, used by the ConfigMap's string, and nothing unpinned", b)
	}
	if l, err := os.ReadFile(lock); err != nil || !strings.Contains(string(l), digest) {
		t.Errorf("lock file = %q, %v, want the digest %s", l, err, digest)
	}
}

// TestRunUnpinnedRepeated checks what a run says about one value left as
// a tag in a chart rendered a hundred times: one warning line that names
// it once, with the count and the first three objects, and --strict's
// error alike, while the report has an entry for every place.
func TestRunUnpinnedRepeated(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "policy-server:1")
	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: policies\n  namespace: team-%02d\ndata:\n  policy.yaml: |\n    kind: PolicyServer\n    spec:\n      image: %s\n", i, reg.Ref("policy-server:1"))
	}
	report := filepath.Join(t.TempDir(), "report.json")
	out, stderr, err := runIn(t, in.String(), "--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if out != in.String() {
		t.Errorf("the ConfigMaps changed")
	}
	field := `ConfigMap field data["policy.yaml"] embedded spec.image "` + reg.Ref("policy-server:1") + `" in 100 places (ConfigMap/team-00/policies, ConfigMap/team-01/policies, ConfigMap/team-02/policies and 97 more); `
	if !strings.Contains(stderr, "100 image references are left as tags where digestpin knows no image field, and no lock file or report covers them: "+field) || strings.Count(stderr, "\n") != 1 || len(stderr) > 1000 {
		t.Errorf("stderr = %q, want one short line with %q", stderr, field)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Unpinned []renderer.Unpinned `json:"unpinned"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	if len(rep.Unpinned) != 100 || rep.Unpinned[99].Workload.Namespace != "team-99" {
		t.Errorf("report unpinned: %d entries, want one for each of the 100 places", len(rep.Unpinned))
	}

	out, stderr, err = runIn(t, in.String(), "--strict")
	if err == nil || out != "" {
		t.Fatalf("run(--strict) = %v with stdout %q, want a failure and nothing", err, out)
	}
	if !strings.Contains(stderr, "document 1, line 8: 100 image references are left as tags where digestpin knows no image field (--strict): "+field) || strings.Count(stderr, "\n") != 1 || len(stderr) > 1000 {
		t.Errorf("stderr = %q, want one short line naming the value once", stderr)
	}
}
