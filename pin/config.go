package pin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verification"
)

// AddConfig adds what a configuration file declares (see package config)
// to o, beneath what o holds already, as the digestpin command adds its
// --config file beneath its flags: o's settings win, the file's fill in.
//
// The file's paths are more paths. A renderer.Renderer follows exactly
// the PodSpecPaths and ImagePaths it is given (its defaults only where
// they are nil), so the file's come after o.Renderer's, or after
// kindpath.DefaultPodSpecs and kindpath.DefaultImages where
// o.Renderer's are nil: a file never replaces the built-in paths. Its
// checksum paths come after o.Renderer's.
//
// Its tag policies are added to a copy of o.TagPolicies (a new one when
// nil) for the images that o has no policy for: o's strategy wins. Then
// its filters are set on that copy, on o's policies or its own. Each
// "IMAGE=VALUE" is parsed as the command's --tag-policy, --tag-allow and
// --tag-ignore parse theirs; a filter needs a policy of its image.
//
// Its signature policies are added to a copy of o.Verify, after o's, and
// its trusted root is read unless o.Verify has one already (a command's
// --trusted-root); without any signature policy the trusted root is not
// read. Parsing them is the verifier's business: o.Verify must be
// verification.Configurable (package verify's *Policies is, even empty).
// When o.Verify is nil, New fails, naming the file's first policy, rather
// than pin without verifying; when it is not Configurable, AddConfig
// fails.
//
// An error names the file (c.Name) and the line; o is then unchanged.
// AddConfig writes new slices and policies, never into the caller's.
func (o *Options) AddConfig(c config.Config) error {
	file := cmp.Or(c.Name, "configuration")
	// First the tag policies and the signature policies, the
	// declarations that can fail.
	policies, err := addTagPolicies(o.TagPolicies, c, file)
	if err != nil {
		return err
	}
	signatures, err := addSignaturePolicies(o.Verify, c, file)
	if err != nil {
		return err
	}
	minAge, err := addMinAges(o.MinAge, c, file)
	if err != nil {
		return err
	}
	// Then the paths: the caller's or the built-in ones, then the file's.
	r := &o.Renderer
	pods, images := r.PodSpecPaths, r.ImagePaths
	if pods == nil {
		pods = kindpath.DefaultPodSpecs
	}
	if images == nil {
		images = kindpath.DefaultImages
	}
	r.PodSpecPaths = slices.Concat(pods, c.PodSpecPaths)
	r.ImagePaths = slices.Concat(images, c.ImagePaths)
	r.ChecksumPaths = slices.Concat(r.ChecksumPaths, c.ChecksumPaths)
	o.TagPolicies = policies
	o.Verify = signatures
	o.MinAge = minAge
	return nil
}

// addMinAges returns the waiting periods of c (minAge) with those of m
// over them, the same glob's or the default: m itself when c declares
// none.
func addMinAges(m *MinAges, c config.Config, file string) (*MinAges, error) {
	if len(c.MinAge) == 0 {
		return m, nil
	}
	fromFile := &MinAges{}
	for _, e := range c.MinAge {
		if err := fromFile.Add(e.Value); err != nil {
			return nil, fmt.Errorf("%s, line %d: minAge: %w", file, e.Line, err)
		}
	}
	return fromFile.with(m), nil
}

