package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// WideEncoding names the encoding of a stream in UTF-16 or UTF-32, told
// by its byte order mark or, as YAML does without one, by the zero bytes
// of its first ASCII character; it returns "" for UTF-8.
func WideEncoding(in []byte) string {
	switch {
	case bytes.HasPrefix(in, []byte{0, 0, 0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe, 0, 0}),
		len(in) >= 4 && in[0] == 0 && in[1] == 0 && in[2] == 0, len(in) >= 4 && in[1] == 0 && in[2] == 0 && in[3] == 0:
		return "UTF-32"
	case bytes.HasPrefix(in, []byte{0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe}),
		len(in) >= 2 && (in[0] == 0) != (in[1] == 0):
		return "UTF-16"
	}
	return ""
}

// Parsed is a parsed document: a Kubernetes object. Its tree belongs to
// the goroutine that parsed it.
type Parsed struct {
	Root    yaml.Node                   // the document node
	Obj     *yaml.Node                  // the object: a mapping
	CRLF    bool                        // the document's line breaks are CRLF
	Aliases map[*yaml.Node][]*yaml.Node // anchored node → its aliases; nil: none
	// Quick says that quickParse read the document: the tree has no
	// comments, and is not to be encoded (Write).
	Quick bool
	// blk holds the nodes of a tree from quickParse, for release.
	blk *quickBlock
}

// Release gives the memory of p's tree to the next quickParse. Nothing may
// use p or its nodes after: call it once the document's output is made
// (its pieces refer to no node).
func (p *Parsed) Release() {
	if p != nil && p.blk != nil {
		quickBlocks.Put(p.blk)
		p.blk = nil
	}
}

// Parse parses document d. It returns nil and no error for a document
// without an object: only comments, null. quick lets the quick reader
// read it (the tests turn it off to hold the two readers to the same
// output). It refuses a document that could take more than MaxNodes.
func Parse(d *Document, quick bool) (*Parsed, error) {
	if err := d.TooLarge(); err != nil {
		return nil, err
	}
	// Most documents are in the plain block style that quickParse reads
	// in a fraction of yaml.v3's time: it gives the same tree (comments
	// aside), or gives up.
	if quick {
		blk := quickBlocks.Get().(*quickBlock)
		if root, ok := quickParse(d.Body(), blk); ok {
			// quickParse reads no anchor, alias or merge key: there is
			// nothing for checkAliases to refuse.
			// It reads CRLF line breaks only when every CR is one.
			p := &Parsed{Root: *root, Quick: true, blk: blk, CRLF: bytes.IndexByte(d.Body(), '\r') >= 0}
			p.Obj = p.Root.Content[0]
			return p, nil
		}
		quickBlocks.Put(blk) // nothing refers to a tree it gave up on
	}
	return ParseFull(d)
}

// Check refuses document d where Parse would refuse it, without keeping
// a tree: a document that Kubernetes could not read (malformed YAML,
// more than one YAML document, anything but a mapping or null). Comments
// and blank lines alone are a document too, an empty one. quickValid
// checks the plain block style without a tree, whatever its size (quick
// lets it, as for Parse); yaml.v3 parses the rest within budget,
// refusing as Parse does one that could take more than MaxNodes, and the
// tree is dropped.
func Check(d *Document, budget *Budget, quick bool) error {
	if quick && quickValid(d.Body()) {
		return nil
	}
	if err := d.TooLarge(); err != nil {
		return err
	}
	n := d.Estimate()
	budget.Take(n)
	defer budget.Give(n)
	_, err := ParseFull(d)
	return err
}

// TooLarge refuses a document whose tree could take more memory than a
// Render may, before the parser builds it.
func (d *Document) TooLarge() error {
	if n := d.Estimate(); n > MaxNodes {
		return fmt.Errorf("%s: the document may hold up to %d YAML nodes (estimated from its %d bytes), more than digestpin parses in one document (MaxNodes %d)", d.Where(), n, len(d.Body()), MaxNodes)
	}
	return nil
}

