package detgen

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testSeed is the fixed seed of the golden values.
var testSeed = func() Seed {
	var s Seed
	for i := range s {
		s[i] = byte(i + 1)
	}
	return s
}()

var testRelease = Release{Name: "demo", Namespace: "apps"}

// testNow is the clock of the golden values.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func newTestGenerator() *Generator { return New(testSeed, testRelease, fixedClock(testNow)) }

// helmOrder is the order Helm 4's engine parses and executes a chart's
// files in (engine.sortTemplates): deeper paths first, then reverse
// lexical order.
func helmOrder(files map[string]string) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		ca, cb := strings.Count(a, "/"), strings.Count(b, "/")
		if ca != cb {
			return ca > cb
		}
		return a > b
	})
	return names
}

// render executes a chart's template files as Helm 4's engine does: all
// parsed into one set in Helm's order, each non-partial file executed in
// that order, with sprig's functions, Helm's include and tpl, and g's
// functions copied over them last (CustomTemplateFuncs). rewrite runs
// Rewrite on each file first.
func render(g *Generator, files map[string]string, values map[string]any, rewrite bool) (map[string]string, error) {
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	root := template.New("gotpl").Option("missingkey=zero")
	funcs["include"] = func(name string, data any) (string, error) {
		var b strings.Builder
		err := root.ExecuteTemplate(&b, name, data)
		return b.String(), err
	}
	funcs["tpl"] = func(text string, data any) (string, error) {
		c, err := root.Clone()
		if err != nil {
			return "", err
		}
		c, err = c.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var b strings.Builder
		err = c.Execute(&b, data)
		return b.String(), err
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]any, error) { return map[string]any{}, nil }
	if g != nil {
		maps.Copy(funcs, g.Funcs())
	}
	root.Funcs(funcs)
	order := helmOrder(files)
	for _, name := range order {
		src := files[name]
		if rewrite {
			var err error
			if src, err = Rewrite(name, src); err != nil {
				return nil, err
			}
		}
		if _, err := root.New(name).Parse(src); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
	}
	out := map[string]string{}
	for _, name := range order {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		var b strings.Builder
		if err := root.ExecuteTemplate(&b, name, map[string]any{"Values": values, "Template": map[string]any{"Name": name}}); err != nil {
			return nil, err
		}
		out[name] = b.String()
	}
	return out, nil
}

// mustRender is render with a test failure for an error.
func mustRender(t testing.TB, g *Generator, files map[string]string, values map[string]any) map[string]string {
	t.Helper()
	out, err := render(g, files, values, true)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

// golden compares got with testdata/name, writing it under -update, and
// fails when the file does not hold exactly got.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (-update to accept):\n--- want\n%s\n--- got\n%s", p, want, got)
	}
}
