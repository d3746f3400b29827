package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/renderer"
)

// documents splits a manifest stream with digestpin's one splitter,
// renderer.Split: each document with its separator line.
func documents(t *testing.T, stream string) []string {
	t.Helper()
	docs, err := renderer.Split([]byte(stream))
	if err != nil {
		t.Fatalf("splitting the stream: %v\n%s", err, stream)
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

// runIn runs the command with args on stdin and returns stdout, stderr and
// the error.
func runIn(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

// workloads is a stream with 12 containers over 4 distinct tags, one of
// them a multi-platform index and one written in two spellings.
const workloads = `---
# Source: shop/templates/web.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
      - name: migrate
        image: REG/shop/migrate:1.4
      containers:
      - name: web
        image: REG/shop/web:1.4
      - name: proxy
        image: REG/shop/proxy:2
---
# Source: shop/templates/worker.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: worker
spec:
  template:
    spec:
      containers:
      - name: worker
        image: REG/shop/web:1.4
      - name: proxy
        image: REG/shop/proxy:2
      - name: tool
        image: REG/shop/multi:1
---
# Source: shop/templates/cron.yaml
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: report
            image: REG/shop/web:1.4
          - name: proxy
            image: "REG/shop/proxy:2"
---
# Source: shop/templates/pod.yaml
apiVersion: v1
kind: Pod
metadata:
  name: debug
spec:
  containers:
  - name: a
    image: REG/shop/multi:1
  - name: b
    image: REG/shop/migrate:1.4
  - name: c
    image: REG/shop/web:1.4
  - name: d
    image: REG/shop/proxy:2
---
# Source: shop/templates/svc.yaml
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
`

// shop starts a registry with the images of workloads and returns it with
// the stream pointing at it.
func shop(t *testing.T) (*testregistry.Registry, string) {
	t.Helper()
	reg := testregistry.New(t)
	for _, img := range []string{"shop/migrate:1.4", "shop/web:1.4", "shop/proxy:2"} {
		reg.PushImage(t, img)
	}
	reg.PushIndex(t, "shop/multi:1", "linux/amd64", "linux/arm64/v8")
	reg.ResetCounts()
	return reg, strings.ReplaceAll(workloads, "REG", reg.Host())
}

func TestRunPinsEveryWorkload(t *testing.T) {
	t.Parallel()
	reg, in := shop(t)
	out, stderr, err := runIn(t, in)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if n := strings.Count(out, "@sha256:"); n != 12 {
		t.Errorf("output has %d pinned images, want 12:\n%s", n, out)
	}
	if n := strings.Count(out, "checksum/images: '"); n != 4 {
		t.Errorf("output has %d checksum annotations, want 4", n)
	}
	// One manifest request per distinct reference, and one ping for the
	// registry: nothing per image or per repository.
	if got := reg.Count("HEAD manifests"); got != 4 {
		t.Errorf("HEAD manifest requests = %d, want 4", got)
	}
	if got := reg.Count("GET manifests"); got != 0 {
		t.Errorf("GET manifest requests = %d, want 0", got)
	}
	if got := reg.Total(); got > 5 {
		t.Errorf("requests in all = %d, want at most 5 (4 HEADs, 1 ping)", got)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing without -v", stderr)
	}

	// Stability: the same input and registry give the same bytes, and the
	// output is a fixed point that costs no request.
	again, _, err := runIn(t, in)
	if err != nil || again != out {
		t.Errorf("second run differs (err %v)", err)
	}
	reg.ResetCounts()
	fixed, _, err := runIn(t, out)
	if err != nil || fixed != out {
		t.Errorf("run on its own output changed it (err %v)", err)
	}
	if got := reg.Total(); got != 0 {
		t.Errorf("run on pinned output made %d requests, want 0", got)
	}
}

func TestRunPlatform(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	index, children := reg.PushIndex(t, "multi:1", "linux/amd64", "linux/arm64/v8")
	single := reg.PushImage(t, "single:1")
	pod := func(img string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: %s\n", reg.Ref(img))
	}
	for _, tc := range []struct {
		desc, image string
		args        []string
		want        string // digest in the output, or error substring
		wantErr     bool
	}{
		{desc: "index digest by default", image: "multi:1", want: index.String()},
		{desc: "one platform", image: "multi:1", args: []string{"--platform", "linux/arm64/v8"}, want: children["linux/arm64/v8"].String()},
		{desc: "missing platform names the available ones", image: "multi:1", args: []string{"--platform", "linux/s390x"}, wantErr: true, want: "linux/amd64, linux/arm64/v8"},
		{desc: "single-platform image without a platform", image: "single:1", want: single.String()},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			out, stderr, err := runIn(t, pod(tc.image), tc.args...)
			if tc.wantErr {
				if err == nil || !strings.Contains(stderr, tc.want) || out != "" {
					t.Errorf("run() = %v, stdout %q, stderr %q; want an error naming %q and no output", err, out, stderr, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks digest %s:\n%s", tc.want, out)
			}
		})
	}
}

func TestRunMovedTag(t *testing.T) {
	t.Parallel()
	reg, in := shop(t)
	before, _, err := runIn(t, in)
	if err != nil {
		t.Fatal(err)
	}
	reg.PushImage(t, "shop/proxy:2")
	after, _, err := runIn(t, in)
	if err != nil {
		t.Fatal(err)
	}
	b, a := documents(t, before), documents(t, after)
	if len(a) != len(b) {
		t.Fatalf("document count changed: %d → %d", len(b), len(a))
	}
	// proxy:2 is used by web, worker, nightly and debug; the Service does
	// not change.
	for i, changed := range []bool{true, true, true, true, false} {
		if got := a[i] != b[i]; got != changed {
			t.Errorf("document %d changed = %v, want %v", i+1, got, changed)
		}
	}
}

func TestRunErrors(t *testing.T) {
	reg, in := shop(t)
	missing := strings.Replace(strings.Replace(in, "shop/proxy:2", "shop/gone:1", 1), "shop/multi:1", "shop/absent:3", 1)
	for _, tc := range []struct {
		desc, in string
		args     []string
		env      map[string]string
		want     []string
		usage    bool
	}{
		{desc: "every missing image is named with its workload",
			in: missing, want: []string{"shop/gone:1", `Deployment/web container "proxy"`, "shop/absent:3", `StatefulSet/worker container "tool"`, "404"}},
		{desc: "malformed YAML names document, source and line",
			in:   "---\n# Source: shop/templates/bad.yaml\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n  bad: [\n",
			want: []string{"document 1 (shop/templates/bad.yaml)", "line ", "malformed YAML"}},
		{desc: "unknown flag", args: []string{"--no-such-flag"}, want: []string{"unknown flag"}, usage: true},
		{desc: "bad mode", args: []string{"--mode", "sideways"}, want: []string{`invalid --mode "sideways": want pin, digest or annotate`}, usage: true},
		{desc: "bad mode from the environment", env: map[string]string{"DIGESTPIN_MODE": "sideways"}, want: []string{`invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`}, usage: true},
		{desc: "bad concurrency", args: []string{"--concurrency", "0"}, want: []string{`invalid --concurrency "0": want at least 1`}, usage: true},
		{desc: "bad request timeout", args: []string{"--request-timeout", "0s"}, want: []string{`invalid --request-timeout "0s"`}, usage: true},
		{desc: "platform without an architecture", args: []string{"--platform", "linux"}, want: []string{`invalid --platform "linux": want os/arch`}, usage: true},
		{desc: "platform without an OS", args: []string{"--platform", "/amd64"}, want: []string{`invalid --platform "/amd64"`}, usage: true},
		{desc: "platform of slashes", env: map[string]string{"DIGESTPIN_PLATFORM": "/"}, want: []string{`invalid DIGESTPIN_PLATFORM "/"`}, usage: true},
		{desc: "bad mirror", args: []string{"--registry-mirror", "docker.io"}, want: []string{`invalid --registry-mirror "docker.io": want FROM=TO`}, usage: true},
		{desc: "empty mirror", env: map[string]string{"DIGESTPIN_REGISTRY_MIRROR": "docker.io="}, want: []string{`DIGESTPIN_REGISTRY_MIRROR: mirror "docker.io"="": want FROM=TO, both non-empty`}, usage: true},
		{desc: "bad mirror lag", args: []string{"--mirror-lag", "Warn"}, want: []string{`invalid --mirror-lag "Warn": want error, warn or off`}, usage: true},
		{desc: "mirror-only alone", args: []string{"--mirror-only"}, want: []string{"--mirror-only: needs a --registry-mirror"}, usage: true},
		{desc: "insecure registry as a URL", args: []string{"--insecure-registry", "http://localhost:5000"}, want: []string{`--insecure-registry: "http://localhost:5000": give the host only, without a scheme: localhost:5000`}, usage: true},
		{desc: "insecure registry with a path", env: map[string]string{"DIGESTPIN_INSECURE_REGISTRY": "localhost:5000/team"}, want: []string{`DIGESTPIN_INSECURE_REGISTRY: "localhost:5000/team": give the host only, without a path: localhost:5000`}, usage: true},
		{desc: "checksum annotation with a blank", args: []string{"--checksum-annotation", "bad name"}, want: []string{`invalid --checksum-annotation: annotation name "bad name": the name may hold letters`}, usage: true},
		{desc: "checksum annotation with two slashes", args: []string{"--checksum-annotation", "a/b/c"}, want: []string{`invalid --checksum-annotation: annotation name "a/b/c": at most one '/'`}, usage: true},
		{desc: "checksum annotation too long", env: map[string]string{"DIGESTPIN_CHECKSUM_ANNOTATION": "example.com/" + strings.Repeat("n", 64)}, want: []string{"invalid DIGESTPIN_CHECKSUM_ANNOTATION: annotation name", "64 characters, more than 63"}, usage: true},
		{desc: "checksum annotation prefix not a DNS name", args: []string{"--checksum-annotation", "my_team.example/images"}, want: []string{`the prefix "my_team.example" is not a DNS subdomain`}, usage: true},
		{desc: "CA file that is no file", args: []string{"--ca-file", "/dev/null"}, want: []string{"--ca-file: reading /dev/null: not a regular file"}, usage: true},
		{desc: "an argument", args: []string{"chart/"}, want: []string{`unexpected argument "chart/"`}, usage: true},
		{desc: "missing file", args: []string{"-f", "/nonexistent.yaml"}, want: []string{"reading manifests", "/nonexistent.yaml"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			stdin := tc.in
			if stdin == "" {
				stdin = in
			}
			out, stderr, err := runIn(t, stdin, tc.args...)
			if err == nil {
				t.Fatalf("run() = nil, want an error")
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing on error", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, w)
				}
			}
			var ue *UsageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("run() = %v, usage error %v, want %v", err, !tc.usage, tc.usage)
			}
			for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
				if !strings.HasPrefix(l, "digestpin: ") {
					t.Errorf("stderr line %q does not start with digestpin:", l)
				}
			}
		})
	}
	_ = reg
}

