package pinflags

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verify"
)

// TestFlagValues sets each Value as a flag (or its variable) would and
// checks what it writes into the option it binds, or the error that
// names what is wrong; a refused value leaves the option as it was.
func TestFlagValues(t *testing.T) {
	t.Parallel()
	var (
		mode       renderer.Mode
		keep       bool
		annotation string
		platform   *v1.Platform
		jobs       int
		timeout    time.Duration
		paths      []kindpath.PodSpec
		mirrors    []resolve.Mirror
		filters    []string
		policies   *tagpolicy.TagPolicies
		signatures *verify.Policies
	)
	values := map[string]pflag.Value{
		"mode":          newModeValue(&mode, renderer.ModePin),
		"on-error":      newOnErrorValue(&keep),
		"annotation":    newAnnotationValue(&annotation, renderer.DefaultChecksumAnnotation),
		"platform":      platformValue{&platform},
		"jobs":          newPositiveIntValue(&jobs, 32),
		"timeout":       newPositiveDurationValue(&timeout, 2*time.Minute, "2m"),
		"pod-spec-path": newListValue(&paths, true, kindpath.ParsePodSpec),
		"mirror":        newListValue(&mirrors, true, parseMirror),
		"tag-allow":     newListValue(&filters, false, parseTagFilter),
		"tag-policy":    tagPolicyValue(&policies),
		"verify":        verifyValue(&signatures),
	}
	// got reports the option of a value, as the test compares it.
	got := func(value string) string {
		switch value {
		case "mode":
			return string(mode)
		case "on-error":
			return fmt.Sprint(keep)
		case "annotation":
			return annotation
		case "platform":
			if platform == nil {
				return "<nil>"
			}
			return platform.String()
		case "jobs":
			return fmt.Sprint(jobs)
		case "timeout":
			return timeout.String()
		case "pod-spec-path":
			return fmt.Sprint(paths)
		case "mirror":
			return fmt.Sprint(mirrors)
		case "tag-allow":
			return strings.Join(filters, " ")
		case "tag-policy":
			return fmt.Sprint(policies.For(name.MustParseReference("shop/web:1")))
		case "verify":
			return fmt.Sprint(signatures.Len())
		}
		panic(value)
	}
	// The defaults, as the help shows them (lists: none).
	for value, want := range map[string]string{
		"mode": "pin", "on-error": "fail", "annotation": renderer.DefaultChecksumAnnotation, "platform": "",
		"jobs": "32", "timeout": "2m0s", "pod-spec-path": "", "mirror": "", "tag-allow": "", "tag-policy": "", "verify": "",
	} {
		if s := values[value].String(); s != want {
			t.Errorf("%s: String() = %q before any Set, want %q", value, s, want)
		}
	}
	for _, tc := range []struct {
		value, in string
		want      string // the option after Set
		err       string // the error, "" for none
	}{
		{value: "mode", in: "digest", want: "digest"},
		{value: "mode", in: "sideways", want: "digest", err: "want pin, digest or annotate"},
		{value: "on-error", in: "keep", want: "true"},
		{value: "on-error", in: "ignore", want: "true", err: "want fail or keep"},
		{value: "on-error", in: "fail", want: "false"},
		{value: "annotation", in: "example.com/images", want: "example.com/images"},
		{value: "annotation", in: "a/b/c", want: "example.com/images", err: `annotation name "a/b/c": at most one '/'`},
		{value: "platform", in: "linux/arm64/v8", want: "linux/arm64/v8"},
		{value: "platform", in: "linux", want: "linux/arm64/v8", err: "want os/arch[/variant], e.g. linux/amd64"},
		{value: "platform", in: "/amd64", want: "linux/arm64/v8", err: "want os/arch"},
		{value: "platform", in: "", want: "<nil>"},
		{value: "jobs", in: "8", want: "8"},
		{value: "jobs", in: "0x10", want: "16"},
		{value: "jobs", in: "0", want: "16", err: "want at least 1"},
		{value: "jobs", in: "many", want: "16", err: "want a whole number"},
		{value: "timeout", in: "5s", want: "5s"},
		{value: "timeout", in: "0s", want: "5s", err: "want a positive duration, e.g. 2m"},
		{value: "timeout", in: "soon", want: "5s", err: `invalid duration "soon"`},
		{value: "pod-spec-path", in: "example.com/Worker=spec.template.spec", want: "[example.com/Worker=spec.template.spec]"},
		{value: "pod-spec-path", in: `A=spec.a,"B=spec.b"`, want: "[example.com/Worker=spec.template.spec A=spec.a B=spec.b]"},
		{value: "pod-spec-path", in: "A=spec.a,bad", want: "[example.com/Worker=spec.template.spec A=spec.a B=spec.b]", err: `parsing pod spec path "bad"`},
		{value: "mirror", in: "docker.io=mirror.example/hub", want: "[{docker.io mirror.example/hub}]"},
		{value: "mirror", in: "docker.io", want: "[{docker.io mirror.example/hub}]", err: "want FROM=TO"},
		{value: "tag-allow", in: "shop/web=^1,2", want: "shop/web=^1,2"},
		{value: "tag-allow", in: "shop/web=(", want: "shop/web=^1,2", err: `parsing regular expression "("`},
		{value: "tag-allow", in: "shop/web", want: "shop/web=^1,2", err: "want IMAGE=REGEXP"},
		{value: "tag-policy", in: "shop/web=latest", want: "latest"},
		{value: "tag-policy", in: "shop/web=semver:~1.4", want: "semver:~1.4"},
		{value: "tag-policy", in: "shop/web=newest", want: "semver:~1.4", err: `parsing tag policy "newest"`},
		{value: "tag-policy", in: "shop/web", want: "semver:~1.4", err: "want IMAGE=STRATEGY"},
		{value: "verify", in: "registry.example/**=none", want: "1"},
		{value: "verify", in: "registry.example/**=none", want: "1", err: "has a policy already"},
		{value: "verify", in: "registry.example/other/**=cosign:x", want: "1", err: `term "cosign:x": unknown policy`},
	} {
		t.Run(tc.value+" "+tc.in, func(t *testing.T) {
			err := values[tc.value].Set(tc.in)
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Set(%q) = %v, want an error containing %q", tc.in, err, tc.err)
			}
			if g := got(tc.value); g != tc.want {
				t.Errorf("after Set(%q): %s = %s, want %s", tc.in, tc.value, g, tc.want)
			}
		})
	}
	for value, want := range map[string]string{"pod-spec-path": "stringSlice", "tag-allow": "stringArray", "tag-policy": "stringArray", "jobs": "int", "timeout": "duration", "mode": "string"} {
		if typ := values[value].Type(); typ != want {
			t.Errorf("%s: Type() = %q, want %q (the help and the completion read it)", value, typ, want)
		}
	}
}

