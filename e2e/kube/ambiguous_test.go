//go:build linux

package kube

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// falseRefusals are the ambiguous fixtures that the API server reads
// unambiguously and as a YAML 1.2 reader does: digestpin refuses them for
// the way they are spelt (a key that is an alias, a kind spelt !!binary,
// a merge key that adds a pod spec no explicit key repeats), not for a
// reading the two could disagree on. TestAmbiguousRefusals fails when
// this list is not exactly what it finds, so that a change either way is
// seen.
var falseRefusals = []string{
	"ambiguous-a-merge-key-in-a-mapping-of-pod-specs",
	"ambiguous-image-key-that-is-an-alias",
	"ambiguous-kind-spelt-as-binary",
}

// TestAmbiguousRefusals: every document digestpin refuses as ambiguous
// (renderer/testdata/hostile/ambiguous-*, the renderer's ambiguousKeys) is
// refused by the binary with the line its .error file holds, and is one
// that the API server and a YAML 1.2 reader (go.yaml.in/yaml/v3, the
// reader under kyaml) could disagree on: the API server refuses it, or its
// strict field validation does (a repeated key), or the object it decodes
// (sigs.k8s.io/yaml, as the server does) is not what the YAML 1.2 reader
// reads, or one of the two refuses what the other reads. The API server is
// asked with the document's own bytes (a create with dryRun=All, once with
// fieldValidation=Ignore and once Strict); kinds it does not serve (a
// workload CRD, a List) are read by its decoder alone.
func TestAmbiguousRefusals(t *testing.T) {
	t.Parallel()
	c := controlPlane(t)
	bin := digestpinBin(t)
	dir := filepath.Join(repoRoot(t), "renderer", "testdata", "hostile")
	inputs, _ := filepath.Glob(filepath.Join(dir, "ambiguous-*.input.yaml"))
	if len(inputs) < 20 {
		t.Fatalf("found %d ambiguous fixtures in %s, want the renderer's", len(inputs), dir)
	}
	const ns = "ambiguous"
	c.ensureNamespace(t, ns)
	var found []string
	verdicts := map[string]int{}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			wantErr, err := os.ReadFile(strings.TrimSuffix(in, ".input.yaml") + ".error")
			if err != nil {
				t.Fatal(err)
			}
			// The binary refuses it with that one line (the custom pod
			// spec path is TestAmbiguousKeysRefused's, for its Worker).
			// A lock file holds every reference, so that the binary
			// asks no registry (it resolves before it writes).
			res := run(nil, nil, bin, "-f", in, "--lock", lockFor(t, src), "--frozen",
				"--pod-spec-path", "example.com/Worker=spec.pools.*.template.spec")
			if res.err == nil || res.stdout != "" || res.stderr != "digestpin: error: "+string(wantErr) {
				t.Errorf("digestpin -f %s = %v, stdout %q, stderr %q; want it refused with %q", filepath.Base(in), res.err, res.stdout, res.stderr, wantErr)
			}
			verdict, why := c.readings(t, ns, src)
			t.Logf("%s: %s", verdict, why)
			verdicts[verdict]++
			if verdict == readAlike {
				found = append(found, name)
			}
		})
	}
	if !slices.Equal(found, falseRefusals) {
		t.Errorf("refused fixtures that the API server reads unambiguously and as YAML 1.2 does: %q, want %q", found, falseRefusals)
	}
	keys := make([]string, 0, len(verdicts))
	for k := range verdicts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", verdicts[k], k))
	}
	figure(t, "%d documents digestpin refuses as ambiguous: %s", len(inputs), strings.Join(parts, ", "))
}

// lockFor writes a lock file with a made-up digest for each
// registry.example reference in src and returns its path.
func lockFor(t *testing.T, src []byte) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\nimages:\n")
	seen := map[string]bool{}
	for _, ref := range regexp.MustCompile(`registry\.example/[a-z]+:[0-9]+`).FindAllString(string(src), -1) {
		if !seen[ref] {
			seen[ref] = true
			sum := sha256.Sum256([]byte(ref))
			fmt.Fprintf(&b, "  - reference: %s\n    digest: sha256:%x\n", ref, sum)
		}
	}
	p := filepath.Join(t.TempDir(), "digests.lock")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The verdicts of readings.
