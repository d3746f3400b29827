package detgen

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// A call's identity follows what the chart means, not the order it runs
// in: the file executing, the chain of include, template and tpl calls
// that led to the call (each by its site and the keys of the ranges around
// it), the call's own site, and the keys of the ranges around it. Rewrite
// marks each of these in the source; the functions here keep the stack of
// them as the chart runs. Helm executes a chart's files one after another
// in one goroutine, so the stack is the render's.
//
// A file's execution, by Helm or by an include of it (the checksum
// pattern), is a root: calls in it take the identities they take when Helm
// renders the file, so an include of a file shows the values the file
// renders, and what the includer does after it returns is its own again.

// The located names Rewrite writes for the stack.
const (
	pushName      = locatedPrefix + "push"   // _dp_push SITE: pushes a frame, returns a token for _dp_pop
	popName       = locatedPrefix + "pop"    // _dp_pop TOKEN S: pops it, returns S
	pushValueName = locatedPrefix + "pushv"  // _dp_pushv SITE V: pushes a frame, returns V
	popValueName  = locatedPrefix + "pop1"   // _dp_pop1 S: pops, returns S
	popNoneName   = locatedPrefix + "pop0"   // _dp_pop0: pops, outputs nothing
	rangeName     = locatedPrefix + "range"  // _dp_range V: V, with an integer or a sequence as key and element pairs
	iterName      = locatedPrefix + "iter"   // _dp_iter SITE ID KEY ELEMENT: the current key of range ID
	tplSourceName = locatedPrefix + "tplsrc" // _dp_tplsrc TEXT: TEXT rewritten, for tpl
	beginName     = locatedPrefix + "begin"  // _dp_begin FILE: a file starts executing
	maxDepth      = 1 << 12                  // frames; Helm stops an include chain at 1000
	errNoFrame    = generatorError("no frame to pop: a located function called outside a rewritten template")
	errDeepFrames = generatorError("include, template and tpl calls nested too deeply")
)

// generatorError is an error of the stack's bookkeeping.
type generatorError string

func (e generatorError) Error() string { return string(e) }

// frame is one execution on the stack: a file's (a root) or that of an
// include, template or tpl call.
type frame struct {
	root  bool
	file  string // a root's file
	site  site   // a call's site, in the frame below
	iters map[rangeRef]iteration
	// counts are a root's occurrences of equal calls, by identity.
	counts map[string]int
}

// rangeRef names a range of a template: its offset in the template's
// file, and the template.
type rangeRef struct {
	enclosing string
	id        int
}

// iteration is a range's current iteration: the range's line key and the
// element's key, and whether that key is the element's position.
type iteration struct {
	lineKey string
	line    int
	key     []byte
	ordered bool
}

// begin is the begin marker Rewrite puts at the start of each non-partial
// file. With nothing but a root on the stack, Helm executes the file: it is
// the new root. Otherwise an include of the file pushed a frame, which
// becomes a root. It outputs nothing.
func (g *Generator) begin(file string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.stack) <= 1 {
		g.stack = append(g.stack[:0], &frame{})
	}
	f := g.stack[len(g.stack)-1]
	*f = frame{root: true, file: file, counts: map[string]int{}}
	return ""
}

// push pushes the frame of the call at site literal id.
func (g *Generator) push(id string) (string, error) {
	s, err := g.site(id)
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.stack) >= maxDepth {
		return "", errDeepFrames
	}
	g.top()
	g.stack = append(g.stack, &frame{site: s})
	return strconv.Itoa(len(g.stack)), nil
}

// pop pops the frame push returned token for.
func (g *Generator) pop(token, s string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if strconv.Itoa(len(g.stack)) != token {
		return "", errNoFrame
	}
	return s, g.popLocked()
}

func (g *Generator) popLocked() error {
	if len(g.stack) < 2 {
		return errNoFrame
	}
	g.stack[len(g.stack)-1] = nil
	g.stack = g.stack[:len(g.stack)-1]
	return nil
}

// pushValue is push for a piped call and a template action: it returns v.
func (g *Generator) pushValue(id string, v any) (any, error) {
	if _, err := g.push(id); err != nil {
		return nil, err
	}
	return v, nil
}

// popValue pops and returns s.
func (g *Generator) popValue(s string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return s, g.popLocked()
}

// popNone pops and outputs nothing.
func (g *Generator) popNone() (string, error) { return g.popValue("") }

// rangeable is a range's value as its rewritten range takes it, with a key
// and an element: an integer n and a sequence become a sequence of index
// and element pairs; anything else is as it was.
func rangeable(v any) any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return v
		}
		rv = rv.Elem()
	}
	if !rv.CanInt() && !rv.CanUint() && (rv.Kind() != reflect.Func || !rv.Type().CanSeq()) {
		return v
	}
	return func(yield func(int, any) bool) {
		i := 0
		for x := range rv.Seq() {
			if !yield(i, x.Interface()) {
				return
			}
			i++
		}
	}
}

// iter records the current iteration of range id (site literal lit): its
// key is a map's key, and a list element's own value, or the value of its
// name, id or key field; only else its position, which is marked ordered.
func (g *Generator) iter(lit string, id int, key, elem any) (string, error) {
	s, err := g.site(lit)
	if err != nil {
		return "", err
	}
	it := iteration{lineKey: s.lineKey, line: s.line}
	it.key, it.ordered = iterationKey(key, elem)
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.top()
	if f.iters == nil {
		f.iters = map[rangeRef]iteration{}
	}
	f.iters[rangeRef{s.enclosing, id}] = it
	return "", nil
}

