package tagpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/imageref"
)

// Strategy names how a TagPolicy picks a repository's tag.
type Strategy string

// The strategies of a TagPolicy, after Argo CD Image Updater's.
const (
	// StrategyDigest follows the tag as written to its digest: no tag is
	// chosen. It is what an image without a policy gets.
	StrategyDigest Strategy = "digest"
	// StrategySemver chooses the highest version that satisfies a
	// constraint in Helm's syntax (github.com/Masterminds/semver/v3).
	StrategySemver Strategy = "semver"
	// StrategyLatest chooses the tag whose image config was created last.
	StrategyLatest Strategy = "latest"
	// StrategyName chooses the alphabetically last tag that matches a
	// regular expression.
	StrategyName Strategy = "name"
)

// TagPolicy says which of a repository's tags an image follows. A
// TagPolicy is not changed once its filters are set, so it is safe for
// concurrent use.
type TagPolicy struct {
	strategy   Strategy
	arg        string // the constraint or the regular expression, as written
	constraint *semver.Constraints
	match      *regexp.Regexp
	allow      *regexp.Regexp // nil: every tag
	ignore     *regexp.Regexp // nil: none
}

// ParseTagPolicy parses a strategy: "semver:CONSTRAINT", "latest",
// "name:REGEXP" or "digest". The error says what is wrong with it.
func ParseTagPolicy(s string) (*TagPolicy, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	p := &TagPolicy{strategy: Strategy(kind), arg: arg}
	switch p.strategy {
	case StrategySemver:
		if strings.TrimSpace(arg) == "" {
			return nil, fmt.Errorf("parsing tag policy %q: semver needs a constraint, e.g. semver:~1.4", s)
		}
		c, err := semver.NewConstraint(arg)
		if err != nil {
			return nil, fmt.Errorf("parsing tag policy %q: constraint %q: %w", s, arg, err)
		}
		p.constraint = c
	case StrategyName:
		if arg == "" {
			return nil, fmt.Errorf("parsing tag policy %q: name needs a regular expression, e.g. name:^main-", s)
		}
		re, err := regexp.Compile(arg)
		if err != nil {
			return nil, fmt.Errorf("parsing tag policy %q: regular expression %q: %w", s, arg, err)
		}
		p.match = re
	case StrategyLatest, StrategyDigest:
		if hasArg {
			return nil, fmt.Errorf("parsing tag policy %q: %s takes no argument", s, kind)
		}
	default:
		return nil, fmt.Errorf("parsing tag policy %q: unknown strategy %q, want semver:CONSTRAINT, latest, name:REGEXP or digest", s, kind)
	}
	return p, nil
}

// Strategy returns the policy's strategy.
func (p *TagPolicy) Strategy() Strategy { return p.strategy }

// String returns the policy as written, with its filters:
// "semver:~1.4", "latest allow=^main- ignore=-debug$". It is how lock
// files, cache keys and messages name the policy.
func (p *TagPolicy) String() string {
	s := string(p.strategy)
	if p.strategy == StrategySemver || p.strategy == StrategyName {
		s += ":" + p.arg
	}
	if p.allow != nil {
		s += " allow=" + p.allow.String()
	}
	if p.ignore != nil {
		s += " ignore=" + p.ignore.String()
	}
	return s
}

// chooses reports whether the policy chooses a tag, rather than follow
// the tag as written (StrategyDigest).
func (p *TagPolicy) chooses() bool { return p != nil && p.strategy != StrategyDigest }

// considers reports whether the filters let tag be a candidate.
func (p *TagPolicy) considers(tag string) bool {
	return (p.allow == nil || p.allow.MatchString(tag)) && (p.ignore == nil || !p.ignore.MatchString(tag))
}

