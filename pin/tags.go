package pin

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// ReportPolicy is what a tag policy chose for an image.
type ReportPolicy struct {
	// Policy is the policy, e.g. "semver:~1.4".
	Policy string `json:"policy"`
	// Chosen is the tag it chose.
	Chosen string `json:"chosen"`
	// Candidates are the tags it considered, best first; absent when the
	// choice came from the lock file.
	Candidates []string `json:"candidates,omitempty"`
}

// withPolicies puts the tag policies in front of next, which resolves
// the tags they choose; without policies it returns next.
func (c *chain) withPolicies(o *Options, next resolution.Resolver, tags tagpolicy.TagSource, opts ...tagpolicy.PolicyOption) (resolution.Resolver, error) {
	if c.tags.Len() == 0 {
		return next, nil
	}
	if o.MaxTags > 0 {
		opts = append(opts, tagpolicy.WithMaxTags(o.MaxTags))
	}
	p, err := tagpolicy.NewPolicyResolver(next, tags, c.tags, opts...)
	if err != nil {
		return nil, err
	}
	c.policy = p
	return p, nil
}

// checkPolicy notes where the registry's answer for ref, whose repository
// has the tag policy policy, differs from the lock file: another tag
// chosen, or the chosen tag moved.
func (c *chain) checkPolicy(ref name.Reference, policy string, res resolution.Resolution) {
	repo := tagpolicy.RepositoryOf(ref)
	tag, locked, ok := c.lock.LookupPolicy(ref, c.platform, policy)
	switch {
	case !ok:
		c.moved.add(fmt.Sprintf("%s: not in the lock file with policy %s; the registry now has %s (%s)", ref, policy, res.Tag, res.Digest))
	case tag != res.Tag:
		c.moved.add(fmt.Sprintf("%s: policy %s chose %s, registry now has %s", repo, policy, tag, res.Tag))
	case locked != res.Digest:
		c.moved.add(fmt.Sprintf("%s: policy %s chose %s, which moved from %s (lock file) to %s (registry)", repo, policy, tag, locked, res.Digest))
	}
}

// choices returns what the tag policies chose for images, by
// Image.Reference: with the candidates when the policy chose during this
// Pin, without them when the lock file said.
func (c *chain) choices(images []renderer.Image) map[string]ReportPolicy {
	out := map[string]ReportPolicy{}
	for _, im := range images {
		if im.Tag == "" {
			continue
		}
		ref, err := name.ParseReference(im.Reference)
		if err != nil {
			continue // the renderer parsed it; cannot happen
		}
		p := c.tags.For(ref)
		if p == nil {
			continue
		}
		rp := ReportPolicy{Policy: p.String(), Chosen: im.Tag}
		if c.policy != nil {
			if ch, ok := c.policy.Choice(ref); ok && ch.Tag == im.Tag {
				rp.Candidates = ch.Candidates
			}
		}
		out[im.Reference] = rp
	}
	return out
}

// addChoices adds the tag policies' choices to the report's images.
func (r *Report) addChoices(choices map[string]ReportPolicy) {
	for i := range r.Images {
		if ch, ok := choices[r.Images[i].Name]; ok {
			r.Images[i].Policy = &ch
		}
	}
}

// keelPolicies returns the tag policies of the Pin with KeelAnnotations:
// Options.TagPolicies, and for each reference that a workload with a
// keel.sh/policy uses, the policy Keel's means for its tag. Every use of
// a reference must agree, those of workloads without Keel's annotations
// included: a reference is resolved once per run, and a workload without
// them is not to change.
func (p *Pinner) keelPolicies(ctx context.Context, in []byte) (*tagpolicy.TagPolicies, error) {
	uses, err := p.o.Renderer.KeelUses(ctx, in)
	if err != nil {
		return nil, err
	}
	ps := p.o.TagPolicies.Clone()
	type first struct {
		policy string
		use    renderer.KeelUse
	}
	seen := map[string]first{}
	for _, u := range uses {
		ref, err := name.ParseReference(u.Image)
		if err != nil {
			continue // Render says why
		}
		if _, pinned := ref.(name.Digest); pinned {
			continue
		}
		policy := ""
		if u.Policy != "" {
			tag := ""
			if t, ok := ref.(name.Tag); ok {
				tag = t.TagStr()
			}
			s, err := tagpolicy.KeelStrategy(tag, u.Policy, u.MatchTag)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", u.Where, u.Workload, err)
			}
			tp, err := tagpolicy.ParseTagPolicy(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: keel policy %q: %w", u.Where, u.Workload, u.Policy, err)
			}
			if tp.Strategy() != tagpolicy.StrategyDigest {
				policy = tp.String()
			}
			if err := ps.AddReference(ref, s); err != nil {
				return nil, err
			}
		} else if tp := p.o.TagPolicies.For(ref); tp != nil {
			policy = tp.String()
		}
		if f, ok := seen[ref.Name()]; ok && f.policy != policy {
			return nil, fmt.Errorf("%s: %s: %s would follow %s, but %s (%s) uses it with %s: digestpin resolves a reference one way per run; give both workloads the same keel.sh/policy",
				u.Where, u.Workload, u.Image, policyName(policy), f.use.Workload, f.use.Where, policyName(f.policy))
		}
		if _, ok := seen[ref.Name()]; !ok {
			seen[ref.Name()] = first{policy, u}
		}
	}
	return ps, nil
}

// policyName names a policy in a message.
func policyName(policy string) string {
	if policy == "" {
		return "its own tag"
	}
	return "policy " + policy
}