// elementKeys are the fields that name a list's mapping entry, in order:
// the first present with a scalar value is the entry's key.
var elementKeys = []string{"name", "id", "key"}

// iterationKey is the key of an iteration with key and element (a map's
// key is a string; a list's is its index) and whether it is a position.
func iterationKey(key, elem any) ([]byte, bool) {
	var e encoder
	if k, ok := key.(string); ok {
		e.str(k)
		return append([]byte{'m'}, e.b...), false
	}
	if scalar(elem) {
		e.value(reflect.ValueOf(elem))
		return append([]byte{'e'}, e.b...), false
	}
	if m := reflect.ValueOf(elem); m.Kind() == reflect.Map && m.Type().Key().Kind() == reflect.String {
		for _, f := range elementKeys {
			v := m.MapIndex(reflect.ValueOf(f).Convert(m.Type().Key()))
			if v.IsValid() && v.Interface() != nil && scalar(v.Interface()) {
				e.str(f)
				e.value(v)
				return append([]byte{'f'}, e.b...), false
			}
		}
	}
	e.value(reflect.ValueOf(key))
	return append([]byte{'i'}, e.b...), true
}

// scalar says whether v is a string, number, boolean or null.
func scalar(v any) bool {
	if v == nil {
		return true
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// tplSource rewrites the text of a tpl call, as Rewrite rewrites a file
// (without a begin marker: it runs within its caller's file). A text that
// does not parse is returned as it is, for Helm's tpl to refuse with its
// own message; one that names a located function is refused as Helm's tpl
// refuses an undefined function.
func (g *Generator) tplSource(text string) (string, error) {
	return remember(&g.mu, g.tpl, text, func(text string) (string, error) {
		out, err := rewrite(tplName, text, false)
		if err != nil {
			if msg, ok := strings.CutPrefix(err.Error(), "parse error at "); ok {
				return "", fmt.Errorf("cannot parse template %q: %s", text, msg)
			}
			return text, nil
		}
		return out, nil
	})
}

// remember returns m[key], computed by f on a miss and kept when f
// succeeds; mu guards m.
func remember[V any](mu *sync.Mutex, m map[string]V, key string, f func(string) (V, error)) (V, error) {
	mu.Lock()
	v, ok := m[key]
	mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := f(key)
	if err != nil {
		return v, err
	}
	mu.Lock()
	m[key] = v
	mu.Unlock()
	return v, nil
}

// tplName is the name a tpl text's calls are written in.
const tplName = "tpl"

// context returns the context of a call at s: the chain of frames above
// the nearest root, each with the keys of the ranges around its call, and
// the keys of the ranges around the call itself; empty at a file's own
// level outside any range. It also returns the root and records the
// ranges keyed by position. g.mu is held.
func (g *Generator) context(s site) (root *frame, ctx []byte) {
	top := g.top()
	r := len(g.stack) - 1
	for !g.stack[r].root {
		r--
	}
	root = g.stack[r]
	var e encoder
	for i := r + 1; i < len(g.stack); i++ {
		f := g.stack[i]
		e.str("via")
		e.str(f.site.enclosing)
		e.str(f.site.lineKey)
		g.rangeKeys(&e, root, g.stack[i-1], f.site)
	}
	g.rangeKeys(&e, root, top, s)
	return root, e.b
}

// rangeKeys encodes the keys of the ranges around s in frame f.
func (g *Generator) rangeKeys(e *encoder, root, f *frame, s site) {
	for _, id := range s.ranges {
		it, ok := f.iters[rangeRef{s.enclosing, id}]
		if !ok {
			// A range marker that did not run: only a source rewritten
			// by hand gets here.
			e.str("?")
			continue
		}
		e.str("range")
		e.str(it.lineKey)
		e.bytes('k', it.key)
		if it.ordered {
			g.order(Use{Function: "range", Template: root.file, Enclosing: s.enclosing, Line: it.line,
				Detail: "range over a list whose entries have no name, id or key field: the values generated for an entry follow its position in the list"})
		}
	}
}

// order records a call whose value follows the order it runs in. g.mu is
// held.
func (g *Generator) order(u Use) { g.ordered = countUse(g.ordered, u) }

// countUse counts u in uses: once more where an equal use is (all but the
// count alike), else as a new one at the end.
func countUse(uses []Use, u Use) []Use {
	for i := range uses {
		if x := uses[i]; x.Function == u.Function && x.Template == u.Template && x.Enclosing == u.Enclosing && x.Line == u.Line && x.Detail == u.Detail {
			uses[i].Count++
			return uses
		}
	}
	u.Count = 1
	return append(uses, u)
}

// top returns the frame on top of the stack, with a root of no file under
// it when nothing began one (a template not rewritten). g.mu is held.
func (g *Generator) top() *frame {
	if len(g.stack) == 0 {
		g.stack = append(g.stack, &frame{root: true, counts: map[string]int{}})
	}
	return g.stack[len(g.stack)-1]
}

// site is parseSite, remembered: a chart's includes and ranges run the
// same few sites many times.
func (g *Generator) site(lit string) (site, error) {
	return remember(&g.mu, g.sites, lit, parseSite)
}

var errBadSite = errors.New("malformed call identity (write the function's own name, not its " + locatedPrefix + " form)")