// ParseFull parses document d with yaml.v3, never the quick reader: for
// Parse and Check, and for a document that the quick reader read and
// that only the encoder can change (ErrEncode).
func ParseFull(d *Document) (*Parsed, error) {
	// CRLF line breaks are parsed as LF, so that comments carry no CR
	// into a re-encoded document; lines and columns stay the same.
	body, crlf := d.Body(), bytes.Contains(d.Body(), []byte("\r\n"))
	if crlf {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	}
	// The stream was split where Kubernetes' YAML reader splits it; a
	// second YAML document in this one (after a "..." end marker, or a
	// "---" after a lone CR) is one that the API server never reads: it
	// decodes the first document of each, and ignores what follows.
	const unread = "which Kubernetes (kubectl, Helm, Argo CD) never reads: it reads only the first YAML document between two lines that start with \"---\""
	// A "---" line kept out of the body (plainMarker) starts the document
	// for the parser, and a "..." right after it ends it, empty: without
	// that line the parser would find no content before the "...".
	if d.Head > d.Sep {
		if at := contentStart(body); isEndMarker(body[at:]) {
			rest := at + len("...")
			if more := rest + contentStart(body[rest:]); more < len(body) {
				return nil, fmt.Errorf("%s: YAML after the end of the document, %s", d.At(1+bytes.Count(body[:more], newline)), unread)
			}
			return nil, nil
		}
	}
	p := &Parsed{CRLF: crlf}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p.Root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // only comments
		}
		return nil, yamlError(d, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("%s: a second YAML document starts here, %s", d.At(next.Line), unread)
	} else if !errors.Is(err, io.EOF) {
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		if at := contentStart(body); at < len(body) && body[at] == '{' {
			// kubectl reads a stream that begins with "{" as JSON
			// objects one after the other; digestpin reads one a document.
			return nil, fmt.Errorf("%s: more JSON after the document's object: digestpin reads one object a document; put a \"---\" line between objects", d.At(line))
		}
		return nil, fmt.Errorf("%s: YAML after the end of the document, %s", d.At(line), unread)
	}
	// Refuse aliases that would never end or cost more than the document.
	aliases, line, err := checkAliases(&p.Root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.At(line), err)
	}
	p.Aliases = aliases
	p.Obj = Deref(rootContent(&p.Root))
	if p.Obj == nil || (p.Obj.Kind == yaml.ScalarNode && p.Obj.Tag == "!!null") {
		return nil, nil
	}
	if p.Obj.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a Kubernetes object (a mapping), found %s", d.At(p.Obj.Line), KindName(p.Obj))
	}
	return p, nil
}

// isEndMarker reports whether b starts with a "..." document end marker.
func isEndMarker(b []byte) bool {
	return bytes.HasPrefix(b, []byte("...")) && (len(b) == 3 || bytes.IndexByte([]byte(" \t\r\n"), b[3]) >= 0)
}

// rootContent returns the top node of a parsed document.
func rootContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return doc.Content[0]
	}
	return doc
}

// ParseText parses text, the value of a string scalar, as the YAML (or
// JSON) documents it may embed: a manifest or a configuration file kept
// in a ConfigMap or an annotation. It returns the top node of each
// document that has one. The guards of Parse apply: text that may hold
// more than maxNodes nodes (counted as the Budget counts a document's,
// before parsing) is refused unparsed, and so are aliases that
// checkAliases refuses (a cycle; merge keys that expand past the bound).
// Plain aliases are left as alias nodes, never expanded: a caller that
// walks the tree must step into each anchored node once. Text that is
// not YAML is an error; the tree belongs to the caller.
func ParseText(text string, maxNodes int) ([]*yaml.Node, error) {
	if n := estimateNodes([]byte(text)); n > maxNodes {
		return nil, fmt.Errorf("the text may hold up to %d YAML nodes, more than %d", n, maxNodes)
	}
	var roots []*yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return roots, nil
			}
			return nil, err
		}
		if _, _, err := checkAliases(&doc); err != nil {
			return nil, err
		}
		if top := rootContent(&doc); top != nil {
			roots = append(roots, top)
		}
	}
}
