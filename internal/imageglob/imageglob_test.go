package imageglob

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestMatch: globs match repositories by their full name, Docker Hub's
// spellings as one; * stays within a segment, ** crosses them.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, repo string
		want       bool
	}{
		{"nginx", "nginx", true},
		{"nginx", "docker.io/library/nginx", true},
		{"docker.io/nginx", "index.docker.io/library/nginx", true},
		{"library/*", "nginx", true},
		{"bitnami/*", "docker.io/bitnami/redis", true},
		{"ghcr.io/acme/*", "ghcr.io/acme/web", true},
		{"ghcr.io/acme/*", "ghcr.io/acme/team/api", false},
		{"ghcr.io/acme/**", "ghcr.io/acme/team/api", true},
		{"**", "quay.io/x/y", true},
		{"*/acme/web", "ghcr.io/acme/web", true},
		{"localhost:5000/app", "localhost:5000/app", true},
		{"ghcr.io/acme/web", "ghcr.io/acme/web2", false},
		{"ghcr.io/a.c/web", "ghcr.io/abc/web", false},
	} {
		g, err := Compile(tc.glob)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.glob, err)
		}
		repo, err := name.NewRepository(tc.repo)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Match(repo); got != tc.want {
			t.Errorf("%q matches %s = %v, want %v", tc.glob, repo.Name(), got, tc.want)
		}
	}
}

// TestCompileRefuses: a glob names a repository, never a tag or a digest.
func TestCompileRefuses(t *testing.T) {
	for _, glob := range []string{"", "nginx:1.27", "ghcr.io/acme/web:dev", "app@sha256:00", "a b"} {
		if _, err := Compile(glob); err == nil {
			t.Errorf("Compile(%q) = nil error", glob)
		}
	}
	if _, err := Compile("localhost:5000/app"); err != nil {
		t.Errorf("a registry's port is no tag: %v", err)
	}
}

// TestSameAndSpecific: two spellings of one glob are the same; the longer
// of two is the more specific, and any is more than none.
func TestSameAndSpecific(t *testing.T) {
	a, _ := Compile("nginx")
	b, _ := Compile("docker.io/library/nginx")
	c, _ := Compile("**")
	if !a.Same(b) || a.Same(c) {
		t.Errorf("Same: nginx ~ docker.io/library/nginx %v, nginx ~ ** %v", a.Same(b), a.Same(c))
	}
	if !b.MoreSpecific(a) || a.MoreSpecific(b) || !c.MoreSpecific(Glob{}) {
		t.Error("MoreSpecific: want the longer glob, and any over none")
	}
	var zero Glob
	if zero.Match(name.MustParseReference("nginx").Context()) {
		t.Error("the zero Glob matched")
	}
}
