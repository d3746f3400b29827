package tagpolicy

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// KeelStrategy returns the strategy (see ParseTagPolicy) that does at
// render time what Keel's keel.sh/policy does in the cluster for an image
// whose tag is tag:
//
//	all        semver:>=TAG-0, pre-releases too
//	major      semver:>=TAG
//	minor      semver:>=TAG, <NEXT-MAJOR-0
//	patch      semver:>=TAG, <NEXT-MINOR-0
//	force      latest; with keel.sh/match-tag "true", digest (the tag as
//	           written, followed to its digest)
//	glob:PAT   name:REGEXP of the glob (* and ?), the alphabetically last
//	regexp:RE  name:RE, the alphabetically last
//	never      digest
//
// Like Keel, the semver policies leave a tag that is not a version alone:
// they give digest, as never does (digestpin still follows the tag to its
// digest). An unknown policy is an error.
func KeelStrategy(tag, policy string, matchTag bool) (string, error) {
	kind, arg, _ := strings.Cut(policy, ":")
	switch kind {
	case "all", "major", "minor", "patch":
		v, err := semver.NewVersion(tag)
		if err != nil {
			return string(StrategyDigest), nil
		}
		cur := v.String()
		switch kind {
		case "all":
			if v.Prerelease() == "" {
				return "semver:>=" + cur + "-0", nil
			}
			return "semver:>=" + cur, nil
		case "major":
			return "semver:>=" + cur, nil
		case "minor":
			return fmt.Sprintf("semver:>=%s, <%d.0.0-0", cur, v.Major()+1), nil
		default:
			return fmt.Sprintf("semver:>=%s, <%d.%d.0-0", cur, v.Major(), v.Minor()+1), nil
		}
	case "never":
		return string(StrategyDigest), nil
	case "force":
		if matchTag {
			return string(StrategyDigest), nil
		}
		return string(StrategyLatest), nil
	case "glob":
		if arg == "" {
			return "", fmt.Errorf("keel policy %q: glob needs a pattern", policy)
		}
		return "name:" + globRegexp(arg), nil
	case "regexp":
		if _, err := regexp.Compile(arg); arg == "" || err != nil {
			return "", fmt.Errorf("keel policy %q: want regexp:EXPRESSION", policy)
		}
		return "name:" + arg, nil
	}
	return "", fmt.Errorf("unknown keel policy %q, want all, major, minor, patch, force, glob:PATTERN, regexp:EXPRESSION or never", policy)
}

// globRegexp turns a glob (* any run of characters, ? one) into an
// anchored regular expression.
func globRegexp(glob string) string {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return b.String()
}
