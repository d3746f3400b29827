package detgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"
)

// rewritten is the set of functions whose calls Rewrite locates: every
// function Funcs replaces except keys and values, whose replacement needs no
// identity.
var rewritten = map[string]bool{
	"randAlphaNum": true, "randAlpha": true, "randNumeric": true, "randAscii": true,
	"randBytes": true, "randInt": true, "uuidv4": true, "shuffle": true,
	"genPrivateKey": true, "genCA": true, "genCAWithKey": true,
	"genSelfSignedCert": true, "genSelfSignedCertWithKey": true,
	"genSignedCert": true, "genSignedCertWithKey": true, "buildCustomCert": true,
	"bcrypt": true, "htpasswd": true, "encryptAES": true,
	"now": true, "ago": true, "date": true, "dateInZone": true, "date_in_zone": true,
	"htmlDate": true, "htmlDateInZone": true, "durationRound": true,
	"lookup": true, "getHostByName": true,
}

// edit replaces src[pos:pos+n] with text.
type edit struct {
	pos, n int
	text   string
}

// Rewrite returns a chart template's source with each call of a function
// Funcs replaces turned into a call of its located variant, whose first
// argument is the call's identity: `randAlphaNum 16` becomes
// `_dp_randAlphaNum "v1|…" 16`, so `16 | randAlphaNum` still works (the piped
// value comes last), and a niladic call in an argument or before a field,
// `now.Year`, becomes `(_dp_now "v1|…").Year`. A non-partial file (base name
// not starting with "_") also gets the begin marker `{{_dp_begin "name"}}` at
// offset 0, which outputs nothing and tells the Generator which top-level
// file the calls that follow belong to.
//
// name is the template's Helm name, e.g. "mychart/templates/secret.yaml". No
// newline is added or removed, so Helm's error lines stay right (columns of
// a rewritten line move). Rewrite parses with Go's text/template/parse, so
// a source Helm cannot parse is an error here too, naming the file. Fields,
// variables, strings and comments that look like function names are left
// alone.
func Rewrite(name, src string) (string, error) {
	// First, parse the file (with its defines and blocks) the way Helm
	// will, without knowing the functions.
	trees := map[string]*parse.Tree{}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(src, "", "", trees); err != nil {
		return "", fmt.Errorf("rewriting template %s: %w", name, err)
	}

	// Next, find every call of a replaced function in every template the
	// file defines; a call's enclosing template is the tree it is in.
	var edits []edit
	for tname, tree := range trees {
		w := walker{src: src, enclosing: tname, edits: &edits}
		if tree.Root != nil {
			w.node(tree.Root)
		}
	}

	// Finally, splice the edits in, in source order.
	sort.Slice(edits, func(i, j int) bool { return edits[i].pos < edits[j].pos })
	var b strings.Builder
	b.Grow(len(src) + 64*len(edits) + len(name) + 32)
	if marker := beginMarker(name); !strings.HasPrefix(path.Base(name), "_") && !strings.HasPrefix(src, marker) {
		b.WriteString(marker)
	}
	last := 0
	for _, e := range edits {
		b.WriteString(src[last:e.pos])
		b.WriteString(e.text)
		last = e.pos + e.n
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// beginMarker is the action Rewrite puts first in a non-partial file. A
// source that starts with it already is not given a second one, so
// rewriting a rewritten source changes nothing.
func beginMarker(name string) string {
	return "{{" + beginName + " " + strconv.Quote(name) + "}}"
}

// walker collects the edits of one template tree.
type walker struct {
	src       string
	enclosing string
	edits     *[]edit
}

func (w walker) node(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			w.node(c)
		}
	case *parse.ActionNode:
		w.pipe(n.Pipe)
	case *parse.IfNode:
		w.branch(&n.BranchNode)
	case *parse.RangeNode:
		w.branch(&n.BranchNode)
	case *parse.WithNode:
		w.branch(&n.BranchNode)
	case *parse.TemplateNode:
		w.pipe(n.Pipe)
	}
}

func (w walker) branch(b *parse.BranchNode) {
	w.pipe(b.Pipe)
	w.node(b.List)
	if b.ElseList != nil {
		w.node(b.ElseList)
	}
}

func (w walker) pipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		for i, a := range c.Args {
			w.arg(a, i == 0)
		}
	}
}

// arg visits one operand; head says it is the command's function position,
// where the identity can follow the name. Anywhere else a function name is
// a call without arguments, which takes parentheses to gain one.
func (w walker) arg(n parse.Node, head bool) {
	switch n := n.(type) {
	case *parse.IdentifierNode:
		if rewritten[n.Ident] {
			w.locate(n, head)
		}
	case *parse.PipeNode:
		w.pipe(n)
	case *parse.ChainNode:
		w.arg(n.Node, false)
	}
}

func (w walker) locate(n *parse.IdentifierNode, head bool) {
	pos := int(n.Pos)
	start := strings.LastIndexByte(w.src[:pos], '\n') + 1
	end := strings.IndexByte(w.src[pos:], '\n')
	if end < 0 {
		end = len(w.src)
	} else {
		end += pos
	}
	line := 1 + strings.Count(w.src[:pos], "\n")
	sum := sha256.Sum256([]byte(strings.TrimSpace(w.src[start:end])))
	text := LocatedName(n.Ident) + " " + strconv.Quote(siteLiteral(line, hex.EncodeToString(sum[:16]), w.enclosing))
	if !head {
		text = "(" + text + ")"
	}
	*w.edits = append(*w.edits, edit{pos: pos, n: len(n.Ident), text: text})
}
