package detgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"
)

// TestRewriteGolden: the rewritten form of realistic templates, checked
// against testdata/rewrite/*.golden; rewriting the golden output again
// changes nothing.
func TestRewriteGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/rewrite/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden") {
			continue
		}
		n++
		base := filepath.Base(in)
		t.Run(base, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			name := "mychart/templates/" + base
			got, err := Rewrite(name, string(src))
			if err != nil {
				t.Fatalf("Rewrite(%s): %v", name, err)
			}
			golden(t, "rewrite/"+base+".golden", got)
			if strings.Count(got, "\n") != strings.Count(string(src), "\n") {
				t.Errorf("Rewrite(%s) changed the number of lines", name)
			}
			again, err := Rewrite(name, got)
			if err != nil || again != got {
				t.Errorf("Rewrite(Rewrite(%s)) changed the output again (err %v):\n%s", name, err, again)
			}
		})
	}
	if n < 3 {
		t.Fatalf("found %d inputs in testdata/rewrite", n)
	}
}

// TestRewriteCases: what is rewritten and what is left, case by case.
func TestRewriteCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		name    string
		src     string
		located []string // functions whose located form must appear, in order
		keep    []string // text that must survive as is
		marker  bool
	}{
		{desc: "call", name: "c/templates/a.yaml", src: `{{ randAlphaNum 16 }}`, located: []string{"randAlphaNum"}, marker: true},
		{desc: "pipeline", name: "c/templates/a.yaml", src: `{{ 16 | randAlphaNum | b64enc }}`, located: []string{"randAlphaNum"}, keep: []string{"16 | ", " 16 |"[:0], "| b64enc"}, marker: true},
		{desc: "trim marker first", name: "c/templates/a.yaml", src: "\n\n{{- randAlpha 3 -}}\n", located: []string{"randAlpha"}, keep: []string{"\n\n{{- "}, marker: true},
		{desc: "comment", name: "c/templates/a.yaml", src: `{{/* randAlphaNum 16 */}}x`, keep: []string{`{{/* randAlphaNum 16 */}}x`}, marker: true},
		{desc: "raw string", name: "c/templates/a.yaml", src: "{{ `randAlphaNum 16` }}", keep: []string{"{{ `randAlphaNum 16` }}"}, marker: true},
		{desc: "quoted string", name: "c/templates/a.yaml", src: `{{ "genCA" }}`, keep: []string{`{{ "genCA" }}`}, marker: true},
		{desc: "field named like a function", name: "c/templates/a.yaml", src: `{{ .Values.genCA }}{{ .now }}`, keep: []string{`{{ .Values.genCA }}{{ .now }}`}, marker: true},
		{desc: "variable named like a function", name: "c/templates/a.yaml", src: `{{ $now := 1 }}{{ $now }}`, keep: []string{`{{ $now := 1 }}{{ $now }}`}, marker: true},
		{desc: "niladic in argument", name: "c/templates/a.yaml", src: `{{ printf "%s" uuidv4 }}`, located: []string{"uuidv4"}, keep: []string{`(_dp_uuidv4 "`}, marker: true},
		{desc: "chain", name: "c/templates/a.yaml", src: `{{ now.Year }}`, located: []string{"now"}, keep: []string{`(_dp_now "`, `).Year`}, marker: true},
		{desc: "parenthesised", name: "c/templates/a.yaml", src: `{{ (genCA "x" 1).Cert }}`, located: []string{"genCA"}, keep: []string{`(_dp_genCA "`, `).Cert`}, marker: true},
		{desc: "define in a non-partial file", name: "c/templates/a.yaml", src: `{{ define "d" }}{{ uuidv4 }}{{ end }}x`, located: []string{"uuidv4"}, keep: []string{`|d"`}, marker: true},
		{desc: "partial", name: "c/templates/_helpers.tpl", src: `{{ define "d" }}{{ uuidv4 }}{{ end }}`, located: []string{"uuidv4"}},
		{desc: "subchart partial", name: "c/charts/sub/templates/_x.tpl", src: `{{ define "e" }}{{ now }}{{ end }}`, located: []string{"now"}},
		{desc: "unrelated functions", name: "c/templates/a.yaml", src: `{{ include "x" . | nindent 2 }}{{ derivePassword 1 "long" "p" "u" "s" }}{{ decryptAES "k" "v" }}`, keep: []string{`{{ include "x" . | nindent 2 }}{{ derivePassword 1 "long" "p" "u" "s" }}{{ decryptAES "k" "v" }}`}, marker: true},
		{desc: "tpl string", name: "c/templates/a.yaml", src: `{{ tpl "{{ randAlpha 2 }}" . }}`, keep: []string{`{{ tpl "{{ randAlpha 2 }}" . }}`}, marker: true},
		{desc: "if else range with", name: "c/templates/a.yaml", src: `{{ if randInt 0 2 }}{{ else if now }}{{ end }}{{ range until (randInt 1 3) }}{{ end }}{{ with uuidv4 }}{{ end }}`, located: []string{"randInt", "now", "randInt", "uuidv4"}, marker: true},
		{desc: "template argument", name: "c/templates/a.yaml", src: `{{ define "t" }}{{ . }}{{ end }}{{ template "t" randAlpha 3 }}`, located: []string{"randAlpha"}, marker: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Rewrite(tc.name, tc.src)
			if err != nil {
				t.Fatalf("Rewrite(%q): %v", tc.src, err)
			}
			if has := strings.HasPrefix(got, "{{_dp_begin "); has != tc.marker {
				t.Errorf("Rewrite(%q) = %q: begin marker %v, want %v", tc.src, got, has, tc.marker)
			}
			rest := got
			for _, fn := range tc.located {
				i := strings.Index(rest, LocatedName(fn)+` "v1|`)
				if i < 0 {
					t.Fatalf("Rewrite(%q) = %q, want %s located next", tc.src, got, fn)
				}
				rest = rest[i+1:]
			}
			if n := strings.Count(got, `"v1|`); n != len(tc.located) {
				t.Errorf("Rewrite(%q) = %q locates %d calls, want %d", tc.src, got, n, len(tc.located))
			}
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Errorf("Rewrite(%q) = %q, want it to contain %q", tc.src, got, k)
				}
			}
			if strings.Count(got, "\n") != strings.Count(tc.src, "\n") {
				t.Errorf("Rewrite(%q) changed the number of lines", tc.src)
			}
			if _, err := parseSkip(tc.name, got); err != nil {
				t.Errorf("Rewrite(%q) = %q does not parse: %v", tc.src, got, err)
			}
		})
	}
}

