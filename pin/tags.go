package pin

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
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
func (c *chain) withPolicies(o *Options, next resolution.Resolver, tags resolve.TagSource, opts ...resolve.PolicyOption) (resolution.Resolver, error) {
	if c.tags.Len() == 0 {
		return next, nil
	}
	if o.MaxTags > 0 {
		opts = append(opts, resolve.WithMaxTags(o.MaxTags))
	}
	p, err := resolve.NewPolicyResolver(next, tags, c.tags, opts...)
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
	repo := resolve.RepositoryOf(ref)
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
