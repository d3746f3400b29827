package lockfile

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// policyEntries lock images of repositories with tag policies beside one
// without: the same reference may be locked with and without a policy.
var policyEntries = []Entry{
	{Reference: "registry.example:5000/shop/web:1.4", Digest: d2, Policy: "semver:~1.4", Tag: "1.4.7"},
	{Reference: "nginx:1.27", Digest: d1},
	{Reference: "registry.example:5000/shop/web:1.4", Digest: d1},
	{Reference: "registry.example:5000/shop/api", Digest: d3, Policy: "latest allow=^main-", Tag: "main-20"},
}

func TestMarshalGoldenPolicy(t *testing.T) {
	checkGolden(t, policyEntries, "policy.lock")
	l, err := New(policyEntries)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nversion: 2\n") {
		t.Errorf("a lock file with policies is not version 2:\n%s", b)
	}
	// Without policies, a lock file stays version 1, which earlier
	// versions of digestpin read.
	l, err = New(entries)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ = l.Marshal(); !strings.Contains(string(b), "\nversion: 1\n") {
		t.Errorf("a lock file without policies is not version 1:\n%s", b)
	}
}

func TestLookupPolicy(t *testing.T) {
	l, err := New(policyEntries)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref, platform, policy string
		wantTag, wantDigest   string // "" for a miss
	}{
		{ref: "registry.example:5000/shop/web:1.4", policy: "semver:~1.4", wantTag: "1.4.7", wantDigest: d2},
		{ref: "registry.example:5000/shop/web:1.4", policy: "semver:~1.5"},
		{ref: "registry.example:5000/shop/web:1.4", policy: "semver:~1.4", platform: "linux/amd64"},
		{ref: "registry.example:5000/shop/web:1.5", policy: "semver:~1.4"},
		{ref: "registry.example:5000/shop/web:1.4"},
		{ref: "registry.example:5000/shop/api", policy: "latest allow=^main-", wantTag: "main-20", wantDigest: d3},
		{ref: "registry.example:5000/shop/api:latest", policy: "latest allow=^main-", wantTag: "main-20", wantDigest: d3},
		{ref: "registry.example:5000/shop/api", policy: "latest"},
	} {
		ref, err := name.ParseReference(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		tag, h, ok := l.LookupPolicy(ref, tc.platform, tc.policy)
		got := ""
		if ok {
			got = h.String()
		}
		if got != tc.wantDigest || tag != tc.wantTag {
			t.Errorf("LookupPolicy(%s, %q, %q) = %q, %q, want %q, %q", tc.ref, tc.platform, tc.policy, tag, got, tc.wantTag, tc.wantDigest)
		}
	}
	// Lookup without a policy finds the entry without one only.
	if h, ok := l.Lookup(name.MustParseReference("registry.example:5000/shop/web:1.4"), ""); !ok || h.String() != d1 {
		t.Errorf("Lookup(shop/web:1.4) = %s, %t, want %s", h, ok, d1)
	}
	if _, ok := l.Lookup(name.MustParseReference("registry.example:5000/shop/api"), ""); ok {
		t.Error("Lookup(shop/api) found the entry of a policy")
	}
}