// TestRunUnreadableDocument: a document that Kubernetes could not read
// fails the run though it holds no image, with one line naming it, its
// template and the line, and nothing on stdout.
func TestRunUnreadableDocument(t *testing.T) {
	t.Parallel()
	_, in := shop(t)
	bad := in + "---\n# Source: shop/templates/settings.yaml\napiVersion: v1\nkind: ConfigMap\ndata:\n  a: [\n"
	out, stderr, err := runIn(t, bad)
	if err == nil {
		t.Fatalf("run() = nil, want an error")
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing on error", out)
	}
	want := fmt.Sprintf("digestpin: error: document 6 (shop/templates/settings.yaml), line %d (rendered line 4 of the template): malformed YAML: did not find expected node content\n", strings.Count(in, "\n")+6)
	if stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

// TestRunEmptyInput: empty input is an empty release, written as it came
// (nothing), which -v says.
func TestRunEmptyInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "\n \n"} {
		out, stderr, err := runIn(t, in, "-v")
		if err != nil || out != in {
			t.Errorf("run(%q) = %v, stdout %q; want no error, the input", in, err, out)
		}
		if want := "digestpin: the input is empty: an empty release, nothing to pin\n"; stderr != want {
			t.Errorf("run(%q) stderr = %q, want %q", in, stderr, want)
		}
		if _, stderr, _ := runIn(t, in); stderr != "" {
			t.Errorf("run(%q) without -v: stderr = %q, want nothing", in, stderr)
		}
	}
}

