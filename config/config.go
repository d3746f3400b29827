package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/kindpath"
)

// APIVersion and Kind identify a digestpin configuration file.
const (
	APIVersion = "digestpin.dev/v1alpha1"
	Kind       = "Config"
)

// MaxSize bounds the size of a configuration file.
const MaxSize = 1 << 20

// Config is what a configuration file declares, beyond the built-in
// defaults. The zero value declares nothing.
//
// Its paths are more paths, to be added to the built-in ones
// (kindpath.DefaultPodSpecs, kindpath.DefaultImages), while
// renderer.Renderer's PodSpecPaths and ImagePaths are exactly the paths
// followed: apply a Config with pin.Options.AddConfig, as the digestpin
// command does, rather than assign its paths to a Renderer (which would
// then follow none of the built-in ones).
type Config struct {
	// Name is the file's name in messages: what Parse was given (Load's
	// path).
	Name string
	// PodSpecPaths are more pod specs to scan (podSpecPaths).
	PodSpecPaths []kindpath.PodSpec
	// ImagePaths are more image fields (imagePaths).
	ImagePaths []kindpath.Image
	// ChecksumPaths say where the checksum of image fields goes
	// (checksumPaths).
	ChecksumPaths []kindpath.Checksum

	// TagPolicies, TagAllow and TagIgnore are tag policies and their
	// filters (tagPolicies, tagAllow, tagIgnore), as the flags
	// --tag-policy ("IMAGE=STRATEGY"), --tag-allow and --tag-ignore
	// ("IMAGE=REGEXP") take them. Parse checks that each is a string;
	// whoever builds the policies checks the rest with the flags' parser
	// (this package does not import the resolver), naming Entry.Line.
	TagPolicies, TagAllow, TagIgnore []Entry
	// Verify are signature policies (verify), "IMAGE-GLOB=POLICY" as
	// --verify takes them; key files are read relative to the working
	// directory, as the flag's are.
	Verify []Entry
	// MinAge are waiting periods for new digests (minAge), "DURATION"
	// or "IMAGE-GLOB=DURATION" as --min-age takes them; the flags' replace
	// the file's for the same glob (or the default). Parse checks that
	// each is a string; package pin checks the rest, naming Entry.Line.
	MinAge []Entry
	// TrustedRoot is the Sigstore trusted root file of keyless policies
	// (trustedRoot), as --trusted-root takes it; "" when not declared.
	TrustedRoot string
}

// Entry is one string of a list of the file, and its line.
type Entry struct {
	Value string
	Line  int
}