// addSignaturePolicies returns ps with the signature policies and the
// trusted root of c added as AddConfig adds them: ps itself when c
// declares none, else a copy; an unwired placeholder when ps is nil.
func addSignaturePolicies(ps verification.Policies, c config.Config, file string) (verification.Policies, error) {
	if _, ok := ps.(unwired); len(c.Verify) > 0 && (ps == nil || ok) {
		// Nothing here can parse a policy, and pinning without the
		// verification the file asks for is not an option: New fails.
		if !ok {
			ps = unwired{file: file, line: c.Verify[0].Line}
		}
		return ps, nil
	}
	configurable := func(where string) (verification.Configurable, error) {
		cp, ok := ps.(verification.Configurable)
		if !ok {
			return nil, fmt.Errorf("%s: the signature policies of Verify (%T) take none from a configuration file: they are not verification.Configurable", where, ps)
		}
		return cp, nil
	}
	if len(c.Verify) > 0 {
		cp, err := configurable(fmt.Sprintf("%s, line %d: verify", file, c.Verify[0].Line))
		if err != nil {
			return nil, err
		}
		for _, e := range c.Verify {
			if cp, err = cp.WithPolicy(e.Value); err != nil {
				return nil, fmt.Errorf("%s, line %d: verify: invalid %q: %w", file, e.Line, e.Value, err)
			}
		}
		ps = cp
	}
	if c.TrustedRoot != "" && ps != nil && len(ps.Policies()) > 0 && ps.TrustDigest() == "" {
		cp, err := configurable(file + ": trustedRoot")
		if err != nil {
			return nil, err
		}
		if ps, err = cp.WithTrustedRoot(c.TrustedRoot); err != nil {
			return nil, fmt.Errorf("%s: trustedRoot: %w", file, err)
		}
	}
	return ps, nil
}

// unwired stands for the signature policies of a configuration file that
// AddConfig had no verifier to give to: it has none, and fails Check, so
// that New fails rather than pin without verifying.
type unwired struct {
	file string
	line int
}

var _ verification.Policies = unwired{}

func (u unwired) reason() string {
	return fmt.Sprintf("is nil, but %s, line %d declares signature policies (verify): set Verify to what verifies them (package verify's Policies, for one) before AddConfig", u.file, u.line)
}

func (u unwired) Policy(name.Repository) verification.Policy { return nil }
func (u unwired) Policies() []verification.Policy            { return nil }
func (u unwired) TrustDigest() string                        { return "" }
func (u unwired) Check() error {
	return fmt.Errorf("%s, line %d declares signature policies (verify), and nothing verifies them", u.file, u.line)
}
func (u unwired) Verifier(verification.Registry) (verification.Verifier, error) {
	return nil, u.Check()
}

// addTagPolicies returns ps with the tag policies and filters of c added
// as AddConfig adds them: ps itself when c declares none, else a copy.
func addTagPolicies(ps *tagpolicy.TagPolicies, c config.Config, file string) (*tagpolicy.TagPolicies, error) {
	if len(c.TagPolicies)+len(c.TagAllow)+len(c.TagIgnore) == 0 {
		return ps, nil
	}
	own := ps
	ps = ps.Clone()
	for _, f := range []struct {
		key, want string
		entries   []config.Entry
		add       func(image, value string) error
	}{
		{"tagPolicies", "IMAGE=STRATEGY", c.TagPolicies, func(image, strategy string) error {
			if !own.Has(image) {
				return ps.Add(image, strategy)
			}
			// The caller's policy wins; the file's must still parse.
			_, err := tagpolicy.ParseTagPolicy(strategy)
			return err
		}},
		{"tagAllow", "IMAGE=REGEXP", c.TagAllow, ps.Allow},
		{"tagIgnore", "IMAGE=REGEXP", c.TagIgnore, ps.Ignore},
	} {
		for _, e := range f.entries {
			if err := AddTagEntry(e.Value, f.want, f.add); err != nil {
				return nil, fmt.Errorf("%s, line %d: %s: invalid %q: %w", file, e.Line, f.key, e.Value, err)
			}
		}
	}
	return ps, nil
}

// AddTagEntry parses entry, "IMAGE=VALUE" as a tag policy or filter is
// written (want names the form for the error, e.g. "IMAGE=STRATEGY"), and
// adds it with add: TagPolicies.Add, Allow or Ignore.
func AddTagEntry(entry, want string, add func(image, value string) error) error {
	image, value, ok := strings.Cut(entry, "=")
	if !ok {
		return fmt.Errorf("want %s", want)
	}
	return add(image, value)
}
