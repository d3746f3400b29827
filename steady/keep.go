package steady

import (
	"bytes"
	"fmt"
)

// Decision is what Keep chose.
type Decision struct {
	// Output is the stream to write: the previous output, byte for byte,
	// or the new output, whole.
	Output []byte
	// Kept is true when Output is the previous output.
	Kept bool
	// Reason says why, for the log, e.g. `Deployment/ns/web: image field
	// spec.template.spec.containers[name=app].image changed`.
	Reason string
}

// Keep chooses between previous, the output digestpin wrote last time for
// this release, and output, the one it made now. It returns previous, byte
// for byte, when both hold the same documents (matched as Diff matches
// them) and every field that differs is volatile in v, in the way the
// package documentation says; otherwise output.
// With a nil v it keeps previous only when both mean the same, field for
// field. A difference in an image field (the image of a container, init
// or ephemeral container, or the reference of an image volume, anywhere in
// a document) or in the checksum annotation always chooses output, volatile
// or not. An empty previous (a first render) chooses output. It fails when
// the previous output is not YAML, even when it is output byte for byte,
// and when a document of output that it compares is not. It is safe for
// concurrent use.
//
// When output comes from Helm 4's post-renderer (its documents carry
// FileAnnotation), Keep returns the previous output's documents in
// output's order, each with the annotation of its match in output, so that
// Helm 4 files them as it files output and prints the previous output
// again; the bytes Keep returns are then not the previous output's.
func Keep(previous, output []byte, v *Volatility, o Options) (Decision, error) {
	fresh := func(format string, args ...any) (Decision, error) {
		return Decision{Output: output, Reason: fmt.Sprintf(format, args...)}, nil
	}
	if len(previous) == 0 {
		return fresh("no previous output")
	}
	// The previous output is read whole, even when the new one is the
	// same bytes: one that does not parse is an error, whatever comes
	// next. The new one is read only where it differs from the previous.
	p, err := parse(previous, "the previous output")
	if err != nil {
		return Decision{}, err
	}
	if err := p.readAll(); err != nil {
		return Decision{}, err
	}
	if bytes.Equal(previous, output) {
		return Decision{Output: previous, Kept: true, Reason: "the output is the previous output"}, nil
	}
	n, err := parse(output, "the output")
	if err != nil {
		return Decision{}, err
	}
	if err := matchByKind(p, n); err != nil {
		return Decision{}, err
	}

	// First, the same documents must be there: a document added or removed
	// is a real change, whatever it holds.
	for _, d := range n.docs {
		if _, ok := p.byKey[d.key]; !ok {
			return fresh("%s is new", d.where())
		}
	}
	for _, d := range p.docs {
		if _, ok := n.byKey[d.key]; !ok {
			return fresh("%s of the previous output is gone", d.where())
		}
	}

	// Then compare each document with its previous self: images first,
	// then every other field against the volatile ones.
	for _, d := range n.docs {
		x, y, equal, err := compare(d, p.byKey[d.key])
		if err != nil {
			return Decision{}, err
		}
		if equal {
			continue
		}
		name := nameOr(objectOf(x), d)
		if f := o.changedImage(y, x); f != "" {
			return fresh("%s: image field %s changed", name, f)
		}
		df := newDiffer()
		df.diff(nil, y, x)
		var volatile pathSet // a nil set allows nothing
		if v != nil {
			volatile = v.fields[d.key]
		}
		for _, q := range df.paths {
			if why, ok := volatile.allows(q, df); !ok {
				return fresh("%s: %s %s", name, q, why)
			}
		}
	}
	if n.annotated {
		out, err := annotated(p, n)
		if err != nil {
			return Decision{}, err
		}
		return Decision{Output: out, Kept: true, Reason: "only volatile fields changed (the previous documents, for Helm 4 to file)"}, nil
	}
	return Decision{Output: previous, Kept: true, Reason: "only volatile fields changed"}, nil
}
