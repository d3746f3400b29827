package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/kindpath"
)

// TestLoadExample loads the example file, which docs/config.md shows.
func TestLoadExample(t *testing.T) {
	path := filepath.Join("testdata", "example.yaml")
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s) = %v", path, err)
	}
	want := Config{
		Name:          path,
		PodSpecPaths:  []kindpath.PodSpec{{Group: "example.com", Kind: "Worker", Fields: []string{"spec", "pools", "*", "template", "spec"}}},
		ImagePaths:    []kindpath.Image{{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "runnerImage"}}, {Group: "example.com", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool", "image"}}},
		ChecksumPaths: []kindpath.Checksum{{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "jobs", "*"}}},
		TagPolicies:   []Entry{{"registry.example/shop/web=semver:~1.4", 19}},
		TagIgnore:     []Entry{{"registry.example/shop/web=-rc", 21}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%s) (-want +got):\n%s", path, diff)
	}
	example, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(example)+"```\n") {
		t.Errorf("docs/config.md does not show %s as it is", path)
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
		{desc: "a checksum on the object", in: head + "checksumPaths: [Runner=.]\n", want: Config{ChecksumPaths: []kindpath.Checksum{{Group: "*", Kind: "Runner"}}}},
		{desc: "an empty file", in: "# nothing\n", err: "digestpin.yaml: empty: want apiVersion: digestpin.dev/v1alpha1 and kind: Config"},
		{desc: "malformed", in: head + "imagePaths: [\n", err: "digestpin.yaml: malformed YAML: line 3: "},
		{desc: "not a mapping", in: "- a\n", err: "digestpin.yaml, line 1: want a mapping with apiVersion: digestpin.dev/v1alpha1 and kind: Config"},
		{desc: "two documents", in: head + "---\n" + head, err: "digestpin.yaml, line 3: a second YAML document"},
		{desc: "no apiVersion", in: "kind: Config\n", err: "digestpin.yaml, line 1: no apiVersion: want apiVersion: digestpin.dev/v1alpha1"},
		{desc: "another version", in: "apiVersion: digestpin.dev/v1\nkind: Config\n", err: `digestpin.yaml, line 1: apiVersion is "digestpin.dev/v1", want digestpin.dev/v1alpha1`},
		{desc: "another kind", in: "apiVersion: digestpin.dev/v1alpha1\nkind: Configuration\n", err: `digestpin.yaml, line 2: kind is "Configuration", want Config`},
		{desc: "a numeric kind", in: "apiVersion: digestpin.dev/v1alpha1\nkind: 1\n", err: `digestpin.yaml, line 2: kind is int 1, want Config`},
		{desc: "an unknown key", in: head + "imagePath:\n- Runner=spec.image\n", err: `digestpin.yaml, line 3: unknown key "imagePath" (keys: apiVersion, kind, podSpecPaths, imagePaths, checksumPaths, tagPolicies, tagAllow, tagIgnore, verify, trustedRoot, minAge)`},
		{desc: "a key given twice", in: head + "imagePaths: []\nimagePaths: []\n", err: "digestpin.yaml, line 4: imagePaths is given twice"},
		{desc: "a key that is no string", in: head + "1: []\n", err: "digestpin.yaml, line 3: a key that is not a string"},
		{desc: "a mapping for a list", in: head + "imagePaths:\n  Runner: spec.image\n", err: "digestpin.yaml, line 4: imagePaths: want a list of strings, found a mapping"},
		{desc: "a number in a list", in: head + "podSpecPaths:\n- 3\n", err: "digestpin.yaml, line 4: podSpecPaths: want a string, found int 3"},
		{desc: "a bad image path", in: head + "imagePaths:\n- Runner=spec.image\n- Runner=spec.images.*\n", err: `digestpin.yaml, line 5: imagePaths: parsing image path "Runner=spec.images.*": the last field must name the image field, not "*"`},
		{desc: "a bad pod spec path", in: head + "podSpecPaths: [Worker]\n", err: `digestpin.yaml, line 3: podSpecPaths: parsing pod spec path "Worker": want KIND=FIELD.PATH`},
		{
			desc: "tag policies and filters, with their lines",
			in:   head + "tagPolicies:\n- shop/web=semver:~1.4\n- shop/api=latest\ntagAllow: ['shop/web=^1']\ntagIgnore: []\n",
			want: Config{TagPolicies: []Entry{{"shop/web=semver:~1.4", 4}, {"shop/api=latest", 5}}, TagAllow: []Entry{{"shop/web=^1", 6}}},
		},
		{desc: "a tag policy that is no string", in: head + "tagPolicies:\n- {shop/web: latest}\n", err: "digestpin.yaml, line 4: tagPolicies: want a string, found a mapping"},
		{desc: "a tag filter that is no list", in: head + "tagIgnore: shop/web=x\n", err: `digestpin.yaml, line 3: tagIgnore: want a list of strings, found "shop/web=x"`},
		{desc: "a merge key", in: head + "<<: {imagePaths: [Runner=spec.image]}\n", err: "digestpin.yaml, line 3: a merge key (<<): write the keys out"},
		{desc: "a merge key holding the version", in: "<<: {apiVersion: digestpin.dev/v1alpha1, kind: Config}\n", err: "digestpin.yaml, line 1: a merge key (<<)"},
		{desc: "a list that is an alias", in: head + "imagePaths: &l [Runner=spec.image]\npodSpecPaths: *l\n", err: "digestpin.yaml, line 4: podSpecPaths: want a list of strings, found an alias (*l)"},
		{desc: "an item that is an alias", in: head + "imagePaths: [&a Runner=spec.image, *a]\n", err: "digestpin.yaml, line 3: imagePaths: want a string, found an alias (*a)"},
		{desc: "a tagged item", in: head + "imagePaths: [!custom Runner=spec.image]\n", err: "digestpin.yaml, line 3: imagePaths: want a string, found !custom Runner=spec.image"},
		{desc: "an empty item", in: head + "imagePaths:\n- \n", err: "digestpin.yaml, line 4: imagePaths: want a string, found empty"},
		{desc: "a second document after an end marker", in: head + "...\n---\n", err: "digestpin.yaml, line 4: a second YAML document"},
		{desc: "a byte order mark and a directive", in: "\ufeff%YAML 1.1\n---\n" + head + "imagePaths: [Runner=spec.image]\n", want: Config{ImagePaths: []kindpath.Image{{Group: "*", Kind: "Runner", Fields: []string{"spec", "image"}}}}},
		{desc: "a version as a group", in: head + "imagePaths: [v1/Pod=spec.x]\n", err: `digestpin.yaml, line 3: imagePaths: parsing image path "v1/Pod=spec.x": "v1" is an API version, not a group`},
		{desc: "image paths with selectors", in: head + "imagePaths:\n- apps/Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE].value\n- Runner=spec.args[flag=--tool-image]\n", want: Config{ImagePaths: []kindpath.Image{
			{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "env[name=AGENT_IMAGE]", "value"}},
			{Group: "*", Kind: "Runner", Fields: []string{"spec", "args[flag=--tool-image]"}},
		}}},
		{desc: "a malformed selector", in: head + "imagePaths:\n- Runner=spec.env[name=X.value\n", err: `digestpin.yaml, line 4: imagePaths: parsing image path "Runner=spec.env[name=X.value": malformed selector "env[name=X.value"`},
		{desc: "a flag that matches no argument", in: head + "imagePaths:\n- Runner=spec.args[flag=tool-image]\n", err: `digestpin.yaml, line 4: imagePaths: parsing image path "Runner=spec.args[flag=tool-image]": the flag "tool-image" of args[flag=tool-image] matches no argument`},
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
			tc.want.Name = "digestpin.yaml"
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ".") == strings.Join(b, ".") })); diff != "" {
				t.Errorf("Parse() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadRefusesWhatIsNoFile checks that Load reads regular files only
// (through a symbolic link too), of at most MaxSize bytes.
func TestLoadRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	head := "apiVersion: digestpin.dev/v1alpha1\nkind: Config\n"
	if err := os.WriteFile(big, []byte(head+"# "+strings.Repeat("x", MaxSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	linkToDir := filepath.Join(dir, "dir.yaml")
	if err := os.Symlink(dir, linkToDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{dir, "not a regular file"},
		{linkToDir, "not a regular file"},
		{fifo, "not a regular file"},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
		{big, "larger than 1 MiB"},
	} {
		if _, err := Load(tc.path); err == nil || !strings.HasPrefix(err.Error(), "reading "+tc.path+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want a reading error with %q", tc.path, err, tc.want)
		}
	}
	// A link to a regular file is that file; an empty file declares
	// nothing, and says what it lacks.
	good, empty := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(good, []byte(head+"imagePaths: [Runner=spec.image]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(link); err != nil || len(c.ImagePaths) != 1 {
		t.Errorf("Load(%s) = %+v, %v, want one image path", link, c, err)
	}
	if _, err := Load(empty); err == nil || err.Error() != empty+": empty: want apiVersion: digestpin.dev/v1alpha1 and kind: Config" {
		t.Errorf("Load(%s) = %v, want it empty", empty, err)
	}
}