// candidates returns the tags the policy may choose, best first: for
// semver the highest version first, for name and latest the last in
// natural order (numbers compared as numbers) first. latest orders them
// again by creation time. Names that are not valid tags (see imageref.ValidTag)
// are never candidates, and a repeated name counts once: a registry's
// listing may hold anything.
func (p *TagPolicy) candidates(tags []string) []string {
	var out []string
	var versions map[string]*semver.Version
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		if seen[t] || !imageref.ValidTag(t) || !p.considers(t) {
			continue
		}
		seen[t] = true
		switch p.strategy {
		case StrategySemver:
			v, err := semver.NewVersion(t)
			if err != nil || !p.constraint.Check(v) {
				continue
			}
			if versions == nil {
				versions = map[string]*semver.Version{}
			}
			versions[t] = v
		case StrategyName:
			if !p.match.MatchString(t) {
				continue
			}
		}
		out = append(out, t)
	}
	if p.strategy == StrategySemver {
		// Equal versions ("1.4" and "1.4.0") are told apart by name, so
		// that the choice never depends on the registry's order.
		slices.SortFunc(out, func(a, b string) int {
			return cmp.Or(versions[b].Compare(versions[a]), strings.Compare(b, a))
		})
		return out
	}
	if p.strategy == StrategyName {
		slices.SortFunc(out, func(a, b string) int { return strings.Compare(b, a) })
		return out
	}
	slices.SortFunc(out, func(a, b string) int { return naturalCompare(b, a) })
	return out
}

// nearest returns up to n of tags that the policy's strategy ranks
// highest, ignoring its constraint or regular expression: what an error
// shows when no tag matches.
func (p *TagPolicy) nearest(tags []string, n int) []string {
	loose := &TagPolicy{strategy: p.strategy}
	switch p.strategy {
	case StrategySemver:
		loose.constraint, _ = semver.NewConstraint("*-0") // every version, pre-releases too
	case StrategyName:
		loose.match = regexp.MustCompile("")
	}
	out := loose.candidates(tags)
	if len(out) == 0 { // no version at all: show the tags by name
		loose.strategy = StrategyLatest
		out = loose.candidates(tags)
	}
	return out[:min(n, len(out))]
}

// choose picks the tag of repo among tags. created tells when a tag's
// image was created, for StrategyLatest, which asks it about at most
// maxTags candidates. It returns the tag and the candidates considered,
// best first.
func (p *TagPolicy) choose(repo string, tags []string, maxTags int, created func(tag string) (time.Time, error)) (string, []string, error) {
	cands := p.candidates(tags)
	if len(cands) == 0 {
		return "", nil, p.noMatch(repo, tags)
	}
	if p.strategy != StrategyLatest {
		return cands[0], cands, nil
	}
	// latest: the creation time of each of the maxTags first candidates,
	// asked at once; the newest wins, and of equal times the first in
	// natural order.
	cands = cands[:min(maxTags, len(cands))]
	times := make([]time.Time, len(cands))
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, t := range cands {
		wg.Go(func() { times[i], errs[i] = created(t) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", nil, err
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return times[b].Compare(times[a]) })
	sorted := make([]string, len(cands))
	for i, j := range order {
		sorted[i] = cands[j]
	}
	return sorted[0], sorted, nil
}

// NoTagError is a policy that matched none of a repository's tags.
type NoTagError struct {
	// Repository is the repository, as the manifests name it.
	Repository string
	// Policy is the policy, as TagPolicy.String writes it.
	Policy string
	// Tags is how many tags the repository has.
	Tags int
	// Nearest are the tags that came closest, best first.
	Nearest []string
}

func (e *NoTagError) Error() string {
	s := fmt.Sprintf("%s: policy %s matches none of its %d tags", e.Repository, e.Policy, e.Tags)
	if len(e.Nearest) > 0 {
		s += "; nearest: " + strings.Join(e.Nearest, ", ")
	}
	return s
}

func (p *TagPolicy) noMatch(repo string, tags []string) error {
	return &NoTagError{Repository: repo, Policy: p.String(), Tags: len(tags), Nearest: p.nearest(tags, 5)}
}

// naturalCompare compares two tags in natural order: runs of digits as
// numbers, so that "1.10" comes after "1.9" and "build-100" after
// "build-99".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(strings.TrimLeft(a[:da], "0")+"0", 10, 64)
			nb, _ := strconv.ParseUint(strings.TrimLeft(b[:db], "0")+"0", 10, 64)
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Or(cmp.Compare(len(a), len(b)), 0)
}

// digitRun returns the length of the run of ASCII digits s starts with.
func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// TagPolicies maps repositories, and single references, to their tag
// policies. The zero value has none. It is not safe for concurrent Add;
// once built, For may be called concurrently.
type TagPolicies struct {
	m    map[string]*TagPolicy // repository's fully qualified name → policy
	refs map[string]*TagPolicy // reference's fully qualified name → policy
}

