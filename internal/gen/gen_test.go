package gen

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
)

var update = flag.Bool("update", false, "render the charts again into testdata/charts.yaml")

// TestShapes checks every shape's stream: YAML that yaml.v3 reads, with
// the Deployments asked for (at least, for the charts), every image
// pinned when asked, and the syntax that names the shape.
func TestShapes(t *testing.T) {
	t.Parallel()
	marks := map[Shape]string{
		Block:        "\n          image: ",
		FlowMapping:  "limits: {cpu: 500m, memory: 256Mi}",
		FlowSequence: "tolerations: []",
		Args:         "- --zap-log-level=info",
		Env:          "valueFrom:",
		ConfigMaps:   "dashboard.json: |-",
		Comments:     "replicas: 2 # see values.yaml",
		CRLF:         "kind: Deployment\r\n",
		Charts:       "# Source: ",
	}
	for _, sh := range Shapes() {
		t.Run(string(sh), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := Stream(&buf, Options{Deployments: 30, Pinned: true, Shape: sh}); err != nil {
				t.Fatal(err)
			}
			in := buf.String()
			if !strings.Contains(in, marks[sh]) {
				t.Errorf("Stream(%s) holds no %q", sh, marks[sh])
			}
			dec := yaml.NewDecoder(strings.NewReader(in))
			deployments, images := 0, 0
			for {
				var doc map[string]any
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Stream(%s): %v", sh, err)
				}
				if doc["kind"] == "Deployment" {
					deployments++
				}
			}
			for _, m := range regexp.MustCompile(`image: "?([^"\s]+)`).FindAllStringSubmatch(in, -1) {
				images++
				if !strings.Contains(m[1], "@sha256:") {
					t.Errorf("Stream(%s, Pinned) has an image without a digest: %s", sh, m[1])
				}
			}
			if sh != Charts && (deployments != 30 || images != 60) {
				t.Errorf("Stream(%s) = %d Deployments, %d images, want 30 and 60", sh, deployments, images)
			}
			if sh == Charts && images < 30 {
				t.Errorf("Stream(%s) = %d images, want at least 30", sh, images)
			}
		})
	}
	if err := Stream(io.Discard, Options{Deployments: 1, Shape: "nope"}); err == nil {
		t.Error("Stream(nope) = nil, want an error for an unknown shape")
	}
}

// chartFolders are the charts the end-to-end tests render, from the
// module's root; web depends on common through file://../common.
var chartFolders = []string{
	"testdata/chart", "testdata/generated", "testdata/argocd/helm", "testdata/argocd-install/chart",
	"testdata/argocd-app/web",
	"e2e/argocd/testdata/single", "e2e/argocd/testdata/shop", "e2e/argocd/testdata/certs",
	"e2e/kube/testdata/jobs", "e2e/kube/testdata/rollout", "e2e/kube/testdata/secret",
}

// privateKey finds the value of a Secret's private key ("tls.key: …").
var privateKey = regexp.MustCompile(`(?m)^(\s+[\w.-]*\.key: )([A-Za-z0-9+/=]+)$`)

// TestCharts checks the charts' corpus, and with -update renders it
// again with Helm 4 (DIGESTPIN_TEST_HELM4): every chart of chartFolders,
// concatenated, each image moved to registry.example.
func TestCharts(t *testing.T) {
	if *update {
		helm := testfiles.Tool(t, "DIGESTPIN_TEST_HELM4", "no Helm 4 CLI: make helm")
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for _, c := range chartFolders {
			// A copy of the chart's parent, where helm dependency build
			// may write charts/.
			dir := filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(c)))
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, filepath.Dir(c)))); err != nil {
				t.Fatal(err)
			}
			chart := filepath.Join(dir, filepath.Base(c))
			if b, err := exec.Command(helm, "dependency", "build", chart).CombinedOutput(); err != nil {
				t.Fatalf("helm dependency build %s: %v: %s", c, err, b)
			}
			args := []string{"template", "rel", chart}
			if c == "testdata/argocd-app/web" {
				// The registry is the test's: values-e2e.yaml.
				args = append(args, "--include-crds", "--set", "global.registry=registry.example")
			}
			b, err := exec.Command(helm, args...).Output()
			if err != nil {
				t.Fatalf("helm template %s: %v", c, err)
			}
			out.Write(b)
		}
		corpus := imageLine.ReplaceAllFunc(out.Bytes(), func(m []byte) []byte {
			sub := imageLine.FindSubmatch(m)
			ref := string(sub[2])
			if i := strings.IndexByte(ref, '/'); i >= 0 && strings.ContainsAny(ref[:i], ".:") || strings.HasPrefix(ref, "REGISTRY/") {
				ref = ref[i+1:]
			}
			return []byte(string(sub[1]) + "registry.example/" + ref)
		})
		// The private keys the charts generate are throwaway, but a
		// key in a commit is one too many: the same length of "A"s.
		corpus = privateKey.ReplaceAllFunc(corpus, func(m []byte) []byte {
			sub := privateKey.FindSubmatch(m)
			return append(sub[1], bytes.Repeat([]byte("A"), len(sub[2]))...)
		})
		if err := os.WriteFile("testdata/charts.yaml", corpus, 0o644); err != nil {
			t.Fatal(err)
		}
		chartsCorpus = corpus
	}
	for _, m := range privateKey.FindAllSubmatch(chartsCorpus, -1) {
		if len(bytes.Trim(m[2], "A")) > 0 {
			t.Errorf("the charts' corpus holds a private key: %.40s…", m[0])
		}
	}
	images := imageLine.FindAllSubmatch(chartsCorpus, -1)
	if len(images) < 20 {
		t.Fatalf("the charts' corpus holds %d images, want the charts' (go test ./internal/gen -run TestCharts -update)", len(images))
	}
	for _, m := range images {
		if !bytes.HasPrefix(m[2], []byte("registry.example/")) {
			t.Errorf("the charts' corpus has an image elsewhere than registry.example: %s", m[2])
		}
	}
}
