package detgen

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzIdentity builds a chart from the fuzzer's bytes (files of statements
// that call generators directly, through a helper and a helper's helper,
// in ranges over a map, a list and a list of named entries, nested, in tpl
// texts with and without a range of their own, and include sibling files
// for a checksum), renders it, changes it as a user would (entries added,
// removed and reordered, statements added, removed and moved, a file
// added), renders again, and checks the two invariants of a call's
// identity:
//   - in one render, two different calls never give one value;
//   - between the two renders, a call keeps its value, and no value goes
//     from one call to another.
//
// Every generated value is printed beside a label that names its call
// (the statement and the entry), so that the check knows which call is
// which without trusting the identities under test. No statement it
// builds depends on order, so no render may name one as such.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{"", "\x00", "\x07\x03\x01", "\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0", "seed 1: a longer input for more statements and mutations"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &fuzzBytes{b: data}
		base := newFuzzChart(src)
		changed := base.clone()
		for range 1 + src.n(3) {
			changed.mutate(src)
		}
		before := base.labelled(t)
		after := changed.labelled(t)
		for label, v := range after {
			if old, ok := before[label]; ok && old != v {
				t.Errorf("%s = %s, was %s\nbefore:\n%s\nafter:\n%s", label, v, old, base, changed)
			}
			if _, ok := before[label]; !ok {
				for bl, bv := range before {
					if bv == v {
						t.Errorf("new call %s took %s's value %s\nbefore:\n%s\nafter:\n%s", label, bl, v, base, changed)
					}
				}
			}
		}
	})
}

// fuzzBytes draws choices from the fuzzer's bytes, then zeros.
type fuzzBytes struct {
	b []byte
	i int
}

// n returns a choice in [0, k).
func (s *fuzzBytes) n(k int) int {
	if k <= 1 || s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1]) % k
}

// fuzzChart is a chart FuzzIdentity builds: its files' statements and its
// values.
type fuzzChart struct {
	files []fuzzFile
	svcs  []string // the keys of .Values.svcs
	users []string // .Values.users
	accts []string // the names of .Values.accts entries
	next  int      // the next statement's label
}

type fuzzFile struct {
	id    int // its name is f<id>; it includes only files of larger ids
	lines []string
}

var fuzzNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}

func newFuzzChart(src *fuzzBytes) *fuzzChart {
	c := &fuzzChart{}
	c.svcs = pick(src, 1+src.n(3))
	c.users = pick(src, 1+src.n(4))
	c.accts = pick(src, src.n(3))
	for id := range 1 + src.n(3) {
		f := fuzzFile{id: id * 10}
		c.files = append(c.files, f)
	}
	for i := range c.files {
		for range 1 + src.n(5) {
			c.files[i].lines = append(c.files[i].lines, c.statement(src, c.files[i].id))
		}
	}
	return c
}

// pick returns k distinct names in an order src chooses.
func pick(src *fuzzBytes, k int) []string {
	pool := slices.Clone(fuzzNames)
	var out []string
	for range k {
		i := src.n(len(pool))
		out = append(out, pool[i])
		pool = slices.Delete(pool, i, i+1)
	}
	return out
}

// statement is a new statement of file id, with a label of its own.
func (c *fuzzChart) statement(src *fuzzBytes, id int) string {
	l := fmt.Sprintf("s%d", c.next)
	c.next++
	switch src.n(11) {
	case 0:
		return l + "={{ randAlphaNum 16 }};"
	case 1:
		return `{{ include "gen" (dict "l" "` + l + `") }}`
	case 2:
		return `{{ include "genc" (dict "l" "` + l + `") | upper | lower }}`
	case 3:
		return `{{ range $k, $v := .Values.svcs }}` + l + `-{{ $k }}={{ randAlphaNum 16 }};{{ end }}`
	case 4:
		return `{{ range $k, $v := .Values.svcs }}{{ include "gen" (dict "l" (print "` + l + `-" $k)) }}{{ end }}`
	case 5:
		return `{{- range .Values.users }}` + l + `-{{ . }}={{ randAlphaNum 16 }};{{ end }}`
	case 6:
		return `{{ range .Values.accts }}{{ include "genc" (dict "l" (print "` + l + `-" .name)) }}{{ end }}`
	case 7:
		return `{{ range $u := .Values.users }}{{ range $k, $_ := $.Values.svcs }}` + l + `-{{ $u }}-{{ $k }}={{ randAlphaNum 16 }};{{ end }}{{ end }}`
	case 8:
		return `{{ tpl "` + l + `={{ randAlphaNum 16 }};" . }}`
	case 9:
		return `{{ tpl "{{ range .Values.users }}` + l + `-{{ . }}={{ randAlphaNum 16 }};{{ end }}" . }}`
	default:
		// A checksum of a sibling file, which may call generators too.
		target := id + 10 + 10*src.n(3)
		return l + `-sum: {{ include "c/templates/f` + fmt.Sprint(target) + `.yaml" . | sha256sum | trunc 8 }}`
	}
}