// TestAddFlagsAddsToDefaults checks that the path flags add to the
// built-in paths, which the Renderer follows exactly once it has any.
func TestAddFlagsAddsToDefaults(t *testing.T) {
	t.Parallel()
	var o Options
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--pod-spec-path", "example.com/Worker=spec.template.spec", "--image-path", "example.com/Job=spec.tool"}); err != nil {
		t.Fatal(err)
	}
	r := o.Pin.Renderer
	if diff := cmp.Diff(append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], kindpath.PodSpec{Group: "example.com", Kind: "Worker", Fields: []string{"spec", "template", "spec"}}), r.PodSpecPaths); diff != "" {
		t.Errorf("pod spec paths (-want +got):\n%s", diff)
	}
	if len(r.ImagePaths) != len(kindpath.DefaultImages)+1 {
		t.Errorf("image paths = %d, want the %d built-in ones and the flag's", len(r.ImagePaths), len(kindpath.DefaultImages))
	}
	// The built-in lists themselves are never written: a second
	// command line starts from them again.
	var o2 Options
	o2.AddFlags(pflag.NewFlagSet("digestpin", pflag.ContinueOnError))
	if diff := cmp.Diff(kindpath.DefaultPodSpecs, o2.Pin.Renderer.PodSpecPaths); diff != "" {
		t.Errorf("pod spec paths of a second command line (-want +got):\n%s", diff)
	}
}
