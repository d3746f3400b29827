package detgen

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"
)

// Release is the release identity generated values are bound to: the same
// chart, values and seed give other values under another name or namespace.
type Release struct{ Name, Namespace string }

// Generator holds the state of one render: the stack of executions (see
// frames.go), the occurrence counters, and the records Certificates,
// Varying and Ordered return. Use one Generator per render; a render is not
// safe to run concurrently with another on the same Generator (Helm
// executes a chart's files one after another in one goroutine). Its methods
// themselves may be called from any goroutine.
type Generator struct {
	seed   Seed
	rel    Release
	now    func() time.Time
	lookup LookupFunc

	mu      sync.Mutex
	stack   []*frame
	tpl     map[string]string // rewritten tpl texts, by text
	sites   map[string]site   // parsed site literals, by literal
	certs   []Certificate
	issuedK map[string]bool // the calls whose certificates are in certs
	uses    []Use
	ordered []Use

	memo     map[string]*memoKey // this render's RSA and DSA keys, by storage key (keyID)
	keyCache KeyCache
	keyStats KeyCacheStats
}

// New returns the Generator of one render. now is the clock certificates
// are valid at and that now, ago and date read; nil means time.Now.
func New(seed Seed, rel Release, now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{seed: seed, rel: rel, now: now, tpl: map[string]string{}, sites: map[string]site{}, issuedK: map[string]bool{}, memo: map[string]*memoKey{}}
}

// Format prints the release only, for every verb: fmt would otherwise print
// the seed field's bytes, as it formats unexported fields by reflection.
func (g *Generator) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "detgen.Generator{release %s/%s}", g.rel.Namespace, g.rel.Name)
}

// Names the rewritten calls take: the located variant of "f" is "_dp_f",
// whose first argument is the call's identity.
const locatedPrefix = "_dp_"

// LocatedName returns the name Rewrite gives a call of fn.
func LocatedName(fn string) string { return locatedPrefix + fn }

// OriginalName returns the chart's function name for a located name (for
// error messages: "error calling _dp_genCA" is the chart's genCA), and
// whether name was one.
func OriginalName(name string) (string, bool) {
	fn, ok := strings.CutPrefix(name, locatedPrefix)
	if !ok || !rewritten[fn] {
		return name, false
	}
	return fn, true
}

// Funcs returns the template functions of this render: every replaced Helm
// and sprig function under its own name (for calls Rewrite did not see, such
// as those in tpl strings), its located variant for the calls Rewrite
// rewrote, the begin marker, and keys and values in sorted order. Give it to
// Helm as CustomTemplateFuncs, which Helm copies over its own map last.
func (g *Generator) Funcs() template.FuncMap {
	m := template.FuncMap{
		beginName:     g.begin,
		pushName:      g.push,
		popName:       g.pop,
		pushValueName: g.pushValue,
		popValueName:  g.popValue,
		popNoneName:   g.popNone,
		rangeName:     rangeable,
		iterName:      g.iter,
		tplSourceName: g.tplSource,
		"keys":        sortedKeys,
		"values":      sortedValues,
	}
	for _, s := range g.specs() {
		m[s.name] = g.wrap(s.name, s.impl, false)
		m[LocatedName(s.name)] = g.wrap(s.name, s.impl, true)
	}
	return m
}

// spec is one replaced function: its name and its implementation, which
// takes the call first and then exactly the parameters of Helm's function.
type spec struct {
	name string
	impl any
}

// specs lists every function this package replaces. rewritten (in
// rewrite.go) must name the same set; TestSpecsMatchRewritten checks.
func (g *Generator) specs() []spec {
	return []spec{
		// Random strings, numbers and bytes.
		{"randAlphaNum", g.randAlphaNum},
		{"randAlpha", g.randAlpha},
		{"randNumeric", g.randNumeric},
		{"randAscii", g.randASCII},
		{"randBytes", g.randBytes},
		{"randInt", g.randInt},
		{"uuidv4", g.uuidv4},
		{"shuffle", g.shuffle},
		// Keys and certificates.
		{"genPrivateKey", g.genPrivateKey},
		{"genCA", g.genCA},
		{"genCAWithKey", g.genCAWithKey},
		{"genSelfSignedCert", g.genSelfSignedCert},
		{"genSelfSignedCertWithKey", g.genSelfSignedCertWithKey},
		{"genSignedCert", g.genSignedCert},
		{"genSignedCertWithKey", g.genSignedCertWithKey},
		{"buildCustomCert", g.buildCustomCert},
		// Hashes and ciphers with a random salt or IV.
		{"bcrypt", g.bcrypt},
		{"htpasswd", g.htpasswd},
		{"encryptAES", g.encryptAES},
		// What still varies: recorded, real behaviour.
		{"now", g.nowFunc},
		{"ago", g.ago},
		{"date", g.date},
		{"dateInZone", g.dateInZone},
		{"date_in_zone", g.dateInZone},
		{"htmlDate", g.htmlDate},
		{"htmlDateInZone", g.htmlDateInZone},
		{"durationRound", g.durationRound},
		{"lookup", g.lookupFunc},
		{"getHostByName", g.getHostByName},
	}
}

