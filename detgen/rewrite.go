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

// edit replaces src[pos:pos+n] with text. An insertion (n 0) opens or
// closes a construct around what follows or precedes it; of the edits at
// one offset, those that close come first, the inner before the outer,
// then those that open, the outer before the inner, then a replacement.
// Edits are made outer first (seq counts them), which gives both orders.
type edit struct {
	pos, n int
	text   string
	closes bool
	seq    int
}

// editBefore orders edits for splicing.
func editBefore(a, b edit) bool {
	if a.pos != b.pos {
		return a.pos < b.pos
	}
	rank := func(e edit) int {
		switch {
		case e.closes:
			return 0
		case e.n == 0:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	if a.closes {
		return a.seq > b.seq
	}
	return a.seq < b.seq
}

// Rewrite returns a chart template's source with each call of a function
// Funcs replaces turned into a call of its located variant, whose first
// argument is the call's site: `randAlphaNum 16` becomes
// `_dp_randAlphaNum "v2|…" 16`, so `16 | randAlphaNum` still works (the piped
// value comes last), and a niladic call in an argument or before a field,
// `now.Year`, becomes `(_dp_now "v2|…").Year`. A non-partial file (base name
// not starting with "_") also gets the begin marker `{{_dp_begin "name"}}` at
// offset 0, which outputs nothing and tells the Generator which file is
// executing.
//
// Rewrite also marks what makes a call's context, so that the Generator
// can keep the stack of it at run time (see Generator): each include and tpl
// call becomes `_dp_pop (_dp_push "v2|…") (include …)` (a tpl's text is
// rewritten too, when it runs: `tpl (_dp_tplsrc …) …`), each template action
// is followed by `{{_dp_pop0}}`, and each range declares its key and element
// (`range $_dp_kN, $_dp_vN := _dp_range (…)`) and starts its body with
// `{{_dp_iter "v2|…" N $key $element}}`. Outputs and values are the same as
// without.
//
// name is the template's Helm name, e.g. "mychart/templates/secret.yaml". No
// newline is added or removed, so Helm's error lines stay right (columns of
// a rewritten line move). Rewrite parses with Go's text/template/parse, so
// a source Helm cannot parse is an error here too, naming the file. Fields,
// variables, strings and comments that look like function names are left
// alone. A source that names a function of the located form itself (_dp_…)
// is refused as Helm refuses it: no such function is defined.
func Rewrite(name, src string) (string, error) {
	return rewrite(name, src, !strings.HasPrefix(path.Base(name), "_"))
}

// rewrite is Rewrite, with the begin marker or without (for a partial file,
// and for a tpl text, which runs within its caller's file).
func rewrite(name, src string, begin bool) (string, error) {
	// First, parse the file (with its defines and blocks) the way Helm
	// will, without knowing the functions.
	trees := map[string]*parse.Tree{}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(src, "", "", trees); err != nil {
		return "", fmt.Errorf("rewriting template %s: %w", name, err)
	}

	// Next, find every call of a replaced function, include, tpl, template
	// action and range in every template the file defines; a call's
	// enclosing template is the tree it is in. They are visited in order
	// of name, so that the edits at one offset are always in one order.
	var edits []edit
	lines := []int{0} // the offset where each line starts
	for i := range len(src) {
		if src[i] == '\n' {
			lines = append(lines, i+1)
		}
	}
	names := make([]string, 0, len(trees))
	for tname := range trees {
		names = append(names, tname)
	}
	sort.Strings(names)
	for _, tname := range names {
		w := &walker{src: src, lines: lines, file: name, enclosing: tname, edits: &edits}
		if root := trees[tname].Root; root != nil {
			w.node(root)
		}
		if w.err != nil {
			return "", w.err
		}
	}

	// Finally, splice the edits in, in source order.
	sort.Slice(edits, func(i, j int) bool { return editBefore(edits[i], edits[j]) })
	var b strings.Builder
	b.Grow(len(src) + 64*len(edits) + len(name) + 32)
	if begin {
		b.WriteString(beginMarker(name))
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

// beginMarker is the action Rewrite puts first in a non-partial file.
func beginMarker(name string) string {
	return "{{" + beginName + " " + strconv.Quote(name) + "}}"
}

// walker collects the edits of one template tree.
type walker struct {
	src       string
	lines     []int  // the offset where each line of src starts
	file      string // the file, for errors
	enclosing string // the tree's name
	ranges    []int  // the ranges whose bodies enclose the node now visited, outermost first
	edits     *[]edit
	err       error // the first error; the rest of the walk is moot
}

// open inserts text at pos that opens a construct; close, one that
// closes one.
func (w *walker) open(pos int, text string)  { w.add(edit{pos: pos, text: text}) }
func (w *walker) close(pos int, text string) { w.add(edit{pos: pos, text: text, closes: true}) }

func (w *walker) add(e edit) {
	e.seq = len(*w.edits)
	*w.edits = append(*w.edits, e)
}

func (w *walker) fail(pos parse.Pos, format string, args ...any) {
	if w.err == nil {
		line := w.line(int(pos))
		w.err = fmt.Errorf("parse error at (%s:%d): %s", w.file, line, fmt.Sprintf(format, args...))
	}
}

func (w *walker) node(n parse.Node) {
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
		w.rangeNode(n)
	case *parse.WithNode:
		w.branch(&n.BranchNode)
	case *parse.TemplateNode:
		w.template(n)
	}
}

func (w *walker) branch(b *parse.BranchNode) {
	w.pipe(b.Pipe)
	w.node(b.List)
	if b.ElseList != nil {
		w.node(b.ElseList)
	}
}

func (w *walker) pipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for i, c := range p.Cmds {
		w.command(c, i > 0)
	}
}

// command visits one command of a pipeline; piped says a value is piped
// into it (it comes last among its arguments).
func (w *walker) command(c *parse.CommandNode, piped bool) {
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok && (id.Ident == "include" || id.Ident == "tpl") && len(c.Args) > 1 {
		w.frame(c, id, piped)
	}
	for i, a := range c.Args {
		w.arg(a, i == 0)
	}
}

// arg visits one operand; head says it is the command's function position,
// where the site can follow the name. Anywhere else a function name is
// a call without arguments, which takes parentheses to gain one.
func (w *walker) arg(n parse.Node, head bool) {
	switch n := n.(type) {
	case *parse.IdentifierNode:
		if strings.HasPrefix(n.Ident, locatedPrefix) {
			w.fail(n.Pos, "function %q not defined", n.Ident)
		}
		if rewritten[n.Ident] {
			w.locate(n, head)
		}
	case *parse.PipeNode:
		w.pipe(n)
	case *parse.ChainNode:
		w.arg(n.Node, false)
	}
}

// site is the site literal of the node at pos: its line, the hash of its
// line's text, the ranges around it and its template.
func (w *walker) site(pos int) string {
	line := w.line(pos)
	end := len(w.src)
	if line < len(w.lines) {
		end = w.lines[line] - 1
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(w.src[w.lines[line-1]:end])))
	return strconv.Quote(siteLiteral(line, hex.EncodeToString(sum[:16]), w.ranges, w.enclosing))
}

// line is the 1-based line of offset pos.
func (w *walker) line(pos int) int {
	return sort.Search(len(w.lines), func(i int) bool { return w.lines[i] > pos })
}

func (w *walker) locate(n *parse.IdentifierNode, head bool) {
	pos := int(n.Pos)
	text := LocatedName(n.Ident) + " " + w.site(pos)
	if !head {
		text = "(" + text + ")"
	}
	w.add(edit{pos: pos, n: len(n.Ident), text: text})
}

// frame marks an include or tpl call c (head id) as a frame of the
// Generator's stack: pushed before the call runs, popped after it
// returns, both within the call's own command, so that a short-circuited
// and, or or an error leaves nothing pushed. A tpl's text is rewritten
// too, as it runs.
func (w *walker) frame(c *parse.CommandNode, id *parse.IdentifierNode, piped bool) {
	start := int(id.Pos)
	// The operands' spans, which the parse does not record.
	spans := make([][2]int, len(c.Args))
	end := start + len(id.Ident)
	for i := 1; i < len(c.Args); i++ {
		s := skipSpace(w.src, end)
		e := operandEnd(w.src, s)
		if e < 0 || !spanHolds(w.src, s, e, c.Args[i]) {
			w.fail(c.Args[i].Position(), "digestpin cannot find where the operand %s of %s ends", c.Args[i], id.Ident)
			return
		}
		spans[i] = [2]int{s, e}
		end = e
	}
	site := w.site(start)
	if piped {
		w.open(start, pushValueName+" "+site+" | ")
		w.close(end, " | "+popValueName)
	} else {
		w.open(start, popName+" ("+pushName+" "+site+") (")
		w.close(end, ")")
	}
	if id.Ident == "tpl" {
		w.open(spans[1][0], "("+tplSourceName+" ")
		w.close(spans[1][1], ")")
	}
}

// spanHolds says whether the operand found at src[s:e] is the node n: a
// parenthesised pipeline starts with a parenthesis, a chain too or is
// written as it prints, anything else is written as it prints. (A field
// chain's position is that of its second field.)
func spanHolds(src string, s, e int, n parse.Node) bool {
	switch n.(type) {
	case *parse.PipeNode:
		return src[s] == '('
	case *parse.ChainNode:
		return src[s] == '(' || src[s:e] == n.String()
	}
	return src[s:e] == n.String()
}

// template marks a template action as a frame: its data is pushed with
// the site, and an action after it pops it, trimming the text after it as
// the template action did. A block, whose body follows its action, is
// left as it is: the calls in its body are told apart by their template.
func (w *walker) template(n *parse.TemplateNode) {
	defer w.pipe(n.Pipe)
	pos := int(n.Pos)
	kw := strings.TrimRight(w.src[:pos], " \t\r\n")
	if !strings.HasSuffix(kw, "template") {
		return // a block
	}
	nameEnd := operandEnd(w.src, pos)
	content, end, trim, ok := actionClose(w.src, max(nameEnd, pos))
	if nameEnd < 0 || !ok {
		w.fail(n.Pos, "digestpin cannot find where the template action ends")
		return
	}
	site := w.site(pos)
	if n.Pipe == nil {
		w.open(nameEnd, " ("+pushValueName+" "+site+" nil)")
	} else {
		w.open(skipSpace(w.src, nameEnd), "("+pushValueName+" "+site+" (")
		w.close(content, "))")
	}
	pop := "{{" + popNoneName + "}}"
	if trim {
		pop = "{{" + popNoneName + " -}}"
	}
	w.close(end, pop)
}

// declares says whether the range variable v is followed by ":=".
func (w *walker) declares(v *parse.VariableNode) bool {
	end := int(v.Pos) + len(v.Ident[0])
	return end <= len(w.src) && strings.HasPrefix(w.src[skipSpace(w.src, end):], ":=")
}

// spaced is text to insert at pos with a blank before it where the source
// has none ("range.L" is a range, "range$k" would not be).
func (w *walker) spaced(pos int, text string) string {
	if pos > 0 && !isSpace(w.src[pos-1]) {
		return " " + text
	}
	return text
}

// rangeNode marks a range: it declares a key and an element when the
// range does not (its own, when it does), and its body starts with the
// iteration marker, which tells the Generator the current key. The
// range's pipeline runs outside the iteration; its else branch too.
func (w *walker) rangeNode(n *parse.RangeNode) {
	id := int(n.Pos)
	key, elem := "$"+locatedPrefix+"k"+strconv.Itoa(id), "$"+locatedPrefix+"v"+strconv.Itoa(id)
	decl := n.Pipe.Decl
	wrap := true
	switch {
	case len(decl) == 0:
		w.open(int(n.Pipe.Cmds[0].Pos), w.spaced(int(n.Pipe.Cmds[0].Pos), key+", "+elem+" := "))
	case len(decl) == 1 && !n.Pipe.IsAssign && w.declares(decl[0]):
		w.open(int(decl[0].Pos), w.spaced(int(decl[0].Pos), key+", "))
		elem = decl[0].Ident[0]
	case len(decl) == 1:
		// range $x = …: the key would need a variable declared before;
		// range $x, PIPELINE (which the parser takes, with no ":="): a
		// second variable cannot be put before it.
		key, elem, wrap = "nil", ".", false
	default:
		key, elem, wrap = decl[0].Ident[0], decl[1].Ident[0], false
	}
	if wrap {
		content, _, _, ok := actionClose(w.src, int(n.Pipe.Cmds[0].Pos))
		if !ok {
			w.fail(n.Pos, "digestpin cannot find where the range action ends")
			return
		}
		w.open(int(n.Pipe.Cmds[0].Pos), rangeName+" (")
		w.close(content, ")")
	}
	w.pipe(n.Pipe)
	site := w.site(id)
	if n.List != nil {
		body := int(n.List.Pos)
		open := "{{"
		if leftTrims(w.src, body) {
			open = "{{- "
		}
		w.open(body, open+iterName+" "+site+" "+strconv.Itoa(id)+" "+key+" "+elem+"}}")
		w.ranges = append(w.ranges, id)
		w.node(n.List)
		w.ranges = w.ranges[:len(w.ranges)-1]
	}
	if n.ElseList != nil {
		w.node(n.ElseList)
	}
}
