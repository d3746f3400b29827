package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
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

// TestApplyConfig checks that a configuration file applied to Options
// adds its paths to the built-in ones, as the command's --config does:
// the Deployment, the Worker and the Runner's job are all pinned, the
// job with its checksum. Assigning the file's paths to the Renderer, as
// an embedder might, follows those alone: the Deployment stays unpinned.
func TestApplyConfig(t *testing.T) {
	cfg, err := config.Parse("digestpin.yaml", []byte(configFile))
	if err != nil {
		t.Fatal(err)
	}
	pinned := []string{"registry.example/app:1@", "registry.example/worker:1@", "registry.example/tool:1@"}

	o := Options{Registry: fixedRegistry}
	if err := o.ApplyConfig(cfg); err != nil {
		t.Fatalf("ApplyConfig() = %v", err)
	}
	if want := len(renderer.DefaultPodSpecPaths) + 1; len(o.Renderer.PodSpecPaths) != want {
		t.Errorf("ApplyConfig() pod spec paths = %d, want the %d built-in ones and the file's", len(o.Renderer.PodSpecPaths), want-1)
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

	// The trap ApplyConfig avoids: the Renderer's paths are exactly
	// those followed.
	trap := Options{Registry: fixedRegistry}
	trap.Renderer.PodSpecPaths = cfg.PodSpecPaths
	if out := pinWith(t, trap, configStream); strings.Contains(out, pinned[0]) {
		t.Errorf("a Renderer given only the file's pod spec paths pinned the Deployment:\n%s", out)
	}

	// The caller's own paths stay, the file's come after them.
	own := Options{Registry: fixedRegistry}
	own.Renderer.PodSpecPaths = cfg.PodSpecPaths[:1:1]
	if err := own.ApplyConfig(config.Config{PodSpecPaths: renderer.DefaultPodSpecPaths[:1]}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(cfg.PodSpecPaths[:1:1], renderer.DefaultPodSpecPaths[0]), own.Renderer.PodSpecPaths); diff != "" {
		t.Errorf("ApplyConfig() over the caller's paths (-want +got):\n%s", diff)
	}
}

// TestApplyConfigTagPolicies checks that the file's tag policies and
// filters are added to a copy of the caller's: the caller's TagPolicies,
// and the policies in it, stay as they were.
func TestApplyConfigTagPolicies(t *testing.T) {
	cfg, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\ntagPolicies: [shop/api=latest]\ntagAllow: [shop/web=^1, shop/api=^main-]\n"))
	if err != nil {
		t.Fatal(err)
	}
	callers := &resolve.TagPolicies{}
	if err := callers.Add("shop/web", "semver:~1.4"); err != nil {
		t.Fatal(err)
	}
	o := Options{TagPolicies: callers}
	if err := o.ApplyConfig(cfg); err != nil {
		t.Fatalf("ApplyConfig() = %v", err)
	}
	web, api := name.MustParseReference("shop/web:1.4"), name.MustParseReference("shop/api:main")
	if o.TagPolicies.Len() != 2 || o.TagPolicies.For(api) == nil {
		t.Errorf("ApplyConfig() tag policies = %d, want the caller's and the file's", o.TagPolicies.Len())
	}
	if got := o.TagPolicies.For(web).String(); !strings.Contains(got, "allow=^1") {
		t.Errorf("ApplyConfig() policy of shop/web = %s, want the file's filter", got)
	}
	if callers.Len() != 1 || strings.Contains(callers.For(web).String(), "allow") {
		t.Errorf("ApplyConfig() changed the caller's policies: %d, shop/web %s", callers.Len(), callers.For(web))
	}
}

// TestApplyConfigErrors checks that a tag policy of the file that does
// not parse names the file and the line, and changes nothing.
func TestApplyConfigErrors(t *testing.T) {
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
			err = o.ApplyConfig(cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("ApplyConfig() = %v, want an error starting %q", err, tc.want)
			}
			if o.Renderer.PodSpecPaths != nil || o.TagPolicies != nil {
				t.Errorf("ApplyConfig() changed the options although it failed: %+v", o)
			}
		})
	}
}

// TestNewValidatesRenderer checks that New refuses renderer settings that
// no document can make right, rather than the first Pin.
func TestNewValidatesRenderer(t *testing.T) {
	var o Options
	o.Renderer.ChecksumPaths = []renderer.ChecksumPath{{Group: "*", Kind: "Runner", Fields: []string{"spec"}}}
	var oe *OptionError
	if _, err := New(o); !errors.As(err, &oe) || oe.Field != "Renderer" || !strings.Contains(oe.Reason, "checksum path Runner=spec covers no image path") {
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
	return string(res.Output)
}

func ExampleOptions_ApplyConfig() {
	cfg, err := config.Parse("digestpin.yaml", []byte(configFile))
	if err != nil {
		fmt.Println(err)
		return
	}
	var o Options
	if err := o.ApplyConfig(cfg); err != nil {
		fmt.Println(err)
		return
	}
	// The built-in pod spec paths, then the file's.
	fmt.Println(len(o.Renderer.PodSpecPaths) == len(renderer.DefaultPodSpecPaths)+1)
	fmt.Println(o.Renderer.PodSpecPaths[len(o.Renderer.PodSpecPaths)-1])
	fmt.Println(o.Renderer.ChecksumPaths)
	// Output:
	// true
	// example.com/Worker=spec.pool.template.spec
	// [example.com/Runner=spec.jobs.*]
}
