package renderer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/kindpath"
)

// TestHostileFixtures keeps testdata/hostile in step with the tables of
// hostile documents (go test -update rewrites it), for the tests outside
// this package that read them: the API server's dry runs in e2e/kube. For
// each of hostileHandled, handled-SLUG.input.yaml and its rendering,
// handled-SLUG.golden.yaml, a fixed point; for each of ambiguousKeys,
// ambiguous-SLUG.input.yaml and ambiguous-SLUG.error, the one line it is
// refused with (with the custom pod spec path of TestAmbiguousKeysRefused).
// The folder holds nothing else.
func TestHostileFixtures(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "hostile")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, tc := range hostileHandled() {
		base := "handled-" + slug(tc.desc)
		want = append(want, base+".input.yaml", base+".golden.yaml")
		t.Run(base, func(t *testing.T) {
			in := filepath.Join(dir, base+".input.yaml")
			checkFixture(t, in, []byte(tc.in))
			checkGolden(t, &Renderer{Resolver: newFixed()}, in, filepath.Join(dir, base+".golden.yaml"))
		})
	}
	custom, err := kindpath.ParsePodSpec("example.com/Worker=spec.pools.*.template.spec")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range ambiguousKeys {
		base := "ambiguous-" + slug(tc.desc)
		want = append(want, base+".input.yaml", base+".error")
		t.Run(base, func(t *testing.T) {
			checkFixture(t, filepath.Join(dir, base+".input.yaml"), []byte(tc.in))
			r := &Renderer{Resolver: newFixed(), PodSpecPaths: append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], custom)}
			_, err := r.Render(context.Background(), []byte(tc.in))
			if err == nil {
				t.Fatal("Render() = nil error, want it refused")
			}
			checkFixture(t, filepath.Join(dir, base+".error"), []byte(err.Error()+"\n"))
		})
	}
	slices.Sort(want)
	if dup := slices.Compact(slices.Clone(want)); len(dup) != len(want) {
		t.Fatalf("two cases have one slug: %q", want)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if _, found := slices.BinarySearch(want, de.Name()); !found {
			if *update {
				if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s is no case of the tables (go test -update removes it)", filepath.Join(dir, de.Name()))
		}
	}
}

// checkFixture checks that the file path holds b (go test -update writes
// it).
func checkFixture(t *testing.T, path string, b []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the fixture (run go test -update): %v", err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("%s is not its table's case (run go test -update)", path)
	}
}

// slug makes a file name of a case's description: its letters and digits,
// lower case, words joined by "-".
func slug(desc string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(desc), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}), "-")
}
