package tagpolicy

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/imageref"
)

// tagsSeen are the tags of the example repository, with tags that
// only some strategies take.
var tagsSeen = []string{"1.4.1", "1.4.2", "1.5.0", "2.0.0-rc.1", "2.0.0", "latest", "main-3", "main-12", "v1.4.3", "1.4.2-debug"}

func TestTagPolicyChoose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy         string
		allow, ignore  string
		want           string
		wantCandidates []string
	}{
		{policy: "semver:~1.4", want: "v1.4.3", wantCandidates: []string{"v1.4.3", "1.4.2", "1.4.1"}},
		{policy: "semver:~1.4", ignore: `^v`, want: "1.4.2", wantCandidates: []string{"1.4.2", "1.4.1"}},
		{policy: "semver:^1", want: "1.5.0"},
		{policy: "semver:>=1.2 <2", want: "1.5.0"},
		{policy: "semver:>=1.2, <1.5", want: "v1.4.3"},
		{policy: "semver:*", want: "2.0.0"},
		{policy: "semver:^2", want: "2.0.0", wantCandidates: []string{"2.0.0"}},
		// Pre-releases only when the constraint asks for them.
		{policy: "semver:>=2.0.0-0 <2.0.0", want: "2.0.0-rc.1", wantCandidates: []string{"2.0.0-rc.1"}},
		{policy: "semver:>=2.0.0-0", want: "2.0.0", wantCandidates: []string{"2.0.0", "2.0.0-rc.1"}},
		{policy: "semver:1.4.2", want: "1.4.2"},
		// name: the alphabetically last, as Image Updater does.
		{policy: "name:^main-", want: "main-3", wantCandidates: []string{"main-3", "main-12"}},
		{policy: "name:.", allow: `^\d`, ignore: `-`, want: "2.0.0"},
	} {
		t.Run(tc.policy+" "+tc.allow+" "+tc.ignore, func(t *testing.T) {
			var ps TagPolicies
			must(t, ps.Add("shop/web", tc.policy))
			if tc.allow != "" {
				must(t, ps.Allow("shop/web", tc.allow))
			}
			if tc.ignore != "" {
				must(t, ps.Ignore("shop/web", tc.ignore))
			}
			p := ps.For(parseRef(t, "shop/web:1.4"))
			if p == nil {
				t.Fatal("For(shop/web:1.4) = nil")
			}
			got, cands, err := p.choose("shop/web", tagsSeen, DefaultMaxTags, nil)
			if err != nil {
				t.Fatalf("choose: %v", err)
			}
			if got != tc.want {
				t.Errorf("policy %s chose %q, want %q (candidates %v)", p, got, tc.want, cands)
			}
			if tc.wantCandidates != nil {
				if diff := cmp.Diff(tc.wantCandidates, cands); diff != "" {
					t.Errorf("candidates (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestTagPolicyNoMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy, want string
	}{
		{policy: "semver:~3", want: "shop/web: policy semver:~3 matches none of its 10 tags; nearest: 2.0.0, 2.0.0-rc.1, 1.5.0, v1.4.3, 1.4.2"},
		{policy: "name:^release-", want: "shop/web: policy name:^release- matches none of its 10 tags; nearest: v1.4.3, main-3, main-12, latest, 2.0.0-rc.1"},
	} {
		p, err := ParseTagPolicy(tc.policy)
		must(t, err)
		_, _, err = p.choose("shop/web", tagsSeen, DefaultMaxTags, nil)
		var nt *NoTagError
		if !errors.As(err, &nt) || err.Error() != tc.want {
			t.Errorf("policy %s: err = %v, want %q", tc.policy, err, tc.want)
		}
	}
}

func TestParseTagPolicyErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{in: "semver:", want: "semver needs a constraint"},
		{in: "semver:~1.x.y.z", want: `constraint "~1.x.y.z"`},
		{in: "semver:>=1 <<2", want: `constraint ">=1 <<2"`},
		{in: "name:", want: "name needs a regular expression"},
		{in: "name:(", want: `regular expression "("`},
		{in: "latest:3", want: "latest takes no argument"},
		{in: "newest", want: `unknown strategy "newest", want semver:CONSTRAINT, latest, name:REGEXP or digest`},
	} {
		if _, err := ParseTagPolicy(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTagPolicy(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	var ps TagPolicies
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ps.Add("shop/web:1.4", "latest"), "want a repository without a tag or digest"},
		{ps.Add("Shop/Web", "latest"), `parsing repository "Shop/Web"`},
		{ps.Allow("shop/web", "x"), "shop/web has no tag policy"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("err = %v, want one containing %q", tc.err, tc.want)
		}
	}
	must(t, ps.Add("shop/web", "latest"))
	if err := ps.Ignore("shop/web", "[z-a]"); err == nil || !strings.Contains(err.Error(), `parsing regular expression "[z-a]"`) {
		t.Errorf("Ignore([z-a]) = %v", err)
	}
}

func TestTagPoliciesNormalise(t *testing.T) {
	t.Parallel()
	var ps TagPolicies
	must(t, ps.Add("nginx", "semver:~1.27"))
	must(t, ps.Add("registry.example/shop/web", "latest"))
	must(t, ps.Add("registry.example/shop/api", "latest"))
	must(t, ps.Add("registry.example/shop/api", "digest")) // a later flag wins
	for ref, want := range map[string]string{
		"nginx:1.27":                                "semver:~1.27",
		"docker.io/library/nginx":                   "semver:~1.27",
		"index.docker.io/library/nginx:1.26":        "semver:~1.27",
		"registry.example/shop/web:dev":             "latest",
		"registry.example/shop/api:1":               "",
		"registry.example/shop/other:1":             "",
		"registry.example/shop/web/sub:1":           "",
		"other.example/registry.example/shop/web:1": "",
	} {
		got := ""
		if p := ps.For(parseRef(t, ref)); p != nil {
			got = p.String()
		}
		if got != want {
			t.Errorf("For(%s) = %q, want %q", ref, got, want)
		}
	}
	if n := ps.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
}

func TestNaturalCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.9", "1.10", -1},
		{"build-99", "build-100", -1},
		{"a", "b", -1},
		{"1.0", "1.0", 0},
		{"1.0", "1.0.1", -1},
		{"007", "7", 0},
		{"v2", "v10", -1},
	} {
		if got := naturalCompare(tc.a, tc.b); got != tc.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// parseRef parses a reference.
func parseRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ref
}

// TestPolicyIgnoresInvalidTags gives policies listings with names that
// are not tags, and repeated names: the invalid names are never chosen nor
// shown, and a repeated name is asked about once.
func TestPolicyIgnoresInvalidTags(t *testing.T) {
	t.Parallel()
	listed := []string{
		"1.0.0", "1.0.0", "9.9.9\n", "9.9.9 ", "../9.9.9", "-9.9.9", ".9.9.9", "9.9.9@sha256", "zz/zz",
		"\x1b[31mzz", strings.Repeat("z", 129), "", "zzé", "1.2.0", "1.2.0",
	}
	for _, tc := range []struct {
		policy, want string
		cands        []string
	}{
		{"name:.*", "1.2.0", []string{"1.2.0", "1.0.0"}},
		{"semver:*", "1.2.0", []string{"1.2.0", "1.0.0"}},
		{"latest", "1.2.0", []string{"1.2.0", "1.0.0"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := ParseTagPolicy(tc.policy)
			must(t, err)
			var mu sync.Mutex
			asked := map[string]int{}
			created := func(tag string) (time.Time, error) {
				mu.Lock()
				defer mu.Unlock()
				asked[tag]++
				// 1.2.0 was created last.
				return time.Unix(int64(len(tag)+int(tag[2])), 0), nil
			}
			tag, cands, err := p.choose("shop/web", listed, 10, created)
			if err != nil || tag != tc.want {
				t.Fatalf("choose = %q, %v, want %q", tag, err, tc.want)
			}
			if diff := cmp.Diff(tc.cands, cands); diff != "" && tc.policy != "latest" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			for tag, n := range asked {
				if n != 1 || !imageref.ValidTag(tag) {
					t.Errorf("creation time of %q asked %d times", tag, n)
				}
			}
		})
	}
	// A listing of nothing but invalid names matches nothing, and the
	// error shows none of them.
	p, err := ParseTagPolicy("name:.*")
	must(t, err)
	_, _, err = p.choose("shop/web", []string{"a b", "\x1b[31mx", "x\ny"}, 10, nil)
	if err == nil || strings.ContainsAny(err.Error(), "\n\x1b") || strings.Contains(err.Error(), "nearest") {
		t.Errorf("choose(invalid names) = %q, want a no-match error without them", err)
	}
}
