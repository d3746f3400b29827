package detgen

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"
)

// TestRewriteGolden: the rewritten form of realistic templates, checked
// against testdata/rewrite/*.golden; rewriting the golden output again is
// refused.
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
			// The located forms are not the chart language: a source
			// that names one is refused, as Helm refuses it.
			if again, err := Rewrite(name, got); got != string(src) && (err == nil || !strings.Contains(err.Error(), "not defined")) {
				t.Errorf("Rewrite(Rewrite(%s)) = %v, want the located names refused as undefined functions:\n%s", name, err, again)
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
		{desc: "unrelated functions", name: "c/templates/a.yaml", src: `{{ include "x" . | nindent 2 }}{{ derivePassword 1 "long" "p" "u" "s" }}{{ decryptAES "k" "v" }}`, keep: []string{`(include "x" .) | nindent 2 }}{{ derivePassword 1 "long" "p" "u" "s" }}{{ decryptAES "k" "v" }}`}, marker: true},
		{desc: "include", name: "c/templates/a.yaml", src: `{{ include "x" . }}`, keep: []string{`{{ _dp_pop (_dp_push "v2|1|`, `|c/templates/a.yaml") (include "x" .) }}`}, marker: true},
		{desc: "include piped", name: "c/templates/a.yaml", src: `{{ . | include "x" | upper }}`, keep: []string{`{{ . | _dp_pushv "v2|1|`, `|c/templates/a.yaml" | include "x" | _dp_pop1 | upper }}`}, marker: true},
		{desc: "include of an include", name: "c/templates/a.yaml", src: `{{ include (include "n" .) (include "d" .) }}`, keep: []string{`(include (_dp_pop (_dp_push "v2|1|`, `(include "n" .)) (_dp_pop (_dp_push "v2|1|`, `(include "d" .))) }}`}, marker: true},
		{desc: "tpl string", name: "c/templates/a.yaml", src: `{{ tpl "{{ randAlpha 2 }}" . }}`, keep: []string{`(tpl (_dp_tplsrc "{{ randAlpha 2 }}") .) }}`}, marker: true},
		{desc: "template trimming", name: "c/templates/a.yaml", src: "{{- template \"t\" . -}}\n  x", keep: []string{`{{- template "t" (_dp_pushv "v2|1|`, `|c/templates/a.yaml" (.)) -}}{{_dp_pop0 -}}` + "\n  x"}, marker: true},
		{desc: "template without data", name: "c/templates/a.yaml", src: `{{ template "t" }}x`, keep: []string{`{{ template "t" (_dp_pushv "v2|1|`, `|c/templates/a.yaml" nil) }}{{_dp_pop0}}x`}, marker: true},
		{desc: "block", name: "c/templates/a.yaml", src: `{{ block "b" . }}{{ uuidv4 }}{{ end }}`, located: []string{"uuidv4"}, keep: []string{`{{ block "b" . }}{{ _dp_uuidv4 "v2|1|`}, marker: true},
		{desc: "range without variables", name: "c/templates/a.yaml", src: `{{ range .L }}{{ uuidv4 }}{{ end }}`, located: []string{"uuidv4"}, keep: []string{`{{ range $_dp_k9, $_dp_v9 := _dp_range (.L) }}{{_dp_iter "v2|1|`, `|c/templates/a.yaml" 9 $_dp_k9 $_dp_v9}}{{ _dp_uuidv4 "v2|1|`, `|9|c/templates/a.yaml" }}`}, marker: true},
		{desc: "range with an element", name: "c/templates/a.yaml", src: `{{- range $v := .L -}}{{ $v }}{{- end }}`, keep: []string{`{{- range $_dp_k10, $v := _dp_range (.L) -}}{{_dp_iter "v2|1|`, `" 10 $_dp_k10 $v}}{{ $v }}`}, marker: true},
		{desc: "range with a key and an element", name: "c/templates/a.yaml", src: "{{ range $k, $v := .M | default dict }}\n  {{- $v }}{{ end }}", keep: []string{"{{ range $k, $v := .M | default dict }}\n  {{- _dp_iter \"v2|1|", "\" 9 $k $v}}{{- $v }}"}, marker: true},
		{desc: "range assigning", name: "c/templates/a.yaml", src: `{{ $v := 0 }}{{ range $v = .L }}{{ end }}`, keep: []string{`{{ range $v = .L }}{{_dp_iter "v2|1|`, `" 22 nil .}}{{ end }}`}, marker: true},
		{desc: "nested ranges", name: "c/templates/a.yaml", src: `{{ range .A }}{{ range .B }}{{ uuidv4 }}{{ end }}{{ end }}`, located: []string{"uuidv4"}, keep: []string{`|9.23|c/templates/a.yaml" }}`}, marker: true},
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
				i := strings.Index(rest, LocatedName(fn)+` "v2|`)
				if i < 0 {
					t.Fatalf("Rewrite(%q) = %q, want %s located next", tc.src, got, fn)
				}
				rest = rest[i+1:]
			}
			if n := len(locatedCall.FindAllString(got, -1)); n != len(tc.located) {
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

// locatedCall is a located generator call (not the stack's bookkeeping).
var locatedCall = func() *regexp.Regexp {
	names := make([]string, 0, len(rewritten))
	for n := range rewritten {
		names = append(names, regexp.QuoteMeta(LocatedName(n)))
	}
	return regexp.MustCompile(`(?:` + strings.Join(names, "|") + `) "v2\|`)
}()

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
		"{{- range $k, $v := .L -}}\n  {{- $k }}={{ $v -}}\n{{ end }}", "{{ range 3 }}{{ . }}{{ else }}none{{ end }}",
		"{{ range $i := 2 }}{{ if eq $i 1 }}{{ break }}{{ end }}{{ $i }}{{ continue }}x{{ end }}", "{{ range .L }}\n  {{- . }}{{ end }}",
		"{{ define \"t\" }}[{{ . }}]{{ end }}{{- template \"t\" .S -}}\n  after {{ template \"t\" }} {{ template \"t\" .L | len }}",
		"{{ $v := 0 }}{{ range $v = .L }}{{ $v }}{{ end }}{{ $v }}", "{{ range .Missing }}x{{ else }}empty{{ end }}",
		"{{ define \"d\" }}<{{ . }}>{{ end }}{{ range $k, $v := .M }}{{ include \"d\" $k | upper }}{{ . | include \"d\" }}{{ end }}",
		"{{ tpl \"{{ range .L }}{{ . }}{{ end }}\" . }}{{ tpl (print \"{{ .\" \"S }}\") . | printf \"%q\" }}",
		"{{range .L}}{{- else}}none{{end}}{{ range .L -}}\n\t{{ . }}\n{{- end }}", "{{ if and false (include \"x\" .) }}{{ end }}ok",
		"{{ define \"r\" }}{{ if . }}{{ include \"r\" (slice . 1) }}{{ index . 0 }}{{ end }}{{ end }}{{ include \"r\" .L }}",
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
		if locatedCall.MatchString(got) {
			return // it has generator calls: their values differ by design
		}
		// Generator-free: the text must be the same, with only Go's
		// builtins and the generator's functions available, whatever
		// ranges, template actions and trim markers it has.
		want, werr := execOnce(nil, src)
		have, herr := execOnce(newTestGenerator(), got)
		if (werr == nil) != (herr == nil) || want != have {
			t.Fatalf("executing %q: original %q (%v), rewritten %q (%v)", src, want, werr, have, herr)
		}
	})
}