// call is one call of a replaced function: where it is and what it got.
type call struct {
	fn       string
	site     site
	top      string // the file of the root the call runs in
	identity []byte // canonical encoding of the site, its context and the occurrence
	args     []byte // canonical encoding of the arguments
}

// site is where a call is. Line is for reports only; it never enters a
// derivation, so a line added above a call does not change its value.
type site struct {
	kind      string // "site" for a rewritten call, "tpl" for any other
	enclosing string // the template (file or define) the call is written in
	lineKey   string // hash of the call's source line, trimmed
	ranges    []int  // the ranges around the call in its template, outermost first
	line      int
}

var errorType = reflect.TypeFor[error]()

// wrap turns impl (func(*call, P...) R) into a template function taking P...
// (or, located, the identity string and P...), which builds the call and
// runs impl.
func (g *Generator) wrap(name string, impl any, located bool) any {
	iv := reflect.ValueOf(impl)
	it := iv.Type()
	in := make([]reflect.Type, 0, it.NumIn())
	if located {
		in = append(in, reflect.TypeFor[string]())
	}
	for i := 1; i < it.NumIn(); i++ {
		in = append(in, it.In(i))
	}
	out := make([]reflect.Type, it.NumOut())
	for i := range out {
		out[i] = it.Out(i)
	}
	ft := reflect.FuncOf(in, out, it.IsVariadic())
	return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		id := ""
		if located {
			id, args = args[0].String(), args[1:]
		}
		c, err := g.newCall(name, id, located, args)
		if err != nil {
			if it.NumOut() == 2 && it.Out(1) == errorType {
				return []reflect.Value{reflect.Zero(it.Out(0)), reflect.ValueOf(&err).Elem()}
			}
			// text/template turns a panic in a function into the
			// template's error.
			panic(err)
		}
		full := append([]reflect.Value{reflect.ValueOf(c)}, args...)
		if it.IsVariadic() {
			return iv.CallSlice(full)
		}
		return iv.Call(full)
	}).Interface()
}

// newCall builds the call of fn with site literal id (located) or, for a
// call Rewrite did not see, in its frame's context, and counts its
// occurrence.
//
// Its identity is the root's file, the call's template and line key, its
// context (see context) and the number of equal calls before it in the
// root's execution; with an empty context (a call at a file's own level,
// outside any range) it is encoded exactly as before contexts were, so
// that such calls keep their values.
func (g *Generator) newCall(fn, id string, located bool, args []reflect.Value) (*call, error) {
	var s site
	if located {
		var err error
		if s, err = g.site(id); err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
	} else {
		s.kind = "tpl"
	}
	var a encoder
	for _, v := range args {
		a.value(v)
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	root, ctx := g.context(s)
	var ident encoder
	ident.str(s.kind)
	ident.str(root.file)
	ident.str(s.enclosing)
	ident.str(s.lineKey)
	if len(ctx) > 0 {
		ident.bytes('x', ctx)
	}
	e := encoder{b: append([]byte(nil), ident.b...)}
	e.str(fn)
	e.bytes('a', a.b)
	key := string(e.b)
	n := root.counts[key]
	root.counts[key] = n + 1
	if n > 0 {
		g.order(Use{Function: fn, Template: root.file, Enclosing: s.enclosing, Line: s.line,
			Detail: "equal calls of " + fn + " (same line, arguments and context) take their values in the order they run"})
	}
	ident.int(int64(n))
	return &call{fn: fn, site: s, top: root.file, identity: ident.b, args: a.b}, nil
}

// siteVersion starts every site literal Rewrite writes.
const siteVersion = "v2"

// siteLiteral is the site literal of a call: version, line (for reports
// only), the hash of the trimmed source line, the ranges around it (their
// offsets, dot-separated) and the enclosing template.
func siteLiteral(line int, lineKey string, ranges []int, enclosing string) string {
	ids := make([]string, len(ranges))
	for i, r := range ranges {
		ids[i] = strconv.Itoa(r)
	}
	return siteVersion + "|" + strconv.Itoa(line) + "|" + lineKey + "|" + strings.Join(ids, ".") + "|" + enclosing
}

func parseSite(id string) (site, error) {
	parts := strings.SplitN(id, "|", 5)
	if len(parts) != 5 || parts[0] != siteVersion || parts[2] == "" {
		return site{}, errBadSite
	}
	line, err := strconv.Atoi(parts[1])
	if err != nil || line < 1 {
		return site{}, errBadSite
	}
	s := site{kind: "site", enclosing: parts[4], lineKey: parts[2], line: line}
	if parts[3] != "" {
		for f := range strings.SplitSeq(parts[3], ".") {
			r, err := strconv.Atoi(f)
			if err != nil || r < 0 {
				return site{}, errBadSite
			}
			s.ranges = append(s.ranges, r)
		}
	}
	return s, nil
}

// Certificate is the record of one certificate a render issued (never its
// key): which call made it, for whom, and when it is re-issued.
type Certificate struct {
	Function   string // genCA, genSelfSignedCert, ...
	Template   string // the top-level file executing
	Enclosing  string // the template (file or define) the call is written in; "tpl" for a call in a tpl string
	Line       int    // the call's line in Enclosing's file; 0 for tpl
	CommonName string
	IsCA       bool
	Serial     string // hexadecimal
	NotBefore  time.Time
	NotAfter   time.Time
	// ReissueAt is when a render first issues the next certificate for this
	// call (the next window's start); before it every render issues this one.
	ReissueAt time.Time
}

// Certificates returns every certificate issued in this render so far, in
// call order.
func (g *Generator) Certificates() []Certificate {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.certs)
}

