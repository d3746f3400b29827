//go:build linux

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/renderer"
)

// report is the part of digestpin's --report file the test reads.
type report struct {
	Images []struct {
		Reference string `json:"reference"`
		Name      string `json:"name"`
		Digest    string `json:"digest"`
		Workloads []struct {
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Container string `json:"container"`
			// Field is an image field inside the container (args, env);
			// "" for the container's image, which is what the API
			// server's pod spec shows here.
			Field string `json:"field"`
		} `json:"workloads"`
	} `json:"images"`
}

// splitDocs cuts a stream where Kubernetes' YAML reader does
// (renderer.Split), each document without its separator line, as that
// reader passes it on.
func splitDocs(t *testing.T, stream []byte) []string {
	t.Helper()
	raw, err := renderer.Split(stream)
	if err != nil {
		t.Fatalf("splitting: %v", err)
	}
	docs := make([]string, len(raw))
	for i, d := range raw {
		s := string(d)
		if strings.HasPrefix(s, "---") {
			if nl := strings.IndexByte(s, '\n'); nl >= 0 {
				s = s[nl+1:]
			} else {
				s = ""
			}
		}
		docs[i] = s
	}
	return docs
}

// TestDryRunGoldens: every golden output of the renderer (goldenDirs:
// its goldens, odd input, tag policies and the hostile documents it
// renders), document by document as the API server's decoder reads it,
// goes to a server-side dry run. What the server accepts decodes to
// exactly the images digestpin reports for it: the same repository and
// digest for every container, init container, ephemeral container and
// image volume. What it refuses (many fixtures are not valid objects: a
// Deployment without a selector) it must refuse in the input for the very
// same reasons; what its decoder refuses (an alias bomb), likewise.
// Documents of kinds this API server does not serve (workload CRDs
// without their CRDs) are counted.
func TestDryRunGoldens(t *testing.T) {
	t.Parallel()
	c := controlPlane(t)
	bin := digestpinBin(t)
	root := repoRoot(t)
	var goldens []string
	for _, dir := range goldenDirs {
		g, _ := filepath.Glob(filepath.Join(root, "renderer", "testdata", dir, "*.golden.yaml"))
		if len(g) == 0 {
			t.Fatalf("no golden files in renderer/testdata/%s", dir)
		}
		goldens = append(goldens, g...)
	}
	// The files in parallel, into one tally.
	tally := &dryRunTally{unserved: map[string]bool{}}
	t.Run("goldens", func(t *testing.T) {
		for _, g := range goldens {
			checkGoldenDryRun(t, c, bin, root, g, tally)
		}
	})
	figure(t, "%d golden files, %d documents: %d accepted by the API server's dry run, their %d images as digestpin reports them; %d refused exactly as their inputs are (invalid fixtures); %d refused by its YAML decoder as their inputs are (hostile fixtures); %d of kinds it does not serve",
		len(goldens), tally.total, tally.served, tally.images, tally.invalid, tally.undecodable, tally.total-tally.served-tally.invalid-tally.undecodable)
}

// goldenDirs are the folders of renderer/testdata with golden files: the
// renderer's goldens, odd input, tag policies, and the hostile documents
// that digestpin renders (renderer's TestHostileFixtures).
var goldenDirs = []string{".", "oddinput", "tags", "hostile"}

// inputOf returns the input file of the golden file g: NAME.input.yaml of
// NAME.golden.yaml, or of NAME.MODE.golden.yaml (the tag policies' one
// input for each mode).
func inputOf(g string) string {
	base := strings.TrimSuffix(g, ".golden.yaml")
	if _, err := os.Stat(base + ".input.yaml"); err != nil {
		base = strings.TrimSuffix(base, filepath.Ext(base))
	}
	return base + ".input.yaml"
}

// dryRunTally is TestDryRunGoldens' figures, and the kinds the API server
// does not serve, shared by its parallel subtests.
type dryRunTally struct {
	mu                                          sync.Mutex
	total, served, invalid, undecodable, images int
	unserved                                    map[string]bool // "apiVersion kind"
}

func (d *dryRunTally) add(total, served, invalid, undecodable, images int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total, d.served, d.invalid, d.undecodable, d.images = d.total+total, d.served+served, d.invalid+invalid, d.undecodable+undecodable, d.images+images
}