const (
	refusedByServer = "refused by the API server"
	refusedStrictly = "refused by the API server's strict field validation"
	readDifferently = "read differently by the API server and YAML 1.2"
	readAlike       = "read alike by the API server and YAML 1.2 (a false refusal)"
)

// readings reads the stream src as the API server does and as a YAML 1.2
// reader does, and says whether and why the two could disagree.
func (c *cluster) readings(t *testing.T, ns string, src []byte) (verdict, why string) {
	t.Helper()
	// The YAML 1.2 reading: every document of the stream.
	var plain []any
	var plainErr error
	dec := yaml3.NewDecoder(strings.NewReader(string(src)))
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			if !errors.Is(err, io.EOF) {
				plainErr = err
			}
			break
		}
		plain = append(plain, v)
	}
	// The API server's decoder: Kubernetes' YAML reader passes it the
	// stream up to the first line that starts with "---" (none of the
	// fixtures has one), and it reads the first YAML document of it.
	var obj map[string]any
	if err := yaml.Unmarshal(src, &obj); err != nil {
		return refusedByServer, "its decoder: " + err.Error()
	}
	// The server's own reading, where it serves the kind: its decoder
	// (fieldValidation=Ignore) may refuse what the local one took, and its
	// strict field validation names a repeated key. A refusal of the
	// decoded object (422: the renderer's Deployments have no selector)
	// says nothing of the reading, which is then the local decoder's, the
	// server's own library.
	if gv, kind := fmt.Sprint(obj["apiVersion"]), fmt.Sprint(obj["kind"]); kind != "List" {
		if res, ok := c.resource(t, gv, kind); ok {
			path := "/apis/" + gv
			if !strings.Contains(gv, "/") {
				path = "/api/" + gv
			}
			if res.namespaced {
				path += "/namespaces/" + ns
			}
			path += "/" + res.name + "?dryRun=All&fieldManager=digestpin-test&fieldValidation="
			for _, validation := range []string{"Ignore", "Strict"} {
				status, b, err := c.request(http.MethodPost, path+validation, "application/yaml", src)
				if err != nil {
					t.Fatalf("dry run of %s: %v", path, err)
				}
				msg := statusMessage(status, b)
				switch {
				case status == http.StatusBadRequest && validation == "Ignore":
					return refusedByServer, msg
				case status == http.StatusBadRequest && repeatedKey(msg):
					return refusedStrictly, msg
				case status != http.StatusCreated && status != http.StatusUnprocessableEntity:
					t.Logf("the dry run with fieldValidation=%s answers %s", validation, msg)
				}
			}
		}
	}
	if _, err := yaml.YAMLToJSONStrict(src); err != nil && repeatedKey(err.Error()) {
		return refusedStrictly, "its strict decoder: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	server, _ := json.Marshal(obj)
	switch {
	case plainErr != nil:
		return readDifferently, fmt.Sprintf("YAML 1.2 refuses it (%v); the API server reads %s", plainErr, server)
	case len(plain) != 1:
		return readDifferently, fmt.Sprintf("YAML 1.2 reads %d documents; the API server reads one: %s", len(plain), server)
	}
	p, err := json.Marshal(plain[0])
	if err != nil {
		return readDifferently, fmt.Sprintf("YAML 1.2 reads what JSON cannot hold (%v); the API server reads %s", err, server)
	}
	var a, b any
	_ = json.Unmarshal(server, &a)
	_ = json.Unmarshal(p, &b)
	if !reflect.DeepEqual(a, b) {
		return readDifferently, fmt.Sprintf("the API server reads %s; YAML 1.2 reads %s", server, p)
	}
	return readAlike, "both read " + string(server)
}

// repeatedKey reports whether a strict decoding error names a repeated
// key (and not, say, an unknown field).
func repeatedKey(msg string) bool {
	return strings.Contains(msg, "already set in map") || strings.Contains(msg, "duplicate field")
}

// statusMessage is the message of an API server's refusal.
func statusMessage(status int, b []byte) string {
	var st struct{ Message string }
	if json.Unmarshal(b, &st) != nil || st.Message == "" {
		st.Message = string(b)
	}
	return fmt.Sprintf("%d: %s", status, strings.ReplaceAll(st.Message, "\n", " "))
}