// Use is a call of a function whose result still varies between renders
// (now, ago, date without a time, lookup, getHostByName). Equal uses are
// counted, not repeated.
type Use struct {
	Function  string
	Template  string // the top-level file executing
	Enclosing string // the template (file or define) the call is written in; "tpl" for a call in a tpl string
	Line      int    // 0 for tpl
	Detail    string // what varies, e.g. "reads the cluster: v1 Secret ns/name"
	Count     int
}

// Varying returns every use of something that still varies in this render
// so far, in order of first use.
func (g *Generator) Varying() []Use {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.uses)
}

// vary records a use of c's function.
func (g *Generator) vary(c *call, detail string) {
	u := Use{Function: c.fn, Template: c.top, Enclosing: c.site.enclosing, Line: c.site.line, Detail: detail}
	if c.site.kind == "tpl" {
		u.Enclosing = "tpl"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.uses = countUse(g.uses, u)
}

// issued records a certificate, once for each call: a file included for
// its checksum runs its calls again, and issues the same certificates.
func (g *Generator) issued(c *call, cert Certificate) {
	cert.Function, cert.Template, cert.Enclosing, cert.Line = c.fn, c.top, c.site.enclosing, c.site.line
	if c.site.kind == "tpl" {
		cert.Enclosing = "tpl"
	}
	var e encoder
	e.str(c.fn)
	e.bytes('d', c.identity)
	e.bytes('a', c.args)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.issuedK[string(e.b)] {
		return
	}
	g.issuedK[string(e.b)] = true
	g.certs = append(g.certs, cert)
}

// Ordered returns, in order of first use, every call of this render whose
// value follows the order it runs in rather than what it is (equal calls
// on one line with one context; calls in a range over a list whose
// entries have no name), so that it can be named in one warning line
// each. Removing or adding such a call, or an entry before it, hands the
// values on to others.
func (g *Generator) Ordered() []Use {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ordered)
}

// siteInMessage is a site literal as a template error quotes it, with the
// blank after it, or before it when it ends the call.
var (
	siteLit        = `"` + siteVersion + `\|[0-9]+\|[0-9a-f]+\|[0-9.]*\|(?:[^"\\]|\\.)*"`
	siteInMessage  = regexp.MustCompile(siteLit + ` ?`)
	siteEndingCall = regexp.MustCompile(` ` + siteLit + `([>)])`)
	// The constructs Rewrite wraps around what the chart wrote: those
	// whose match ends with the parenthesis they close, those whose match
	// starts with it, and those it puts beside what the chart wrote.
	wrapAfter  = regexp.MustCompile(popName + ` \(` + pushName + ` ` + siteLit + `\) \(|` + rangeName + ` \(`)
	wrapAround = regexp.MustCompile(`\(` + tplSourceName + ` |\(` + pushValueName + ` ` + siteLit + ` \(`)
	besides    = regexp.MustCompile(pushValueName + ` ` + siteLit + ` \| | \| ` + popValueName + `| ?\(` + pushValueName + ` ` + siteLit + ` nil\)|\{\{` + popNoneName + `( -)?\}\}|\$` + locatedPrefix + `k[0-9]+, (\$` + locatedPrefix + `v[0-9]+ := )?`)
)

// unwrap removes from msg each construct re matches, keeping what it
// wraps; around says the match starts with the parenthesis that ends it
// (and one more closes before it, when the match ends with one), else it
// ends with it.
func unwrap(msg string, re *regexp.Regexp, around bool) string {
	for from := 0; ; {
		loc := re.FindStringIndex(msg[from:])
		if loc == nil {
			return msg
		}
		start, after := from+loc[0], from+loc[1]
		open := after - 1
		if around {
			open = start
		}
		end := parenEnd(msg, open)
		if end < 0 {
			from = after
			continue
		}
		inner := msg[after : end-1]
		if around && strings.HasSuffix(msg[start:after], "(") {
			inner = strings.TrimSuffix(inner, ")")
		}
		msg = msg[:start] + inner + msg[end:]
		from = start
	}
}

// CleanMessage is a Helm error message about a rewritten template as the
// chart's author would read it: the located functions by their own names,
// without the site literals and the stack's bookkeeping Rewrite put in.
func CleanMessage(msg string) string {
	msg = unwrap(msg, wrapAfter, false)
	msg = unwrap(msg, wrapAround, true)
	msg = besides.ReplaceAllString(msg, "")
	msg = siteEndingCall.ReplaceAllString(msg, "$1")
	return strings.ReplaceAll(siteInMessage.ReplaceAllString(msg, ""), locatedPrefix, "")
}
