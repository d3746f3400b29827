package tagpolicy

import (
	"strings"
	"testing"
)

func TestKeelStrategy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tag, policy string
		matchTag    bool
		want        string
	}{
		{"1.4.1", "all", false, "semver:>=1.4.1-0"},
		{"1.4.1-rc.1", "all", false, "semver:>=1.4.1-rc.1"},
		{"v1.4.1", "major", false, "semver:>=1.4.1"},
		{"1.4.1", "minor", false, "semver:>=1.4.1, <2.0.0-0"},
		{"1.4", "patch", false, "semver:>=1.4.0, <1.5.0-0"},
		{"latest", "minor", false, "digest"},
		{"latest", "force", false, "latest"},
		{"latest", "force", true, "digest"},
		{"dev", "glob:release-*.?", false, `name:^release-.*\..$`},
		{"dev", "regexp:^main-[0-9]+$", false, "name:^main-[0-9]+$"},
		{"1.4.1", "never", false, "digest"},
	} {
		got, err := KeelStrategy(tc.tag, tc.policy, tc.matchTag)
		if err != nil || got != tc.want {
			t.Errorf("KeelStrategy(%q, %q, %t) = %q, %v, want %q", tc.tag, tc.policy, tc.matchTag, got, err, tc.want)
			continue
		}
		if _, err := ParseTagPolicy(got); err != nil {
			t.Errorf("KeelStrategy(%q, %q) = %q, which does not parse: %v", tc.tag, tc.policy, got, err)
		}
	}
	for _, tc := range []struct{ policy, want string }{
		{"sometimes", `unknown keel policy "sometimes"`},
		{"glob:", "glob needs a pattern"},
		{"regexp:(", "want regexp:EXPRESSION"},
	} {
		if _, err := KeelStrategy("1.0.0", tc.policy, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("KeelStrategy(%q) = %v, want an error containing %q", tc.policy, err, tc.want)
		}
	}
}