func TestRunFlagsAndEnvironment(t *testing.T) {
	_, in := shop(t)
	t.Setenv("DIGESTPIN_MODE", "digest")
	out, _, err := runIn(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, ":1.4@sha256:") || !strings.Contains(out, "/shop/web@sha256:") {
		t.Errorf("DIGESTPIN_MODE=digest was not applied:\n%s", out)
	}
	// A flag wins over the environment.
	out, _, err = runIn(t, in, "--mode", "pin")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "/shop/web:1.4@sha256:") {
		t.Errorf("--mode pin did not win over DIGESTPIN_MODE:\n%s", out)
	}
}

func TestRunKeepsUnresolved(t *testing.T) {
	t.Parallel()
	_, in := shop(t)
	in = strings.ReplaceAll(in, "shop/proxy:2", "shop/gone:1")
	out, stderr, err := runIn(t, in, "--on-error", "keep")
	if err != nil {
		t.Fatalf("run() = %v", err)
	}
	if !strings.Contains(out, "/shop/gone:1\n") || !strings.Contains(out, "/shop/web:1.4@sha256:") {
		t.Errorf("want gone:1 kept and the rest pinned:\n%s", out)
	}
	if !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "shop/gone:1") {
		t.Errorf("stderr = %q, want a warning naming shop/gone:1", stderr)
	}
}

