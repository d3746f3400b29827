package imageref

import (
	"regexp"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
)

const dg = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// valid are references the kubelet pulls, in the forms the distribution
// spec's grammar allows.
var valid = []string{
	"nginx", "nginx:1.27", "library/nginx", "docker.io/library/nginx:latest",
	"registry.example/shop/web:1.4", "registry.example:5000/a/b/c:v1.2.3-rc.1_x",
	"localhost/app", "localhost:5000/app:dev", "127.0.0.1:5000/app", "[::1]:5000/app:1",
	"[2001:db8::1]/app", "UPPER/app", "Registry.Example/app",
	"a__b", "a_b", "a.b", "a-b", "a---b", "a0/b1", "x/" + strings.Repeat("a", 200),
	"app:_", "app:A", "app:" + strings.Repeat("t", 128),
	"app@" + dg, "app:1@" + dg, "registry.example/shop/web:1.4@" + dg,
}

// invalid are references the kubelet refuses though
// go-containerregistry's name package parses most of them, each with the
// part the error must name.
var invalid = []struct{ ref, want string }{
	{"...", `the path component "..."`},
	{"...:latest@" + dg, `the path component "..."`},
	{"a..b", `the path component "a..b"`},
	{"-foo", `the path component "-foo"`},
	{"_foo", `the path component "_foo"`},
	{"a___b", `the path component "a___b"`},
	{"a.-b", `the path component "a.-b"`},
	{"foo//bar", "an empty path component"},
	{"foo/", "an empty path component"},
	{"/foo", "an empty path component"},
	{"foo:-bad", `the tag "-bad"`},
	{"foo:.x", `the tag ".x"`},
	{"foo:" + strings.Repeat("t", 129), "the tag"},
	{"ho'st.example/foo", `the registry "ho'st.example"`},
	{"registry-.example/a", `the registry "registry-.example"`},
	{"-registry.example/a", `the registry "-registry.example"`},
	{"example.com:/a", `the registry "example.com:"`},
	// The parser reads these as paths with no registry (FuzzCheck).
	{"0.0_0/0", `the registry "0.0_0"`},
	{"a_b.c/x:1", `the registry "a_b.c"`},
	{"registry.example/App:1", "must be lowercase"},
	{"app@sha256:abc", `the digest "sha256:abc"`},
	{strings.Repeat("a", 64), "64-byte hexadecimal"},
	{"x/" + strings.Repeat("a", 260), "255 characters"},
	{"", "invalid reference format"},
}

func TestCheck(t *testing.T) {
	for _, ref := range valid {
		if err := Check(ref); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ref, err)
		}
	}
	for _, tc := range invalid {
		err := Check(tc.ref)
		if err == nil {
			t.Errorf("Check(%q) = nil, want an error naming %s", tc.ref, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %q, want it to contain %q", tc.ref, err, tc.want)
		}
	}
}

// TestStricterThanName checks that the references of the issue that
// go-containerregistry parses are among those Check refuses: the check
// is needed.
func TestStricterThanName(t *testing.T) {
	for _, ref := range []string{"...", "a..b", "-foo", "foo//bar", "_foo", "foo:-bad", "ho'st.example/foo", "...:latest@" + dg} {
		if _, err := name.ParseReference(ref); err != nil {
			t.Errorf("name.ParseReference(%q) = %v; this case no longer tests anything", ref, err)
		}
		if Check(ref) == nil {
			t.Errorf("Check(%q) = nil", ref)
		}
	}
}

// anchoredTag is the distribution package's tag grammar, anchored.
var anchoredTag = regexp.MustCompile(`^(?:` + reference.TagRegexp.String() + `)$`)

func TestValidTag(t *testing.T) {
	for _, tag := range []string{"1", "latest", "1.4.7", "v1.2.3-rc.1", "_", "A_b.c-d", strings.Repeat("x", 128)} {
		if !ValidTag(tag) || !anchoredTag.MatchString(tag) {
			t.Errorf("ValidTag(%q) = %t, grammar %t; want both true", tag, ValidTag(tag), anchoredTag.MatchString(tag))
		}
	}
	for _, tag := range []string{"", "-bad", ".x", "a/b", "a:b", "a b", "ä", strings.Repeat("x", 129)} {
		if ValidTag(tag) || anchoredTag.MatchString(tag) {
			t.Errorf("ValidTag(%q) = %t, grammar %t; want both false", tag, ValidTag(tag), anchoredTag.MatchString(tag))
		}
	}
}

// FuzzCheck checks that ValidTag is the grammar's tag rule, and that the
// diagnosis never blames a part of a reference the parser accepts.
func FuzzCheck(f *testing.F) {
	for _, ref := range valid {
		f.Add(ref)
	}
	for _, tc := range invalid {
		f.Add(tc.ref)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidTag(s), anchoredTag.MatchString(s); got != want {
			t.Fatalf("ValidTag(%q) = %t, the grammar says %t", s, got, want)
		}
		if ref, err := reference.ParseNormalizedNamed(s); err == nil && reference.Domain(ref) == "" {
			// A first component with a "." that is no host name: the
			// parser reads a path without a registry, Check refuses it.
			if err := Check(s); err == nil || diagnose(s) == "" {
				t.Fatalf("Check(%q) = %v, diagnose = %q: want the registry refused", s, err, diagnose(s))
			}
		} else if err == nil {
			if why := diagnose(s); why != "" {
				t.Fatalf("diagnose(%q) = %q, but the parser accepts it", s, why)
			}
			if err := Check(s); err != nil {
				t.Fatalf("Check(%q) = %v, but the parser accepts it", s, err)
			}
		} else if Check(s) == nil {
			t.Fatalf("Check(%q) = nil, but the parser refuses it: %v", s, err)
		}
	})
}

// TestParse: the kubelet's normalisation, hosts compared in lower case,
// latest for a bare name, the digest kept apart from the tag.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  Name
	}{
		{"nginx", Name{Repository: "docker.io/library/nginx", Tag: "latest"}},
		{"nginx:1.27", Name{Repository: "docker.io/library/nginx", Tag: "1.27"}},
		{"library/nginx:1.27", Name{Repository: "docker.io/library/nginx", Tag: "1.27"}},
		{"docker.io/nginx:1.27", Name{Repository: "docker.io/library/nginx", Tag: "1.27"}},
		{"index.docker.io/library/nginx:1.27", Name{Repository: "docker.io/library/nginx", Tag: "1.27"}},
		{"bitnami/redis", Name{Repository: "docker.io/bitnami/redis", Tag: "latest"}},
		{"Registry.Example:5000/shop/web:1.4", Name{Repository: "registry.example:5000/shop/web", Tag: "1.4"}},
		{"localhost:5000/app:dev@" + dg, Name{Repository: "localhost:5000/app", Tag: "dev", Digest: dg}},
		{"ghcr.io/a/b@" + dg, Name{Repository: "ghcr.io/a/b", Digest: dg}},
		{"[::1]:5000/app:V1", Name{Repository: "[::1]:5000/app", Tag: "V1"}},
	} {
		got, err := Parse(tc.image)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.image, got, err, tc.want)
		}
	}
	for _, tc := range invalid {
		if _, err := Parse(tc.ref); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", tc.ref, err, tc.want)
		}
	}
}
