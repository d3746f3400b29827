package pin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/renderer"
)

// ApplyConfig adds what a configuration file declares (see package
// config) to o, as the digestpin command's --config does; the command
// adds its flags' paths and tag policies after it.
//
// The file's paths are more paths. A renderer.Renderer follows exactly
// the PodSpecPaths and ImagePaths it is given (its defaults only where
// they are nil), so the file's come after o.Renderer's, or after
// renderer.DefaultPodSpecPaths and renderer.DefaultImagePaths where
// o.Renderer's are nil: a file never replaces the built-in paths. Its
// checksum paths come after o.Renderer's. Its tag policies and filters
// are added to a copy of o.TagPolicies (a new one when nil), each
// "IMAGE=VALUE" parsed as the command's --tag-policy, --tag-allow and
// --tag-ignore parse theirs.
//
// An error names the file (c.Name) and the line; o is then unchanged.
// ApplyConfig writes new slices, never into the caller's.
func (o *Options) ApplyConfig(c config.Config) error {
	// First the tag policies, the only declarations that can fail.
	policies := o.TagPolicies
	if len(c.TagPolicies)+len(c.TagAllow)+len(c.TagIgnore) > 0 {
		policies = o.TagPolicies.Clone()
		for _, f := range []struct {
			key, want string
			entries   []config.Entry
			add       func(image, value string) error
		}{
			{"tagPolicies", "IMAGE=STRATEGY", c.TagPolicies, policies.Add},
			{"tagAllow", "IMAGE=REGEXP", c.TagAllow, policies.Allow},
			{"tagIgnore", "IMAGE=REGEXP", c.TagIgnore, policies.Ignore},
		} {
			for _, e := range f.entries {
				if err := AddTagEntry(e.Value, f.want, f.add); err != nil {
					return fmt.Errorf("%s, line %d: %s: invalid %q: %w", cmp.Or(c.Name, "configuration"), e.Line, f.key, e.Value, err)
				}
			}
		}
	}
	// Then the paths: the caller's or the built-in ones, then the file's.
	r := &o.Renderer
	pods, images := r.PodSpecPaths, r.ImagePaths
	if pods == nil {
		pods = renderer.DefaultPodSpecPaths
	}
	if images == nil {
		images = renderer.DefaultImagePaths
	}
	r.PodSpecPaths = slices.Concat(pods, c.PodSpecPaths)
	r.ImagePaths = slices.Concat(images, c.ImagePaths)
	r.ChecksumPaths = slices.Concat(r.ChecksumPaths, c.ChecksumPaths)
	o.TagPolicies = policies
	return nil
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