// Load reads the configuration file at path, a regular file of at most
// MaxSize bytes, and parses it.
func Load(path string) (Config, error) {
	b, err := readfile.Regular(path, MaxSize)
	if err != nil {
		return Config{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return Parse(path, b)
}

// keys are the keys of a configuration file, each with the function
// that sets it from its value. apiVersion and kind are checked apart.
var keys = map[string]func(c *Config, v *yaml.Node) error{
	"podSpecPaths": func(c *Config, v *yaml.Node) error {
		return eachString(v, func(n *yaml.Node) error {
			p, err := kindpath.ParsePodSpec(n.Value)
			c.PodSpecPaths = append(c.PodSpecPaths, p)
			return err
		})
	},
	"imagePaths": func(c *Config, v *yaml.Node) error {
		return eachString(v, func(n *yaml.Node) error {
			p, err := kindpath.ParseImage(n.Value)
			c.ImagePaths = append(c.ImagePaths, p)
			return err
		})
	},
	"checksumPaths": func(c *Config, v *yaml.Node) error {
		return eachString(v, func(n *yaml.Node) error {
			p, err := kindpath.ParseChecksum(n.Value)
			c.ChecksumPaths = append(c.ChecksumPaths, p)
			return err
		})
	},
	"tagPolicies": func(c *Config, v *yaml.Node) error { return entries(v, &c.TagPolicies) },
	"tagAllow":    func(c *Config, v *yaml.Node) error { return entries(v, &c.TagAllow) },
	"tagIgnore":   func(c *Config, v *yaml.Node) error { return entries(v, &c.TagIgnore) },
	"verify":      func(c *Config, v *yaml.Node) error { return entries(v, &c.Verify) },
	"minAge":      func(c *Config, v *yaml.Node) error { return entries(v, &c.MinAge) },
	"trustedRoot": func(c *Config, v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value == "" {
			return &lineError{line: v.Line, err: errors.New("trustedRoot: want a file name")}
		}
		c.TrustedRoot = v.Value
		return nil
	},
}

// entries appends the strings of list v to *to, with their lines.
func entries(v *yaml.Node, to *[]Entry) error {
	return eachString(v, func(n *yaml.Node) error {
		*to = append(*to, Entry{Value: n.Value, Line: n.Line})
		return nil
	})
}

// known lists the keys of a configuration file for messages.
const known = "apiVersion, kind, podSpecPaths, imagePaths, checksumPaths, tagPolicies, tagAllow, tagIgnore, verify, trustedRoot, minAge"

// lineError is an error at a line of the file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }

// at returns an error at node n's line.
func at(n *yaml.Node, format string, args ...any) error {
	return &lineError{n.Line, fmt.Errorf(format, args...)}
}

// Parse parses the configuration file b, named name in errors
// ("digestpin.yaml, line 7: …").
func Parse(name string, b []byte) (Config, error) {
	c, err := parse(b)
	var le *lineError
	switch {
	case errors.As(err, &le):
		return Config{}, fmt.Errorf("%s, line %d: %w", name, le.line, le.err)
	case err != nil:
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	c.Name = name
	return c, nil
}

func parse(b []byte) (Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("empty: want apiVersion: %s and kind: %s", APIVersion, Kind)
		}
		return Config{}, fmt.Errorf("malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return Config{}, at(&next, "a second YAML document: a configuration file holds one")
	} else if !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	m := &doc
	if m.Kind == yaml.DocumentNode && len(m.Content) == 1 {
		m = m.Content[0]
	}
	if m.Kind != yaml.MappingNode {
		return Config{}, at(m, "want a mapping with apiVersion: %s and kind: %s", APIVersion, Kind)
	}
	// First, every key must be one this version knows, written once, so
	// that a typo fails rather than leaves a declaration out.
	values := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			return Config{}, at(k, "a merge key (<<): write the keys out (keys: %s)", known)
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return Config{}, at(k, "a key that is not a string (keys: %s)", known)
		}
		if _, ok := keys[k.Value]; !ok && k.Value != "apiVersion" && k.Value != "kind" {
			return Config{}, at(k, "unknown key %q (keys: %s)", k.Value, known)
		}
		if values[k.Value] != nil {
			return Config{}, at(k, "%s is given twice", k.Value)
		}
		values[k.Value] = m.Content[i+1]
	}
	// Then the version: a file of another version or kind may mean
	// something else by the same keys.
	for _, f := range []struct{ key, want string }{{"apiVersion", APIVersion}, {"kind", Kind}} {
		v := values[f.key]
		switch {
		case v == nil:
			return Config{}, at(m, "no %s: want %s: %s", f.key, f.key, f.want)
		case v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value != f.want:
			return Config{}, at(v, "%s is %s, want %s", f.key, describe(v), f.want)
		}
	}
	// Finally the declarations, in the order of the file.
	var c Config
	for i := 0; i+1 < len(m.Content); i += 2 {
		set := keys[m.Content[i].Value]
		if set == nil {
			continue
		}
		if err := set(&c, m.Content[i+1]); err != nil {
			var le *lineError
			if errors.As(err, &le) {
				return Config{}, &lineError{le.line, fmt.Errorf("%s: %w", m.Content[i].Value, le.err)}
			}
			return Config{}, at(m.Content[i+1], "%s: %w", m.Content[i].Value, err)
		}
	}
	return c, nil
}

// eachString calls fn with each item of v, a sequence of strings (or
// null: none), and returns its first error at the item's line.
func eachString(v *yaml.Node, fn func(n *yaml.Node) error) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return at(v, "want a list of strings, found %s", describe(v))
	}
	for _, n := range v.Content {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return at(n, "want a string, found %s", describe(n))
		}
		if err := fn(n); err != nil {
			return at(n, "%w", err)
		}
	}
	return nil
}

// describe names a node for messages: `"digestpin.dev/v1"`, `a mapping`,
// `int 3`.
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias (*" + n.Value + ")"
	case n.Tag == "!!str":
		return fmt.Sprintf("%q", n.Value)
	case n.Tag == "!!null":
		return "empty"
	}
	return strings.TrimPrefix(n.Tag, "!!") + " " + n.Value
}