// AddReference sets the policy of one reference (with its tag), which
// wins over its repository's: Keel's annotations give each workload's
// image a policy of its own, relative to its tag.
func (ps *TagPolicies) AddReference(ref name.Reference, strategy string) error {
	p, err := ParseTagPolicy(strategy)
	if err != nil {
		return err
	}
	if ps.refs == nil {
		ps.refs = map[string]*TagPolicy{}
	}
	ps.refs[ref.Name()] = p
	return nil
}

// Clone returns a copy of ps that Add, AddReference, Allow and Ignore
// may change without changing ps; a nil ps gives an empty TagPolicies.
func (ps *TagPolicies) Clone() *TagPolicies {
	c := &TagPolicies{}
	if ps != nil {
		c.m, c.refs = maps.Clone(ps.m), maps.Clone(ps.refs)
	}
	return c
}

// Add sets the policy of image, a repository as manifests write it
// ("nginx", "docker.io/library/nginx" and "index.docker.io/library/nginx"
// are one), to strategy (see ParseTagPolicy). A later Add of the same
// repository replaces its strategy and keeps its filters.
func (ps *TagPolicies) Add(image, strategy string) error {
	repo, err := parseRepository(image)
	if err != nil {
		return err
	}
	p, err := ParseTagPolicy(strategy)
	if err != nil {
		return err
	}
	if old := ps.m[repo.Name()]; old != nil {
		p.allow, p.ignore = old.allow, old.ignore
	}
	if ps.m == nil {
		ps.m = map[string]*TagPolicy{}
	}
	ps.m[repo.Name()] = p
	return nil
}

// Has reports whether image, a repository as Add takes it, has a policy;
// false for an image that is no repository.
func (ps *TagPolicies) Has(image string) bool {
	if ps == nil {
		return false
	}
	repo, err := parseRepository(image)
	return err == nil && ps.m[repo.Name()] != nil
}

// Allow lets the policy of image consider only tags that match re.
func (ps *TagPolicies) Allow(image, re string) error { return ps.filter(image, re, true) }

// Ignore keeps the policy of image from considering tags that match re.
func (ps *TagPolicies) Ignore(image, re string) error { return ps.filter(image, re, false) }

func (ps *TagPolicies) filter(image, expr string, allow bool) error {
	repo, err := parseRepository(image)
	if err != nil {
		return err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return fmt.Errorf("parsing regular expression %q: %w", expr, err)
	}
	old := ps.m[repo.Name()]
	if old == nil {
		return fmt.Errorf("%s has no tag policy: set one first", image)
	}
	// A new policy, not a change of the old one, which a Clone shares.
	p := *old
	if allow {
		p.allow = re
	} else {
		p.ignore = re
	}
	ps.m[repo.Name()] = &p
	return nil
}

// For returns the policy of ref's repository that chooses a tag, or nil
// when it has none or follows its tag (digest). A nil TagPolicies has
// none.
func (ps *TagPolicies) For(ref name.Reference) *TagPolicy {
	if ps == nil {
		return nil
	}
	if p, ok := ps.refs[ref.Name()]; ok {
		if p.chooses() {
			return p
		}
		return nil
	}
	if p := ps.m[ref.Context().Name()]; p.chooses() {
		return p
	}
	return nil
}

// Len returns how many repositories and references have a policy that
// chooses a tag.
func (ps *TagPolicies) Len() int {
	if ps == nil {
		return 0
	}
	n := 0
	for _, p := range ps.m {
		if p.chooses() {
			n++
		}
	}
	for _, p := range ps.refs {
		if p.chooses() {
			n++
		}
	}
	return n
}

// RepositoryOf returns ref's repository as ref spells it, without the
// tag: "shop/web" for "shop/web:1.4", where ref.Context() would be
// "index.docker.io/shop/web".
func RepositoryOf(ref name.Reference) string {
	s := ref.String()
	if t, ok := ref.(name.Tag); ok {
		s = strings.TrimSuffix(s, ":"+t.TagStr())
	}
	return s
}

// parseRepository parses a repository as manifests write it, refusing a
// tag or a digest.
func parseRepository(image string) (name.Repository, error) {
	repo, err := name.NewRepository(image)
	if err != nil {
		if _, rerr := name.ParseReference(image); rerr == nil {
			return name.Repository{}, fmt.Errorf("parsing repository %q: want a repository without a tag or digest, e.g. shop/web", image)
		}
		return name.Repository{}, fmt.Errorf("parsing repository %q: %w", image, err)
	}
	return repo, nil
}
