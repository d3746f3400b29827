package fluxoci

import (
	"strings"
	"testing"
)

// TestArtifactDeterministic: the same files give the same digest, other
// content or revision another one; files out of order or with unclean
// names are refused.
func TestArtifactDeterministic(t *testing.T) {
	files := []File{{Name: "a.yaml", Data: []byte("a: 1\n")}, {Name: "sub/b.yaml", Data: []byte("b: 2\n")}}
	digest := func(files []File, rev string) string {
		t.Helper()
		img, err := Artifact(files, "https://git.example/x", rev)
		if err != nil {
			t.Fatal(err)
		}
		h, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	d := digest(files, "r1")
	if again := digest(files, "r1"); again != d {
		t.Errorf("the same files gave %s and %s", d, again)
	}
	if other := digest(files, "r2"); other == d {
		t.Errorf("another revision gave the same digest %s", d)
	}
	if other := digest([]File{files[0], {Name: "sub/b.yaml", Data: []byte("b: 3\n")}}, "r1"); other == d {
		t.Errorf("other content gave the same digest %s", d)
	}
	for _, tc := range []struct {
		name  string
		files []File
	}{
		{"out of order", []File{files[1], files[0]}},
		{"twice", []File{files[0], files[0]}},
		{"leaves the folder", []File{{Name: "../x.yaml"}}},
		{"absolute", []File{{Name: "/x.yaml"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Tarball(tc.files); err == nil || !strings.Contains(err.Error(), "not a clean relative path in order") {
				t.Errorf("Tarball = %v, want a refusal", err)
			}
		})
	}
}
