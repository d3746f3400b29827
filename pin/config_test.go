package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verification"
	"github.com/digestpin/digestpin/verify"
)

// fixedRegistry resolves every reference to the SHA-256 of its name.
var fixedRegistry = resolution.Func(func(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	sum := sha256.Sum256([]byte(ref.Name()))
	return resolution.Resolution{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Source: resolution.Registry}, nil
})

// configFile declares a pod spec path of a CRD, and an image path with
// a checksum path.
const configFile = `apiVersion: digestpin.dev/v1alpha1
kind: Config
podSpecPaths:
  - example.com/Worker=spec.pool.template.spec
imagePaths:
  - example.com/Runner=spec.jobs.*.tool
checksumPaths:
  - example.com/Runner=spec.jobs.*
`

// configStream uses every path: a Deployment (a built-in pod spec path),
// a Worker (the file's) and a Runner (the file's image path).
const configStream = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: app
        image: registry.example/app:1
---
apiVersion: example.com/v1
kind: Worker
metadata:
  name: w
spec:
  pool:
    template:
      spec:
        containers:
        - name: app
          image: registry.example/worker:1
---
apiVersion: example.com/v1
kind: Runner
metadata:
  name: r
spec:
  jobs:
  - tool: registry.example/tool:1
`

// TestAddConfig checks that a configuration file applied to Options
// adds its paths to the built-in ones, as the command's --config does:
// the Deployment, the Worker and the Runner's job are all pinned, the
// job with its checksum. Assigning the file's paths to the Renderer, as
// an embedder might, follows those alone: the Deployment stays unpinned.
func TestAddConfig(t *testing.T) {
	cfg, err := config.Parse("digestpin.yaml", []byte(configFile))
	if err != nil {
		t.Fatal(err)
	}
	pinned := []string{"registry.example/app:1@", "registry.example/worker:1@", "registry.example/tool:1@"}

	o := Options{Registry: fixedRegistry}
	if err := o.AddConfig(cfg); err != nil {
		t.Fatalf("AddConfig() = %v", err)
	}
	if want := len(kindpath.DefaultPodSpecs) + 1; len(o.Renderer.PodSpecPaths) != want {
		t.Errorf("AddConfig() pod spec paths = %d, want the %d built-in ones and the file's", len(o.Renderer.PodSpecPaths), want-1)
	}
	out := pinWith(t, o, configStream)
	for _, p := range pinned {
		if !strings.Contains(out, p) {
			t.Errorf("Pin() left %s unpinned:\n%s", strings.TrimSuffix(p, "@"), out)
		}
	}
	if strings.Count(out, "checksum/images") != 3 {
		t.Errorf("Pin() wrote %d checksums, want the Deployment's, the Worker's and the job's:\n%s", strings.Count(out, "checksum/images"), out)
	}

	// The trap AddConfig avoids: the Renderer's paths are exactly
	// those followed.
	trap := Options{Registry: fixedRegistry}
	trap.Renderer.PodSpecPaths = cfg.PodSpecPaths
	if out := pinWith(t, trap, configStream); strings.Contains(out, pinned[0]) {
		t.Errorf("a Renderer given only the file's pod spec paths pinned the Deployment:\n%s", out)
	}

	// The caller's own paths stay, the file's come after them.
	own := Options{Registry: fixedRegistry}
	own.Renderer.PodSpecPaths = cfg.PodSpecPaths[:1:1]
	if err := own.AddConfig(config.Config{PodSpecPaths: kindpath.DefaultPodSpecs[:1]}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(cfg.PodSpecPaths[:1:1], kindpath.DefaultPodSpecs[0]), own.Renderer.PodSpecPaths); diff != "" {
		t.Errorf("AddConfig() over the caller's paths (-want +got):\n%s", diff)
	}
}

// TestAddConfigTagPolicies checks that the file's tag policies and
// filters are added to a copy of the caller's: the caller's TagPolicies,
// and the policies in it, stay as they were.
func TestAddConfigTagPolicies(t *testing.T) {
	cfg, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\ntagPolicies: [shop/api=latest]\ntagAllow: [shop/web=^1, shop/api=^main-]\n"))
	if err != nil {
		t.Fatal(err)
	}
	callers := &tagpolicy.TagPolicies{}
	if err := callers.Add("shop/web", "semver:~1.4"); err != nil {
		t.Fatal(err)
	}
	o := Options{TagPolicies: callers}
	if err := o.AddConfig(cfg); err != nil {
		t.Fatalf("AddConfig() = %v", err)
	}
	web, api := name.MustParseReference("shop/web:1.4"), name.MustParseReference("shop/api:main")
	if o.TagPolicies.Len() != 2 || o.TagPolicies.For(api) == nil {
		t.Errorf("AddConfig() tag policies = %d, want the caller's and the file's", o.TagPolicies.Len())
	}
	if got := o.TagPolicies.For(web).String(); !strings.Contains(got, "allow=^1") {
		t.Errorf("AddConfig() policy of shop/web = %s, want the file's filter", got)
	}
	if callers.Len() != 1 || strings.Contains(callers.For(web).String(), "allow") {
		t.Errorf("AddConfig() changed the caller's policies: %d, shop/web %s", callers.Len(), callers.For(web))
	}
}

// TestAddConfigErrors checks that a tag policy of the file that does
// not parse names the file and the line, and changes nothing.
func TestAddConfigErrors(t *testing.T) {
	for _, tc := range []struct{ desc, entry, want string }{
		{desc: "no strategy", entry: "tagPolicies: [registry.example/shop/web]", want: `digestpin.yaml, line 3: tagPolicies: invalid "registry.example/shop/web": want IMAGE=STRATEGY`},
		{desc: "a bad strategy", entry: "tagPolicies: [registry.example/shop/web=newest]", want: `digestpin.yaml, line 3: tagPolicies: invalid "registry.example/shop/web=newest": `},
		{desc: "a bad expression", entry: "tagPolicies: [shop/web=latest]\ntagAllow: [shop/web=(]", want: `digestpin.yaml, line 4: tagAllow: invalid "shop/web=(": `},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\n"+tc.entry+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			var o Options
			err = o.AddConfig(cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("AddConfig() = %v, want an error starting %q", err, tc.want)
			}
			if o.Renderer.PodSpecPaths != nil || o.TagPolicies != nil {
				t.Errorf("AddConfig() changed the options although it failed: %+v", o)
			}
		})
	}
}

// TestNewValidatesRenderer checks that New refuses renderer settings that
// no document can make right, rather than the first Pin.
func TestNewValidatesRenderer(t *testing.T) {
	var o Options
	o.Renderer.ChecksumPaths = []kindpath.Checksum{{Group: "*", Kind: "Runner", Fields: []string{"spec"}}}
	var oe *OptionError
	if _, err := New(o); !errors.As(err, &oe) || oe.Field != "Renderer" || oe.Err == nil || !strings.Contains(oe.Err.Error(), "checksum path Runner=spec covers no image path") {
		t.Errorf("New() = %v, want an OptionError for Renderer", err)
	}
}

// pinWith pins in with o and returns the output.
func pinWith(t *testing.T, o Options, in string) string {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	res, err := p.Pin(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Pin() = %v", err)
	}
	return string(res.Bytes())
}

func ExampleOptions_AddConfig() {
	cfg, err := config.Parse("digestpin.yaml", []byte(configFile))
	if err != nil {
		fmt.Println(err)
		return
	}
	var o Options
	if err := o.AddConfig(cfg); err != nil {
		fmt.Println(err)
		return
	}
	// The built-in pod spec paths, then the file's.
	fmt.Println(len(o.Renderer.PodSpecPaths) == len(kindpath.DefaultPodSpecs)+1)
	fmt.Println(o.Renderer.PodSpecPaths[len(o.Renderer.PodSpecPaths)-1])
	fmt.Println(o.Renderer.ChecksumPaths)
	// Output:
	// true
	// example.com/Worker=spec.pool.template.spec
	// [example.com/Runner=spec.jobs.*]
}

// TestAddConfigBeneath checks that a file adds beneath what the Options
// hold (a command's flags): their tag strategies and trusted root win,
// the file's filters, policies of other images and signature policies
// come after; a bad entry names the file and the line and changes
// nothing.
func TestAddConfigBeneath(t *testing.T) {
	web := name.MustParseReference("shop/web:1.4")
	api := name.MustParseReference("shop/api:1")
	withPolicy := func(image, strategy string) Options {
		ps := &tagpolicy.TagPolicies{}
		if err := ps.Add(image, strategy); err != nil {
			t.Fatal(err)
		}
		return Options{TagPolicies: ps}
	}
	withVerify := func(spec, trust string) Options {
		ps := &verify.Policies{}
		if err := ps.Add(spec); err != nil {
			t.Fatal(err)
		}
		if trust != "" {
			ps.SetTrustedMaterial(nil, trust)
		}
		return Options{Verify: ps}
	}
	missing := filepath.Join(t.TempDir(), "trusted_root.json")
	for _, tc := range []struct {
		desc    string
		own     Options
		keys    string
		want    string // an error starting so; "" for none
		tags    map[name.Reference]string
		globs   []string // the signature policies, in order
		trusted string   // their trusted root's digest
	}{
		{
			desc: "the options' strategy wins, the file's filter applies",
			own:  withPolicy("shop/web", "semver:~1.4"),
			keys: "tagPolicies: [shop/web=latest, shop/api=latest]\ntagAllow: [shop/web=^1]\n",
			tags: map[name.Reference]string{web: "semver:~1.4 allow=^1", api: "latest"},
		},
		{
			desc: "the file's filter of the options' policy",
			own:  withPolicy("shop/web", "latest"),
			keys: "tagIgnore: [shop/web=-rc]\n",
			tags: map[name.Reference]string{web: "latest ignore=-rc", api: "<nil>"},
		},
		{
			desc: "a strategy of the file that does not parse, beneath the options' one",
			own:  withPolicy("shop/web", "latest"),
			keys: "tagPolicies: [shop/web=newest]\n",
			want: `digestpin.yaml, line 3: tagPolicies: invalid "shop/web=newest": parsing tag policy "newest"`,
		},
		{
			desc: "a filter of the file without any policy",
			own:  withPolicy("shop/web", "latest"),
			keys: "tagAllow: [shop/api=^1]\n",
			want: `digestpin.yaml, line 3: tagAllow: invalid "shop/api=^1": shop/api has no tag policy`,
		},
		{
			desc:  "signature policies after the options'",
			own:   withVerify("registry.example/shop/**=none", ""),
			keys:  "verify: ['registry.example/other/**=none']\n",
			globs: []string{"registry.example/shop/**", "registry.example/other/**"},
		},
		{
			desc: "a glob of the options' again",
			own:  withVerify("registry.example/shop/**=none", ""),
			keys: "verify: ['registry.example/shop/**=none']\n",
			want: `digestpin.yaml, line 3: verify: invalid "registry.example/shop/**=none": registry.example/shop/** has a policy already`,
		},
		{
			desc:    "the options' trusted root wins: the file's is not read",
			own:     withVerify("registry.example/shop/**=none", "sha256:flag"),
			keys:    "trustedRoot: " + missing + "\n",
			globs:   []string{"registry.example/shop/**"},
			trusted: "sha256:flag",
		},
		{
			desc: "the file's trusted root, read",
			own:  withVerify("registry.example/shop/**=none", ""),
			keys: "trustedRoot: " + missing + "\n",
			want: "digestpin.yaml: trustedRoot: reading trusted root open " + missing,
		},
		{
			desc: "a trusted root without signature policies is not read",
			keys: "trustedRoot: " + missing + "\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\n"+tc.keys))
			if err != nil {
				t.Fatal(err)
			}
			o := tc.own
			before := fmt.Sprint(o.TagPolicies.For(web), globsOf(o.Verify))
			err = o.AddConfig(cfg)
			if after := fmt.Sprint(tc.own.TagPolicies.For(web), globsOf(tc.own.Verify)); after != before {
				t.Errorf("AddConfig() changed the caller's policies: %s, was %s", after, before)
			}
			if tc.want != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("AddConfig() = %v, want an error starting %q", err, tc.want)
				}
				if o.TagPolicies != tc.own.TagPolicies || o.Verify != tc.own.Verify || o.Renderer.PodSpecPaths != nil {
					t.Errorf("AddConfig() changed the options although it failed")
				}
				return
			}
			if err != nil {
				t.Fatalf("AddConfig() = %v", err)
			}
			for ref, want := range tc.tags {
				if got := fmt.Sprint(o.TagPolicies.For(ref)); got != want {
					t.Errorf("AddConfig() policy of %s = %s, want %s", ref, got, want)
				}
			}
			if diff := cmp.Diff(tc.globs, globsOf(o.Verify)); diff != "" {
				t.Errorf("AddConfig() signature policies (-want +got):\n%s", diff)
			}
			if got := trustOf(o.Verify); got != tc.trusted {
				t.Errorf("AddConfig() trusted root = %q, want %q", got, tc.trusted)
			}
		})
	}
}

// globsOf returns the globs of ps, which may be nil, in order.
func globsOf(ps verification.Policies) []string {
	if ps == nil {
		return nil
	}
	var globs []string
	for _, p := range ps.Policies() {
		globs = append(globs, p.Glob())
	}
	return globs
}

// trustOf returns the trusted root's digest of ps, which may be nil.
func trustOf(ps verification.Policies) string {
	if ps == nil {
		return ""
	}
	return ps.TrustDigest()
}
