package verify_test

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/verify"
)

// TestFor: globs match repositories by their full name, Docker Hub's
// spellings as one, the longest glob wins.
func TestFor(t *testing.T) {
	t.Parallel()
	var ps verify.Policies
	for _, s := range []string{"**=none", "nginx=none", "ghcr.io/acme/*=none", "ghcr.io/acme/**=none", "ghcr.io/acme/web=none", "localhost:5000/*=none", "bitnami/*=none"} {
		if err := ps.Add(s); err != nil {
			t.Fatalf("Add(%q) = %v", s, err)
		}
	}
	for _, tc := range []struct{ ref, want string }{
		{"nginx:1", "nginx"},
		{"docker.io/library/nginx:1", "nginx"},
		{"index.docker.io/library/nginx", "nginx"},
		{"bitnami/redis:7", "bitnami/*"},
		{"ghcr.io/acme/web:1", "ghcr.io/acme/web"},
		{"ghcr.io/acme/api:1", "ghcr.io/acme/**"},
		{"ghcr.io/acme/team/api:1", "ghcr.io/acme/**"},
		{"localhost:5000/app", "localhost:5000/*"},
		{"quay.io/other/app", "**"},
	} {
		ref, err := name.ParseReference(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		p := ps.For(ref.Context())
		if p == nil || p.Glob() != tc.want {
			got := "<nil>"
			if p != nil {
				got = p.Glob()
			}
			t.Errorf("For(%s) = %s, want %s", tc.ref, got, tc.want)
		}
	}
	// "*" stays within a segment.
	var one verify.Policies
	if err := one.Add("ghcr.io/acme/*=none"); err != nil {
		t.Fatal(err)
	}
	if p := one.For(name.MustParseReference("ghcr.io/acme/team/api").Context()); p != nil {
		t.Errorf("For(ghcr.io/acme/team/api) = %s, want none: * stays within a segment", p.Glob())
	}
}

// TestPolicyString: the canonical form names the key by fingerprint.
func TestPolicyString(t *testing.T) {
	t.Parallel()
	var ps verify.Policies
	if err := ps.Add(`r.example/**=keyless:a@b.example@https://issuer.example or keyless:/.*@acme\.example/@https://i.example`); err != nil {
		t.Fatal(err)
	}
	p := ps.For(name.MustParseReference("r.example/x").Context())
	if got, want := p.String(), `keyless:a@b.example@https://issuer.example or keyless:/.*@acme\.example/@https://i.example`; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if p.All() {
		t.Error("All = true for an or policy")
	}
}
