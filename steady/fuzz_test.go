package steady

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDiffKeep: on any two streams, Diff and Keep return or fail without
// panicking; a stream has nothing volatile with itself; Keep never mixes
// the two outputs (a kept output from Helm 4's post-renderer, which Keep
// writes anew, means the previous one field for field); a stream that
// parses is kept against itself; and a real change never hides: with a
// and b two renders, a copy of a with one field changed where a and b
// agree (a scalar equal in both, or a shared run of a string that
// differs) is never kept over b, nor kept as the previous output of a.
// Run it
// with -fuzzminimizetime 50x: minimizing a stream of this size takes the
// default minute for every new input.
func FuzzDiffKeep(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i+1 < len(files); i += 2 {
		a, b := read(f, filepath.Base(files[i])), read(f, filepath.Base(files[i+1]))
		f.Add(a, b)
	}
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"), []byte("- [x, {name: a}, {name: a}]\n"))
	f.Add([]byte("# Source: c/a.yaml\nkind: Secret\nmetadata: {name: s}\ndata: {k: a}\n---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: m}\n"),
		[]byte("kind: ConfigMap\nmetadata:\n  name: m\n  annotations: {"+FileAnnotation+": c/a.yaml}\n---\nkind: Secret\nmetadata:\n  name: s\n  annotations: {"+FileAnnotation+": c/a.yaml}\ndata: {k: b}\n"))
	// Real changes that hid behind volatile fields (TestKeep has each).
	cm := func(v string) []byte {
		return []byte("# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: " + v + ", w: fixed}\n")
	}
	for _, seed := range [][2]string{
		{`"pw=Xk2p title=shop"`, `"pw=b7Yw title=shop"`},
		{"[--seed=A, --x=1, --y=1]", "[--x=1, --y=1]"},
		{"[abc=1, user=2]", "[user=2, xyz=1]"},
		{"[{name: A, value: r1}, {name: B, value: '1'}]", "[{name: B, value: '1'}, {name: A, value: r2}]"},
		{"{a: 1, extra: {b: 1}}", "{a: 1}"},
		{"{a: 1, num: 1}", "{a: 1, num: 2}"},
		{"none", "{a: 1}"},
		{`"pw=Xk2p\ntitle=shop"`, `"pw=b7Yw\ntitle=shop"`},
		{"{t: shop}", "{t: null}"},
	} {
		f.Add(cm(seed[0]), cm(seed[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if v, err := Diff(a, a, Options{}); err == nil && len(v.Volatile) != 0 {
			t.Errorf("Diff(a, a) = %v, want nothing volatile", v.Warnings())
		}
		v, err := Diff(a, b, Options{})
		if err != nil {
			v = nil
		}
		_ = v.Warnings()
		d, err := Keep(a, b, v, Options{})
		if err != nil {
			return
		}
		if d.Kept {
			if !bytes.Equal(d.Output, a) {
				if again, err := Keep(a, d.Output, nil, Options{}); err != nil || !again.Kept {
					t.Errorf("Keep() kept, but its output is not the previous one, field for field")
				}
			}
		} else if !bytes.Equal(d.Output, b) {
			t.Errorf("Keep() did not keep, but its output is not the new one")
		}
		if len(a) > 0 {
			if d, err := Keep(a, a, nil, Options{}); err == nil && !d.Kept {
				t.Errorf("Keep(a, a) = not kept (%s)", d.Reason)
			}
		}
		if v == nil {
			return
		}
		for _, c := range realChanges(a, b) {
			if d, err := Keep(b, c.output, v, Options{}); err == nil && d.Kept {
				t.Errorf("Keep() kept the previous output over a real change at %s (%s):\n%s", c.where, d.Reason, c.output)
			}
			// As digestpin runs: the output is the input, a; the
			// previous output is a render with another value.
			if d, err := Keep(c.output, a, v, Options{}); err == nil && d.Kept {
				t.Errorf("Keep() kept a previous output with a real change at %s (%s):\n%s", c.where, d.Reason, c.output)
			}
		}
	})
}

// maxChanges bounds the real changes realChanges makes of one stream.
const maxChanges = 32

// realChange is a copy of a render with one real change.
type realChange struct {
	where  string // the document and path of the change
	output []byte
}

// realChanges returns copies of a, a render, each with one field changed
// where a and b, another render of the same input, agree: a scalar equal
// in both (by path; lists item by item when of one length, a mapping's
// keys present in both), or a run that two different strings share in
// the middle, removed (when it occurs once). Nothing when a or b does not
// parse.
func realChanges(a, b []byte) []realChange {
	sa, err := parse(a, "a")
	if err != nil {
		return nil
	}
	sb, err := parse(b, "b")
	if err != nil || matchByKind(sa, sb) != nil {
		return nil
	}
	var out []realChange
	for i, d := range sa.docs {
		e, ok := sb.byKey[d.key]
		if !ok {
			continue
		}
		x, err := d.value()
		if err != nil {
			return nil
		}
		y, err := e.value()
		if err != nil {
			return nil
		}
		// The annotation first, so that a change to it is a change.
		x, y = withFile(x, d.file), withFile(y, e.file)
		walkAgreed(nil, x, y, func(p path, set func(any), changed any) {
			if len(out) >= maxChanges {
				return
			}
			set(changed)
			defer set(nil)
			doc, err := json.Marshal(x)
			if err != nil {
				return
			}
			var buf bytes.Buffer
			for j, o := range sa.docs {
				buf.WriteString("---\n")
				switch {
				case j != i:
					buf.Write(o.raw)
				case d.file == "" && d.source != "":
					buf.WriteString("# Source: " + d.source + "\n")
					fallthrough
				default:
					buf.Write(doc)
				}
				buf.WriteString("\n")
			}
			out = append(out, realChange{where: d.where() + " " + p.String(), output: buf.Bytes()})
		})
	}
	return out
}

// withFile returns v with FileAnnotation file, as Helm 4 hands it, when
// file is not "" (value drops it).
func withFile(v any, file string) any {
	m, ok := v.(map[string]any)
	if !ok || file == "" {
		return v
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	ann, ok := meta["annotations"].(map[string]any)
	if !ok {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[FileAnnotation] = file
	return v
}

// walkAgreed calls change for each scalar field of x whose new value is
// a real change against y, another render: a field where x and y agree,
// or any field of a subtree that y does not hold (absent{}) or holds in
// another shape, which the renders never showed with another value. It
// passes a function that sets the field of x (nil: back to its own
// value) and the value that differs from it.
func walkAgreed(p path, x, y any, change func(p path, set func(any), changed any)) {
	switch xv := x.(type) {
	case map[string]any:
		yv, _ := y.(map[string]any)
		for _, k := range sortedKeys(xv) {
			yk, ok := yv[k]
			if !ok {
				yk = absent{}
			}
			if old := xv[k]; scalar(old) {
				for _, c := range agreed(old, yk) {
					change(p.key(k), func(v any) { xv[k] = orOld(v, old) }, c)
				}
				continue
			}
			walkAgreed(p.key(k), xv[k], yk, change)
		}
	case []any:
		yv, _ := y.([]any)
		for i, j := range pairItems(xv, yv) {
			var yi any = absent{}
			if j >= 0 {
				yi = yv[j]
			}
			if old := xv[i]; scalar(old) {
				for _, c := range agreed(old, yi) {
					change(p.index(i), func(v any) { xv[i] = orOld(v, old) }, c)
				}
				continue
			}
			walkAgreed(p.index(i), xv[i], yi, change)
		}
	}
}

// pairItems returns, for each item of x, the item of y that is the same
// item in another render, or -1: named items by name, lists that line up
// by position, and otherwise the equal items of a longest common
// subsequence.
func pairItems(x, y []any) []int {
	out := make([]int, len(x))
	if nx, ny := names(x), names(y); nx != nil && ny != nil {
		for n, i := range nx {
			if j, ok := ny[n]; ok {
				out[i] = j
			} else {
				out[i] = -1
			}
		}
		return out
	}
	if aligned(x, y) {
		for i := range out {
			out[i] = i
		}
		return out
	}
	for i := range out {
		out[i] = -1
	}
	kx, ky := itemKeys(x), itemKeys(y)
	// l[i][j] is the longest common subsequence of kx[i:] and ky[j:].
	l := make([][]int, len(kx)+1)
	for i := range l {
		l[i] = make([]int, len(ky)+1)
	}
	for i := len(kx) - 1; i >= 0; i-- {
		for j := len(ky) - 1; j >= 0; j-- {
			if kx[i] == ky[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	for i, j := 0, 0; i < len(kx) && j < len(ky); {
		switch {
		case kx[i] == ky[j]:
			out[i] = j
			i, j = i+1, j+1
		case l[i+1][j] >= l[i][j+1]:
			i++
		default:
			j++
		}
	}
	return out
}

func orOld(v, old any) any {
	if v == nil {
		return old
	}
	return v
}

// agreed returns values of a field that differ from x, a scalar, where
// x and y agree: another value when they are equal or y is no scalar (or
// absent{}); for two different scalars not both strings, a string (that
// is not y) instead of x, since only two numbers or two booleans allow
// others; for two different strings, x without one of the runs they
// share (when it occurs once in x), and x with a character that neither
// render had in the first gap.
func agreed(x, y any) []any {
	if x == y || !scalar(y) || y == any(absent{}) {
		switch x := x.(type) {
		case string:
			return []any{x + "~"}
		case json.Number:
			return []any{json.Number(string(x) + "1")}
		case bool:
			return []any{!x}
		default:
			return []any{"~"}
		}
	}
	xs, ok := x.(string)
	ys, ok2 := y.(string)
	if !ok || !ok2 {
		// Two scalars that differ allow others of their type when they
		// are of one type, and nothing but themselves otherwise.
		var other any = "~"
		if xs, ok := x.(string); ok {
			other = xs + "~"
		}
		if other == y {
			return nil
		}
		return []any{other}
	}
	var out []any
	t := newTemplate(xs, ys)
	for _, lit := range t.lits {
		if lit == "" || strings.Count(xs, lit) != 1 || strings.Contains(lit, "~") {
			continue
		}
		out = append(out, strings.Replace(xs, lit, strings.Repeat("~", len(lit)), 1))
		break
	}
	if len(t.gaps) > 0 && !strings.Contains(t.gaps[0][0]+t.gaps[0][1], "\x01") {
		first := t.lits[0]
		out = append(out, first+"\x01"+xs[len(first):])
	}
	return out
}
