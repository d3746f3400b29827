package steady

import (
	"bytes"
	"strings"
	"testing"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/gen"
)

// benchStreams returns a stream of 10k pinned Deployments (and their
// Services and ConfigMaps), and the same stream with one field changed
// in every Deployment.
func benchStreams(b *testing.B) (in, changed []byte) {
	b.Helper()
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 10000, Pinned: true}); err != nil {
		b.Fatal(err)
	}
	in = buf.Bytes()
	changed = bytes.ReplaceAll(in, []byte("app.kubernetes.io/instance: big"), []byte("app.kubernetes.io/instance: big-2"))
	return in, changed
}

// helm4Stream returns in as Helm 4 hands it to its post-renderer: each
// document's "# Source:" comment moved into FileAnnotation.
func helm4Stream(in []byte) []byte {
	var out bytes.Buffer
	for _, raw := range split(in) {
		src := sourceOf(raw)
		doc := string(raw)
		if src != "" {
			doc = strings.Replace(doc, "# Source: "+src+"\n", "", 1)
			doc = strings.Replace(doc, "\nmetadata:\n", "\nmetadata:\n  annotations:\n    "+FileAnnotation+": '"+src+"'\n", 1)
		}
		out.WriteString(doc)
	}
	return out.Bytes()
}

// BenchmarkParseNodes is the yardstick: parsing every document into a
// yaml.Node, as the renderer does.
func BenchmarkParseNodes(b *testing.B) {
	in, _ := benchStreams(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range split(in) {
			var n kyaml.Node
			if err := kyaml.Unmarshal(d, &n); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecode is the other yardstick: decoding every document as the
// API server does (sigs.k8s.io/yaml), which Diff and Keep do for every
// document that differs from its counterpart.
func BenchmarkDecode(b *testing.B) {
	in, _ := benchStreams(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := parse(in, "the input")
		if err != nil {
			b.Fatal(err)
		}
		if err := s.readAll(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiff(b *testing.B) {
	in, changed := benchStreams(b)
	for _, bc := range []struct {
		name   string
		second []byte
		input  []byte
	}{
		{"equal", bytes.Clone(in), in},
		{"every Deployment differs", changed, in},
		{"helm 4 input, equal", in, helm4Stream(in)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Diff(bc.input, bc.second, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkKeep(b *testing.B) {
	in, changed := benchStreams(b)
	for _, bc := range []struct {
		name     string
		previous []byte
		output   []byte
	}{
		{"equal", bytes.Clone(in), in},
		{"every Deployment differs in a volatile field", changed, in},
		{"helm 4 output, every Deployment differs in a volatile field", changed, helm4Stream(in)},
	} {
		// The volatile fields of two renders, the input as the output.
		v, err := Diff(bc.output, changed, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				d, err := Keep(bc.previous, bc.output, v, Options{})
				if err != nil || !d.Kept {
					b.Fatalf("Keep() = %v, %v", d.Reason, err)
				}
			}
		})
	}
}