func (d *dryRunTally) isUnserved(gvk string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unserved[gvk]
}

func (d *dryRunTally) markUnserved(gvk string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unserved[gvk] = true
}

// checkGoldenDryRun checks one golden file g of TestDryRunGoldens in a
// parallel subtest.
func checkGoldenDryRun(t *testing.T, c *cluster, bin, root, g string, tally *dryRunTally) {
	t.Helper()
	rel, _ := filepath.Rel(root, g)
	t.Run(rel, func(t *testing.T) {
		t.Parallel()
		total, served, invalid, undecodable, images := 0, 0, 0, 0, 0
		defer func() { tally.add(total, served, invalid, undecodable, images) }()
		src, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		// What digestpin reads: its report of the golden file, which
		// carries every digest already (a golden file is a fixed point;
		// pinned references cost no request, and the proxy settings
		// keep anything else on loopback). annotate-mode keeps tags,
		// which only a registry could resolve: its images are checked
		// against the file itself.
		want := map[string]string{} // Kind/namespace/name/container → repository@digest
		annotate := strings.Contains(rel, "annotate")
		if !annotate {
			rep := filepath.Join(t.TempDir(), "report.json")
			args := []string{"-f", g, "--report", rep}
			if strings.Contains(rel, "digest-mode") || strings.HasSuffix(rel, ".digest.golden.yaml") {
				args = append(args, "--mode", "digest")
			}
			res := run(nil, []string{"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1", "NO_PROXY="}, bin, args...)
			if res.err != nil {
				t.Fatalf("digestpin -f %s: %v\n%s", rel, res.err, res.stderr)
			}
			if res.stdout != string(src) {
				t.Fatalf("digestpin changed its golden file %s", rel)
			}
			var r report
			b, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("decoding the report: %v", err)
			}
			for _, im := range r.Images {
				for _, w := range im.Workloads {
					if w.Field != "" {
						continue
					}
					want[w.Kind+"/"+w.Namespace+"/"+w.Name+"/"+w.Container] = repoDigest(t, im.Name, im.Digest)
				}
			}
		}

		got := map[string]string{}
		// Each document of the golden file beside its input: the
		// renderer keeps documents in order, one for one.
		in, err := os.ReadFile(inputOf(g))
		if err != nil {
			t.Fatal(err)
		}
		docs, inDocs := splitDocs(t, src), splitDocs(t, in)
		if len(docs) != len(inDocs) {
			t.Fatalf("%d documents in the golden file, %d in its input", len(docs), len(inDocs))
		}
		for i, d := range docs {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(d), &m); err != nil {
				// A hostile document (an alias bomb, bytes that are
				// not UTF-8) that digestpin passed through: the API
				// server's decoder must refuse its input alike.
				var inM map[string]any
				if inErr := yaml.Unmarshal([]byte(inDocs[i]), &inM); inErr == nil || inErr.Error() != err.Error() {
					t.Errorf("document %d: the API server's decoder refuses digestpin's output (%v), and its input %v", i+1, err, orDecoded(inErr))
				}
				t.Logf("document %d: refused by the API server's decoder as its input is: %.200s", i+1, err)
				total++
				undecodable++
				continue
			}
			if m == nil {
				continue // comments only
			}
			total++
			docNS := ""
			if md, ok := m["metadata"].(map[string]any); ok {
				docNS, _ = md["namespace"].(string)
			}
			gvk := fmt.Sprint(m["apiVersion"], " ", m["kind"])
			out, refused := map[string]any(nil), notServedKind
			if !tally.isUnserved(gvk) {
				out, refused = c.dryRun(t, m, docNS)
			}
			if refused == notServedKind {
				tally.markUnserved(gvk)
				for k := range want {
					if strings.HasPrefix(k, fmt.Sprint(m["kind"])+"/") {
						delete(want, k)
					}
				}
				continue
			}
			if refused != "" {
				// Many fixtures are not valid objects (a Deployment
				// without a selector): the API server must refuse the
				// input for the very same reasons, so digestpin made
				// nothing valid invalid.
				var inM map[string]any
				if err := yaml.Unmarshal([]byte(inDocs[i]), &inM); err != nil {
					t.Fatalf("document %d of the input: %v", i+1, err)
				}
				if _, inRefused := c.dryRun(t, inM, docNS); inRefused != refused {
					t.Errorf("document %d (%v %v): the API server refuses digestpin's output:\n%s\nand its input %s", i+1, m["kind"], m["metadata"], refused, orAccepted(inRefused))
				}
				t.Logf("document %d, %v %v: refused as its input is", i+1, m["kind"], objName(m))
				invalid++
				continue
			}
			served++
			t.Logf("document %d, %v %v: accepted", i+1, m["kind"], objName(m))
			items := []any{out}
			if out["kind"] == "List" {
				items, _ = out["items"].([]any)
			}
			for _, it := range items {
				obj, _ := it.(map[string]any)
				// The key uses the document's own namespace, as
				// digestpin reads it, not the one kubectl filled in.
				imagesOf(obj, docNS, got)
			}
		}
		if annotate {
			// Only whether the server read the tags the file spells.
			for k, v := range got {
				want[k] = v
				if strings.Contains(v, "@sha256:") {
					t.Errorf("%s runs %s in annotate mode, want the tag kept", k, v)
				}
			}
		}
		// Every served workload's images are the reported ones.
		for k := range want {
			if _, ok := got[k]; !ok && servedKind(k, got) {
				t.Errorf("digestpin reports %s = %s; the API server has no such container", k, want[k])
			}
		}
		images += len(got)
		for k, v := range got {
			if w, ok := want[k]; !ok {
				t.Errorf("the API server runs %s = %s; digestpin reports no image for it", k, v)
			} else if w != v {
				t.Errorf("%s: the API server runs %s, digestpin reports %s", k, v, w)
			}
		}
	})
}

