package detgen

import (
	"errors"
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

// Generator holds the state of one render: the current top-level file, the
// occurrence counters, and the records Certificates and Varying return. Use
// one Generator per render; a render is not safe to run concurrently with
// another on the same Generator (Helm executes a chart's files one after
// another in one goroutine). Its methods themselves may be called from any
// goroutine.
type Generator struct {
	seed   Seed
	rel    Release
	now    func() time.Time
	lookup LookupFunc

	mu     sync.Mutex
	top    string         // the top-level file being executed, from _dp_begin
	counts map[string]int // occurrences within top, by call without occurrence
	certs  []Certificate
	uses   []Use
}

// New returns the Generator of one render. now is the clock certificates
// are valid at and that now, ago and date read; nil means time.Now.
func New(seed Seed, rel Release, now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{seed: seed, rel: rel, now: now, counts: map[string]int{}}
}

// Format prints the release only, for every verb: fmt would otherwise print
// the seed field's bytes, as it formats unexported fields by reflection.
func (g *Generator) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "detgen.Generator{release %s/%s}", g.rel.Namespace, g.rel.Name)
}

// Names the rewritten calls take: the located variant of "f" is "_dp_f",
// whose first argument is the call's identity.
const (
	locatedPrefix = "_dp_"
	beginName     = locatedPrefix + "begin"
)

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
		beginName: g.begin,
		"keys":    sortedKeys,
		"values":  sortedValues,
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
	identity []byte // canonical encoding of the site and the occurrence
	args     []byte // canonical encoding of the arguments
}

// site is where a call is. Line is for reports only; it never enters a
// derivation, so a line added above a call does not change its value.
type site struct {
	kind      string // "site" for a rewritten call, "tpl" for any other
	top       string // the top-level file being executed
	enclosing string // the template (file or define) the call is written in
	lineKey   string // hash of the call's source line, trimmed
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

// newCall builds the call of fn with identity literal id (located) or in
// the current file's tpl context, and counts its occurrence.
func (g *Generator) newCall(fn, id string, located bool, args []reflect.Value) (*call, error) {
	var s site
	if located {
		var err error
		if s, err = parseSite(id); err != nil {
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
	s.top = g.top
	var e encoder
	e.str(s.kind)
	e.str(s.top)
	e.str(s.enclosing)
	e.str(s.lineKey)
	e.str(fn)
	e.bytes('a', a.b)
	key := string(e.b)
	n := g.counts[key]
	g.counts[key] = n + 1
	g.mu.Unlock()

	var ident encoder
	ident.str(s.kind)
	ident.str(s.top)
	ident.str(s.enclosing)
	ident.str(s.lineKey)
	ident.int(int64(n))
	return &call{fn: fn, site: s, identity: ident.b, args: a.b}, nil
}

// begin is the begin marker Rewrite puts at the start of each non-partial
// file: it names the top-level file now executing and restarts its
// occurrence counts. It outputs nothing.
func (g *Generator) begin(file string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.top = file
	clear(g.counts)
	return ""
}

// siteVersion starts every identity literal Rewrite writes.
const siteVersion = "v1"

// siteLiteral is the identity literal of a call: version, line (for reports
// only), the hash of the trimmed source line, and the enclosing template.
func siteLiteral(line int, lineKey, enclosing string) string {
	return siteVersion + "|" + strconv.Itoa(line) + "|" + lineKey + "|" + enclosing
}

var errBadSite = errors.New("malformed call identity (write the function's own name, not its " + locatedPrefix + " form)")

func parseSite(id string) (site, error) {
	parts := strings.SplitN(id, "|", 4)
	if len(parts) != 4 || parts[0] != siteVersion || parts[2] == "" {
		return site{}, errBadSite
	}
	line, err := strconv.Atoi(parts[1])
	if err != nil || line < 1 {
		return site{}, errBadSite
	}
	return site{kind: "site", enclosing: parts[3], lineKey: parts[2], line: line}, nil
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
	u := Use{Function: c.fn, Template: c.site.top, Enclosing: c.site.enclosing, Line: c.site.line, Detail: detail}
	if c.site.kind == "tpl" {
		u.Enclosing = "tpl"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.uses {
		if x := g.uses[i]; x.Function == u.Function && x.Template == u.Template && x.Enclosing == u.Enclosing && x.Line == u.Line && x.Detail == u.Detail {
			g.uses[i].Count++
			return
		}
	}
	u.Count = 1
	g.uses = append(g.uses, u)
}

// issued records a certificate.
func (g *Generator) issued(c *call, cert Certificate) {
	cert.Function, cert.Template, cert.Enclosing, cert.Line = c.fn, c.site.top, c.site.enclosing, c.site.line
	if c.site.kind == "tpl" {
		cert.Enclosing = "tpl"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.certs = append(g.certs, cert)
}

// siteInMessage is an identity literal as a template error quotes it,
// with the blank after it, or before it when it ends the call.
var (
	siteLit        = `"` + siteVersion + `\|[0-9]+\|[0-9a-f]+\|(?:[^"\\]|\\.)*"`
	siteInMessage  = regexp.MustCompile(siteLit + ` ?`)
	siteEndingCall = regexp.MustCompile(` ` + siteLit + `([>)])`)
)

// CleanMessage is a Helm error message about a rewritten template as the
// chart's author would read it: the located functions by their own names,
// without the identity literals Rewrite put in their calls.
func CleanMessage(msg string) string {
	msg = siteEndingCall.ReplaceAllString(msg, "$1")
	return strings.ReplaceAll(siteInMessage.ReplaceAllString(msg, ""), locatedPrefix, "")
}
