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
// unambiguously and as the YAML 1.2 reading does (plainValue): digestpin
// refuses them for the way they are written, not for a reading the two
// could disagree on. A merge key that adds a pod spec no explicit key
// repeats adds it for both. (A key that is an alias of the string image
// was one; digestpin reads it as image since this test showed that.)
// TestAmbiguousRefusals fails when this list is not exactly what it
// finds, so that a change either way is seen.
var falseRefusals = []string{
	"ambiguous-a-merge-key-in-a-mapping-of-pod-specs",
}

// TestAmbiguousRefusals: every document digestpin refuses as ambiguous
// (renderer/testdata/hostile/ambiguous-*, the renderer's ambiguousKeys) is
// refused by the binary with the line its .error file holds, and is one
// that the API server and a YAML 1.2 reading (plainValue, of the nodes of
// go.yaml.in/yaml/v3, the parser under kyaml) could disagree on: the API
// server refuses it, or its strict field validation does (a repeated
// key), or the object it decodes (sigs.k8s.io/yaml, as the server does) is
// not what the YAML 1.2 reading makes of it, or one of the two refuses
// what the other reads. The API server is
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
// reader does, and says whether and why the two could disagree: the
// verdict of the first finding (a refusal by the server, by its strict
// field validation, a different reading; readAlike when there is none)
// and every finding.
func (c *cluster) readings(t *testing.T, ns string, src []byte) (verdict, why string) {
	t.Helper()
	var findings []string
	found := func(v, format string, args ...any) {
		if verdict == "" {
			verdict = v
		}
		findings = append(findings, strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "))
	}
	defer func() {
		if verdict == "" {
			verdict = readAlike
		}
		why = strings.Join(findings, "; ")
	}()
	// The YAML 1.2 reading: every document of the stream.
	var plain []any
	var plainErr error
	dec := yaml3.NewDecoder(strings.NewReader(string(src)))
	for {
		var n yaml3.Node
		if err := dec.Decode(&n); err != nil {
			if !errors.Is(err, io.EOF) {
				plainErr = err
			}
			break
		}
		v, err := plainValue(&n)
		if err != nil {
			plainErr = err
			break
		}
		plain = append(plain, v)
	}
	// The API server's decoder: Kubernetes' YAML reader passes it the
	// stream up to the first line that starts with "---" (none of the
	// fixtures has one), and it reads the first YAML document of it.
	var obj map[string]any
	if err := yaml.Unmarshal(src, &obj); err != nil {
		found(refusedByServer, "its decoder refuses it: %v", err)
		return
	}
	// The server's own reading, where it serves the kind: its decoder
	// (fieldValidation=Ignore) may refuse what the local one took, and its
	// strict field validation names a repeated key. A refusal of the
	// decoded object (422: the renderer's Deployments have no selector)
	// says nothing of the reading, which is then the local decoder's, the
	// server's own library.
	asked := false
	if gv, kind := fmt.Sprint(obj["apiVersion"]), fmt.Sprint(obj["kind"]); kind != "List" {
		if res, ok := c.resource(t, gv, kind); ok {
			asked = true
			path := "/apis/" + gv
			if !strings.Contains(gv, "/") {
				path = "/api/" + gv
			}
			if res.namespaced {
				path += "/namespaces/" + ns
			}
			path += "/" + res.name + "?dryRun=All&fieldManager=digestpin-test&fieldValidation="
			for _, validation := range []string{"Ignore", "Strict"} {
				status, b, err := c.Request(http.MethodPost, path+validation, "application/yaml", src)
				if err != nil {
					t.Fatalf("dry run of %s: %v", path, err)
				}
				msg := statusMessage(status, b)
				switch {
				case status == http.StatusBadRequest && validation == "Ignore":
					found(refusedByServer, "the API server refuses it: %s", msg)
					return
				case status == http.StatusBadRequest && repeatedKey(msg):
					found(refusedStrictly, "with fieldValidation=Strict the API server refuses it: %s", msg)
				case status != http.StatusCreated && status != http.StatusUnprocessableEntity:
					t.Logf("the dry run with fieldValidation=%s answers %s", validation, msg)
				}
			}
		}
	}
	if _, err := yaml.YAMLToJSONStrict(src); err != nil && repeatedKey(err.Error()) && !asked {
		found(refusedStrictly, "its strict decoder refuses it: %v", err)
	}
	server, _ := json.Marshal(obj)
	switch {
	case plainErr != nil:
		found(readDifferently, "YAML 1.2 refuses it (%v), where the API server reads %s", plainErr, server)
		return
	case len(plain) != 1:
		found(readDifferently, "YAML 1.2 reads %d documents, the API server one: %s", len(plain), server)
		return
	}
	p, err := json.Marshal(plain[0])
	if err != nil {
		t.Fatalf("encoding the YAML 1.2 reading: %v", err)
	}
	var a, b any
	_ = json.Unmarshal(server, &a)
	_ = json.Unmarshal(p, &b)
	if !reflect.DeepEqual(a, b) {
		found(readDifferently, "the API server reads %s, YAML 1.2 %s", server, p)
		return
	}
	findings = append(findings, "both read "+string(server))
	return
}

// plainValue is the YAML 1.2 reading of n as JSON would hold it: a
// scalar tagged other than !!str, !!int, !!float, !!bool or !!null (a
// !!binary, a custom tag) is read as its tag and text, not as the string
// the API server's YAML 1.1 decoder makes of it; an alias is what it
// names; a merge key (<<, the YAML 1.1 type that kyaml and the API
// server both apply) adds the keys its mappings have and the mapping has
// not, the first mapping winning; a key given twice is an error.
func plainValue(n *yaml3.Node) (any, error) {
	return plainNode(n, map[*yaml3.Node]bool{})
}

// plainNode is plainValue of n inside the nodes open, those it is in.
func plainNode(n *yaml3.Node, open map[*yaml3.Node]bool) (any, error) {
	if open[n] {
		return nil, fmt.Errorf("line %d: an alias inside the node it names", n.Line)
	}
	open[n] = true
	defer delete(open, n)
	switch n.Kind {
	case yaml3.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return plainNode(n.Content[0], open)
	case yaml3.AliasNode:
		return plainNode(n.Alias, open)
	case yaml3.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!int", "!!float", "!!bool", "!!null":
			var v any
			err := n.Decode(&v)
			return v, err
		}
		return n.Tag + " " + n.Value, nil
	case yaml3.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, err := plainNode(c, open)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml3.MappingNode:
		out := map[string]any{}
		var merged []map[string]any
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				sources := []*yaml3.Node{v}
				if v.Kind == yaml3.SequenceNode {
					sources = v.Content
				}
				for _, src := range sources {
					m, err := plainNode(src, open)
					if err != nil {
						return nil, err
					}
					mm, ok := m.(map[string]any)
					if !ok {
						return nil, fmt.Errorf("line %d: a merge key of a %T", k.Line, m)
					}
					merged = append(merged, mm)
				}
				continue
			}
			kv, err := plainNode(k, open)
			if err != nil {
				return nil, err
			}
			key := fmt.Sprint(kv)
			if _, dup := out[key]; dup {
				return nil, fmt.Errorf("line %d: key %q given twice", k.Line, key)
			}
			if out[key], err = plainNode(v, open); err != nil {
				return nil, err
			}
		}
		for _, m := range merged {
			for k, v := range m {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: a YAML node of kind %d", n.Line, n.Kind)
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