// execOnce parses and executes src with only the builtins, an include and
// a tpl as Helm's, and, when g is set, its functions, with a small data
// value.
func execOnce(g *Generator, src string) (string, error) {
	tm := template.New("c/templates/f.yaml")
	tm.Funcs(template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := tm.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"tpl": func(text string, data any) (string, error) {
			c, err := tm.Clone()
			if err != nil {
				return "", err
			}
			if c, err = c.New("tpl").Parse(text); err != nil {
				return "", err
			}
			var b strings.Builder
			err = c.Execute(&b, data)
			return b.String(), err
		},
	})
	if g != nil {
		tm.Funcs(g.Funcs())
	}
	if _, err := tm.Parse(src); err != nil {
		return "", err
	}
	var b strings.Builder
	err := tm.Execute(&b, map[string]any{"L": []int{1, 2}, "S": "s", "M": map[string]any{"b": 2, "a": []any{1}}})
	return b.String(), err
}

func TestCleanMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`executing "x" at <_dp_genCA "v2|6|173563b477aebea4709bcabe2ebf203d||webhook.certs" (printf "%s-ca" .Release.Name) 0>: error calling _dp_genCA: bad`,
			`executing "x" at <genCA (printf "%s-ca" .Release.Name) 0>: error calling genCA: bad`},
		{`<_dp_now "v2|3|ab|4.17|a \"quoted\" name">`, `<now>`},
		{`no identity here: "v2|x"`, `no identity here: "v2|x"`},
		{`at <_dp_pop (_dp_push "v2|3|ab|4|c/templates/a.yaml") (include "x" (dict "a" (list 1)))>: boom`, `at <include "x" (dict "a" (list 1))>: boom`},
		{`at <tpl (_dp_tplsrc .Values.t) $>: boom`, `at <tpl .Values.t $>: boom`},
		{`range $_dp_k9, $_dp_v9 := _dp_range (.L | default (list 1))`, `range .L | default (list 1)`},
		{`range $_dp_k9, $v := _dp_range (.L)`, `range $v := .L`},
		{`{{ . | _dp_pushv "v2|1|ab||a" | include "x" | _dp_pop1 | upper }}`, `{{ . | include "x" | upper }}`},
		{`{{template "t" (_dp_pushv "v2|1|ab||a" (.Values.x | first))}}{{_dp_pop0 -}}`, `{{template "t" .Values.x | first}}`},
		{`{{template "t" (_dp_pushv "v2|1|ab||a" nil)}}{{_dp_pop0}}`, `{{template "t"}}`},
	} {
		if got := CleanMessage(tc.in); got != tc.want {
			t.Errorf("CleanMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