// objName returns the metadata.name of a decoded object.
func objName(m map[string]any) any {
	md, _ := m["metadata"].(map[string]any)
	return md["name"]
}

// notServedKind is what dryRun returns for a kind the API server does not
// serve.
const notServedKind = "not served"

// dryRun sends the object m, as the API server's decoder read it, to the
// API server as a server-side apply with dryRun=All, in namespace ns (a
// test namespace when ns is empty), made if need be: straight to the API,
// so that no client-side reading or validation stands in between. A List
// is sent item by item. It returns the object the server would store, or
// why the server refused it (notServedKind for a kind it does not serve).
func (c *cluster) dryRun(t *testing.T, m map[string]any, ns string) (map[string]any, string) {
	t.Helper()
	if ns == "" {
		ns = "dryrun"
	}
	c.ensureNamespace(t, ns)
	if m["kind"] == "List" {
		items, _ := m["items"].([]any)
		var out []any
		var refused []string
		for i, it := range items {
			im, _ := it.(map[string]any)
			o, why := c.dryRun(t, im, ns)
			if why != "" {
				refused = append(refused, fmt.Sprintf("item %d: %s", i, why))
			}
			out = append(out, o)
		}
		if len(refused) > 0 {
			return nil, strings.Join(refused, "; ")
		}
		return map[string]any{"kind": "List", "items": out}, ""
	}
	res, ok := c.resource(t, fmt.Sprint(m["apiVersion"]), fmt.Sprint(m["kind"]))
	if !ok {
		return nil, notServedKind
	}
	path := "/apis/" + fmt.Sprint(m["apiVersion"])
	if !strings.Contains(fmt.Sprint(m["apiVersion"]), "/") {
		path = "/api/" + fmt.Sprint(m["apiVersion"])
	}
	if res.namespaced {
		path += "/namespaces/" + ns
	}
	path += "/" + res.name + "/" + url.PathEscape(fmt.Sprint(objName(m))) + "?dryRun=All&fieldManager=digestpin-test"
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	status, b, err := c.Request(http.MethodPatch, path, "application/apply-patch+yaml", body)
	if err != nil {
		t.Fatalf("dry run of %s: %v", path, err)
	}
	if status != http.StatusOK && status != http.StatusCreated {
		var st struct{ Message string }
		if json.Unmarshal(b, &st) != nil || st.Message == "" {
			st.Message = string(b)
		}
		return nil, fmt.Sprintf("%d: %s", status, st.Message)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding the dry run: %v", err)
	}
	return out, ""
}

// ensureNamespace makes the namespace ns of dry runs, once.
func (c *cluster) ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.namespaces == nil {
		c.namespaces = map[string]bool{}
	}
	if !c.namespaces[ns] {
		// Applied, so that two tests may ask for one namespace.
		c.kubectlT(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), "apply", "--server-side", "--field-manager=digestpin-test", "-f", "-")
		c.namespaces[ns] = true
	}
}