func TestRunVersion(t *testing.T) {
	t.Parallel()
	out, _, err := runIn(t, "", "--version")
	if err != nil || out != "digestpin "+versionString()+"\n" {
		t.Errorf("--version = %q, %v", out, err)
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	out, stderr, err := runIn(t, "", "--help")
	if ExitCode(err) != 0 || out != "" {
		t.Errorf("--help: exit %d, stdout %q; want 0 and nothing on stdout", ExitCode(err), out)
	}
	for _, w := range []string{"--mode", "--post-renderer digestpin", "DIGESTPIN_"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("help lacks %q", w)
		}
	}
}

// TestDocsErrorSample checks that the sample error of docs/pinning.md is
// what digestpin really prints for that case, word for word.
func TestDocsErrorSample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "pinning.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sample string
	for l := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(l, "digestpin: error: document ") {
			sample = l
			break
		}
	}
	if sample == "" {
		t.Fatal("docs/pinning.md has no sample error line")
	}
	reg := testregistry.New(t)
	in := "---\n# Source: shop/templates/service.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: shop-web\n---\n" +
		"# Source: shop/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: shop-web\n  namespace: shop\n" +
		"spec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: REG/shop/web:dev\n"
	_, stderr, _ := runIn(t, strings.ReplaceAll(in, "REG", reg.Host()))
	got := strings.ReplaceAll(strings.TrimSuffix(stderr, "\n"), reg.Host(), "registry.example")
	if got != sample {
		t.Errorf("digestpin prints\n%s\ndocs/pinning.md shows\n%s", got, sample)
	}
}

// repoRoot is the module's root folder, where the docs and scripts the
// tests read are, from this package's folder.
const repoRoot = "../.."