func (c *fuzzChart) clone() *fuzzChart {
	d := *c
	d.svcs, d.users, d.accts = slices.Clone(c.svcs), slices.Clone(c.users), slices.Clone(c.accts)
	d.files = slices.Clone(c.files)
	for i := range d.files {
		d.files[i].lines = slices.Clone(c.files[i].lines)
	}
	return &d
}

// mutate changes c as a user would change a chart or its values.
func (c *fuzzChart) mutate(src *fuzzBytes) {
	f := &c.files[src.n(len(c.files))]
	switch src.n(10) {
	case 0:
		c.svcs = addName(src, c.svcs)
	case 1:
		c.svcs = removeOne(src, c.svcs)
	case 2:
		c.users = addName(src, c.users)
	case 3:
		c.users = removeOne(src, c.users)
	case 4:
		if len(c.users) > 1 {
			c.users = append(c.users[1:], c.users[0])
		}
	case 5:
		c.accts = addName(src, c.accts)
	case 6:
		c.accts = removeOne(src, c.accts)
	case 7:
		f.lines = slices.Insert(f.lines, src.n(len(f.lines)+1), c.statement(src, f.id))
	case 8:
		if len(f.lines) > 1 {
			i := src.n(len(f.lines))
			f.lines = slices.Delete(f.lines, i, i+1)
		}
	default:
		i, j := src.n(len(f.lines)), src.n(len(f.lines))
		f.lines[i], f.lines[j] = f.lines[j], f.lines[i]
	}
}

func addName(src *fuzzBytes, names []string) []string {
	for _, n := range fuzzNames[src.n(len(fuzzNames)):] {
		if !slices.Contains(names, n) {
			return slices.Insert(names, src.n(len(names)+1), n)
		}
	}
	return names
}

func removeOne(src *fuzzBytes, names []string) []string {
	if len(names) < 2 {
		return names
	}
	i := src.n(len(names))
	return slices.Delete(names, i, i+1)
}

// chart returns c's files (with the helpers, and empty files for the
// checksums' targets it lacks) and values.
func (c *fuzzChart) chart() (map[string]string, map[string]any) {
	files := map[string]string{
		"c/templates/_helpers.tpl": `{{- define "gen" -}}{{ .l }}={{ randAlphaNum 16 }};{{- end -}}
{{- define "genc" -}}{{ include "gen" . }}{{- end -}}
`,
	}
	for _, f := range c.files {
		files[fmt.Sprintf("c/templates/f%d.yaml", f.id)] = strings.Join(f.lines, "\n") + "\n"
	}
	for _, f := range c.files {
		for _, l := range f.lines {
			if _, target, ok := strings.Cut(l, `include "c/templates/`); ok {
				name := "c/templates/" + target[:strings.IndexByte(target, '"')]
				if _, ok := files[name]; !ok {
					files[name] = "empty\n"
				}
			}
		}
	}
	svcs := map[string]any{}
	for _, s := range c.svcs {
		svcs[s] = map[string]any{}
	}
	var users, accts []any
	for _, u := range c.users {
		users = append(users, u)
	}
	for _, a := range c.accts {
		accts = append(accts, map[string]any{"name": a, "role": "r"})
	}
	return files, map[string]any{"svcs": svcs, "users": users, "accts": accts}
}

func (c *fuzzChart) String() string {
	files, values := c.chart()
	var b strings.Builder
	for _, n := range helmOrder(files) {
		fmt.Fprintf(&b, "# %s\n%s", n, files[n])
	}
	fmt.Fprintf(&b, "# values %v\n", values)
	return b.String()
}

var labelled = regexp.MustCompile(`(s[0-9]+(?:-[a-z]+)*)=([A-Za-z0-9]{16});`)

// labelled renders c and returns each generated value by its label,
// failing when a label has two values, two labels share a value, or the
// render names a value as following execution order.
func (c *fuzzChart) labelled(t *testing.T) map[string]string {
	t.Helper()
	files, values := c.chart()
	g := newTestGenerator()
	out, err := render(g, files, values, true)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, c)
	}
	byLabel, byValue := map[string]string{}, map[string]string{}
	for _, text := range out {
		for _, m := range labelled.FindAllStringSubmatch(text, -1) {
			label, v := m[1], m[2]
			if old, ok := byLabel[label]; ok && old != v {
				t.Fatalf("%s has two values, %s and %s\n%s", label, old, v, c)
			}
			if other, ok := byValue[v]; ok && other != label {
				t.Fatalf("%s and %s share the value %s\n%s", label, other, v, c)
			}
			byLabel[label], byValue[v] = v, label
		}
	}
	if o := g.Ordered(); len(o) > 0 {
		t.Fatalf("Ordered() = %+v for a chart whose every call has a key\n%s", o, c)
	}
	return byLabel
}