// TestRewriteParseError: a template that does not parse is an error naming
// the file and line, as Helm's would be.
func TestRewriteParseError(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"a\n{{ if }}", "{{ randAlphaNum 16 ", "{{ end }}", "{{ define \"x\" }}"} {
		_, err := Rewrite("mychart/templates/bad.yaml", src)
		if err == nil || !strings.Contains(err.Error(), "mychart/templates/bad.yaml") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Rewrite(%q) = %v, want a one-line error naming the file", src, err)
		}
	}
}

// TestRewriteIdentityIgnoresLineNumber: the identity literal carries the
// line for reports, but the derivation key (the line's hash and template)
// is the same when lines are added above.
func TestRewriteIdentityIgnoresLineNumber(t *testing.T) {
	t.Parallel()
	a, _ := Rewrite("c/templates/a.yaml", "{{ uuidv4 }}")
	b, _ := Rewrite("c/templates/a.yaml", "\n\n\n{{ uuidv4 }}")
	sa, sb := siteOf(t, a), siteOf(t, b)
	if sa.line == sb.line || sa.lineKey != sb.lineKey || sa.enclosing != sb.enclosing {
		t.Errorf("sites %+v and %+v: want other lines, same key", sa, sb)
	}
}

func siteOf(t *testing.T, rewritten string) site {
	t.Helper()
	_, after, ok := strings.Cut(rewritten, `_dp_uuidv4 "`)
	if !ok {
		t.Fatalf("no located uuidv4 in %q", rewritten)
	}
	lit, _, _ := strings.Cut(after, `"`)
	s, err := parseSite(lit)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parseSkip(name, src string) (map[string]*parse.Tree, error) {
	trees := map[string]*parse.Tree{}
	tr := parse.New(name)
	tr.Mode = parse.SkipFuncCheck
	_, err := tr.Parse(src, "", "", trees)
	return trees, err
}

// FuzzRewrite: Rewrite never panics; what parses stays parseable with the
// same number of lines; a source without generator calls executes to the
// same text rewritten as not.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		"", "x", "{{ randAlphaNum 16 }}", "{{- /* c */ -}}\n{{ now.Year }}", "{{ `randAlpha` }}",
		`{{ define "a" }}{{ uuidv4 }}{{ end }}{{ template "a" }}`, "{{ printf \"%d\" (len \"abc\") }}\n{{ if eq 1 1 }}y{{ end }}",
		"{{ $x := 1 }}{{ range $i := .L }}{{ $i }}{{ end }}", "{{ 3 | printf \"%d\" }}", "{{ genCA \"x\" 3 | print }}",
		"{{ block \"b\" . }}{{ shuffle \"ab\" }}{{ end }}", "{{ with $x := 2 }}{{ $x }}{{ else }}n{{ end }}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		const name = "c/templates/f.yaml"
		if _, err := parseSkip(name, src); err != nil {
			if _, rerr := Rewrite(name, src); rerr == nil {
				t.Fatalf("Rewrite(%q) accepted what does not parse: %v", src, err)
			}
			return
		}
		got, err := Rewrite(name, src)
		if err != nil {
			t.Fatalf("Rewrite(%q): %v", src, err)
		}
		if _, err := parseSkip(name, got); err != nil {
			t.Fatalf("Rewrite(%q) = %q does not parse: %v", src, got, err)
		}
		if strings.Count(got, "\n") != strings.Count(src, "\n") {
			t.Fatalf("Rewrite(%q) = %q changed the number of lines", src, got)
		}
		if got != beginMarker(name)+src && !strings.HasPrefix(src, beginMarker(name)) {
			return // it has generator calls: their values differ by design
		}
		// Generator-free: the text must be the same, with only Go's
		// builtins and the generator's functions available.
		want, werr := execOnce(nil, src)
		have, herr := execOnce(newTestGenerator(), got)
		if (werr == nil) != (herr == nil) || want != have {
			t.Fatalf("executing %q: original %q (%v), rewritten %q (%v)", src, want, werr, have, herr)
		}
	})
}

// execOnce parses and executes src with only the builtins and, when g is
// set, its functions, with a small data value.
func execOnce(g *Generator, src string) (string, error) {
	tm := template.New("c/templates/f.yaml")
	if g != nil {
		tm.Funcs(g.Funcs())
	}
	if _, err := tm.Parse(src); err != nil {
		return "", err
	}
	var b strings.Builder
	err := tm.Execute(&b, map[string]any{"L": []int{1, 2}, "S": "s"})
	return b.String(), err
}

func TestCleanMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`executing "x" at <_dp_genCA "v1|6|173563b477aebea4709bcabe2ebf203d|webhook.certs" (printf "%s-ca" .Release.Name) 0>: error calling _dp_genCA: bad`,
			`executing "x" at <genCA (printf "%s-ca" .Release.Name) 0>: error calling genCA: bad`},
		{`<_dp_now "v1|3|ab|a \"quoted\" name">`, `<now>`},
		{`no identity here: "v1|x"`, `no identity here: "v1|x"`},
	} {
		if got := CleanMessage(tc.in); got != tc.want {
			t.Errorf("CleanMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
