package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/renderer"
)

// TestLoadExample loads the example file, which the README shows.
func TestLoadExample(t *testing.T) {
	path := filepath.Join("testdata", "example.yaml")
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s) = %v", path, err)
	}
	want := Config{
		PodSpecPaths:  []renderer.PodSpecPath{{Group: "example.com", Kind: "Worker", Fields: []string{"spec", "pools", "*", "template", "spec"}}},
		ImagePaths:    []renderer.ImagePath{{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "runnerImage"}}, {Group: "example.com", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool", "image"}}},
		ChecksumPaths: []renderer.ChecksumPath{{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "jobs", "*"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%s) (-want +got):\n%s", path, diff)
	}
	example, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(example)+"```\n") {
		t.Errorf("README.md does not show %s as it is", path)
	}
}

func TestParse(t *testing.T) {
	const head = "apiVersion: digestpin.dev/v1alpha1\nkind: Config\n"
	for _, tc := range []struct {
		desc, in string
		want     Config
		err      string
	}{
		{desc: "the version alone", in: head},
		{desc: "empty lists", in: head + "podSpecPaths: []\nimagePaths:\nchecksumPaths: []\n"},
		{desc: "a checksum on the object", in: head + "checksumPaths: [Runner=.]\n", want: Config{ChecksumPaths: []renderer.ChecksumPath{{Group: "*", Kind: "Runner"}}}},
		{desc: "an empty file", in: "# nothing\n", err: "digestpin.yaml: empty: want apiVersion: digestpin.dev/v1alpha1 and kind: Config"},
		{desc: "malformed", in: head + "imagePaths: [\n", err: "digestpin.yaml: malformed YAML: line 3: "},
		{desc: "not a mapping", in: "- a\n", err: "digestpin.yaml, line 1: want a mapping with apiVersion: digestpin.dev/v1alpha1 and kind: Config"},
		{desc: "two documents", in: head + "---\n" + head, err: "digestpin.yaml, line 3: a second YAML document"},
		{desc: "no apiVersion", in: "kind: Config\n", err: "digestpin.yaml, line 1: no apiVersion: want apiVersion: digestpin.dev/v1alpha1"},
		{desc: "another version", in: "apiVersion: digestpin.dev/v1\nkind: Config\n", err: `digestpin.yaml, line 1: apiVersion is "digestpin.dev/v1", want digestpin.dev/v1alpha1`},
		{desc: "another kind", in: "apiVersion: digestpin.dev/v1alpha1\nkind: Configuration\n", err: `digestpin.yaml, line 2: kind is "Configuration", want Config`},
		{desc: "a numeric kind", in: "apiVersion: digestpin.dev/v1alpha1\nkind: 1\n", err: `digestpin.yaml, line 2: kind is int 1, want Config`},
		{desc: "an unknown key", in: head + "imagePath:\n- Runner=spec.image\n", err: `digestpin.yaml, line 3: unknown key "imagePath" (keys: apiVersion, kind, podSpecPaths, imagePaths, checksumPaths)`},
		{desc: "a key given twice", in: head + "imagePaths: []\nimagePaths: []\n", err: "digestpin.yaml, line 4: imagePaths is given twice"},
		{desc: "a key that is no string", in: head + "1: []\n", err: "digestpin.yaml, line 3: a key that is not a string"},
		{desc: "a mapping for a list", in: head + "imagePaths:\n  Runner: spec.image\n", err: "digestpin.yaml, line 4: imagePaths: want a list of strings, found a mapping"},
		{desc: "a number in a list", in: head + "podSpecPaths:\n- 3\n", err: "digestpin.yaml, line 4: podSpecPaths: want a string, found int 3"},
		{desc: "a bad image path", in: head + "imagePaths:\n- Runner=spec.image\n- Runner=spec.images.*\n", err: `digestpin.yaml, line 5: imagePaths: parsing image path "Runner=spec.images.*": the last field must name the image field, not "*"`},
		{desc: "a bad pod spec path", in: head + "podSpecPaths: [Worker]\n", err: `digestpin.yaml, line 3: podSpecPaths: parsing pod spec path "Worker": want KIND=FIELD.PATH`},
		{desc: "a bad checksum path", in: head + "checksumPaths:\n- a/b/C=spec\n", err: `digestpin.yaml, line 4: checksumPaths: parsing checksum path "a/b/C=spec": bad kind "a/b/C"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Parse("digestpin.yaml", []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("Parse() = %+v, %v, want an error starting %q", got, err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("Parse() error = %q, want one line", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ".") == strings.Join(b, ".") })); diff != "" {
				t.Errorf("Parse() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadRefusesWhatIsNoFile checks that Load reads regular files only.
func TestLoadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{dir, filepath.Join(dir, "missing.yaml")} {
		if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), "reading "+path+": ") {
			t.Errorf("Load(%s) = %v, want a reading error", path, err)
		}
	}
}