// apiResource is a kind's resource, from discovery.
type apiResource struct {
	name       string
	namespaced bool
}

// resource returns the resource that serves apiVersion and kind.
func (c *cluster) resource(t *testing.T, apiVersion, kind string) (apiResource, bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resources == nil {
		c.resources = map[string]apiResource{}
		type list struct {
			GroupVersion string
			Resources    []struct {
				Name, Kind string
				Namespaced bool
			}
		}
		var groups struct {
			Groups []struct {
				Versions []struct{ GroupVersion string }
			}
		}
		if err := c.GetJSON(context.Background(), "/apis", &groups); err != nil {
			t.Fatalf("discovery: %v", err)
		}
		paths := []string{"/api/v1"}
		for _, g := range groups.Groups {
			for _, v := range g.Versions {
				paths = append(paths, "/apis/"+v.GroupVersion)
			}
		}
		for _, p := range paths {
			var l list
			if err := c.GetJSON(context.Background(), p, &l); err != nil {
				t.Fatalf("discovery of %s: %v", p, err)
			}
			for _, r := range l.Resources {
				if !strings.Contains(r.Name, "/") { // not a subresource
					c.resources[l.GroupVersion+" "+r.Kind] = apiResource{r.Name, r.Namespaced}
				}
			}
		}
	}
	r, ok := c.resources[apiVersion+" "+kind]
	return r, ok
}

func orDecoded(err error) string {
	if err == nil {
		return "is decoded"
	}
	return "is refused for: " + err.Error()
}

func orAccepted(refused string) string {
	if refused == "" {
		return "is accepted"
	}
	return "is refused for:\n" + refused
}

// servedKind reports whether got has any workload of k's kind and name.
func servedKind(k string, got map[string]string) bool {
	parts := strings.SplitN(k, "/", 4)
	prefix := strings.Join(parts[:3], "/") + "/"
	for g := range got {
		if strings.HasPrefix(g, prefix) {
			return true
		}
	}
	return false
}

// repoDigest returns the repository of ref and digest, as
// "repository@sha256:…", or ref's own when digest is empty.
func repoDigest(t *testing.T, ref, digest string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatalf("parsing %q: %v", ref, err)
	}
	if digest == "" {
		if d, ok := r.(name.Digest); ok {
			digest = d.DigestStr()
		} else {
			return r.Context().Name() + ":" + r.Identifier()
		}
	}
	return r.Context().Name() + "@" + digest
}

// podSpecPaths are where the built-in kinds keep their pod spec.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"PodTemplate":           {"template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

// imagesOf adds the images of obj's pod spec to got, keyed as digestpin's
// report keys its workloads, as repository@digest (repository:tag when not
// pinned).
func imagesOf(obj map[string]any, ns string, got map[string]string) {
	kind, _ := obj["kind"].(string)
	path, ok := podSpecPaths[kind]
	if !ok {
		return
	}
	md, _ := obj["metadata"].(map[string]any)
	objName, _ := md["name"].(string)
	var spec any = obj
	for _, p := range path {
		m, _ := spec.(map[string]any)
		spec = m[p]
	}
	s, _ := spec.(map[string]any)
	key := kind + "/" + ns + "/" + objName + "/"
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		cs, _ := s[list].([]any)
		for _, ci := range cs {
			cm, _ := ci.(map[string]any)
			img, _ := cm["image"].(string)
			got[key+fmt.Sprint(cm["name"])] = normalize(img)
		}
	}
	vs, _ := s["volumes"].([]any)
	for _, vi := range vs {
		vm, _ := vi.(map[string]any)
		if iv, ok := vm["image"].(map[string]any); ok {
			ref, _ := iv["reference"].(string)
			got[key+"volume/"+fmt.Sprint(vm["name"])] = normalize(ref)
		}
	}
}

// normalize spells an image as repoDigest does.
func normalize(img string) string {
	r, err := name.ParseReference(img)
	if err != nil {
		return "unparsable " + img
	}
	if d, ok := r.(name.Digest); ok {
		return r.Context().Name() + "@" + d.DigestStr()
	}
	return r.Context().Name() + ":" + r.Identifier()
}
