package pin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/resolve"
)

// TestRegistryPlatform checks Platform with a caller's Registry, which
// resolves by reference alone: the platform the lock file and the report
// name must be the one the Registry resolved for. New refuses a Platform
// that the Registry does not say it resolves for; a Registry that says
// so (a resolve.Resolver made with WithPlatform) is taken at its word,
// with or without Platform.
func TestRegistryPlatform(t *testing.T) {
	reg := testregistry.New(t)
	index, children := reg.PushIndex(t, "shop/web:1", "linux/amd64", "linux/arm64")
	arm := &v1.Platform{OS: "linux", Architecture: "arm64"}
	amd := &v1.Platform{OS: "linux", Architecture: "amd64"}
	registry := func(t *testing.T, p *v1.Platform) *resolve.Resolver {
		t.Helper()
		r, err := resolve.New(resolve.WithPlatform(p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		desc     string
		registry func(t *testing.T) Options
		refused  string // the OptionError's reason, starting
		platform string // of the lock file's entry
		digest   v1.Hash
	}{
		{
			desc:     "a Registry that does not say its platform",
			registry: func(t *testing.T) Options { return Options{Registry: refuse(t), Platform: arm} },
			refused:  "linux/arm64 with a Registry that does not say which platform it resolves for",
		},
		{
			desc:     "a Registry for another platform",
			registry: func(t *testing.T) Options { return Options{Registry: registry(t, amd), Platform: arm} },
			refused:  "linux/arm64, but the Registry resolves for linux/amd64",
		},
		{
			desc:     "a Registry for the index",
			registry: func(t *testing.T) Options { return Options{Registry: registry(t, nil), Platform: arm} },
			refused:  "linux/arm64, but the Registry resolves for the multi-platform index",
		},
		{
			desc:     "a Registry for the platform",
			registry: func(t *testing.T) Options { return Options{Registry: registry(t, arm), Platform: arm} },
			platform: "linux/arm64", digest: children["linux/arm64"],
		},
		{
			// The lock file said "" here: the platform's digests passed
			// for the index's, in the lock file and in a shared cache.
			desc:     "a Registry for a platform, without Platform",
			registry: func(t *testing.T) Options { return Options{Registry: registry(t, arm)} },
			platform: "linux/arm64", digest: children["linux/arm64"],
		},
		{
			desc:     "a Registry for the index, without Platform",
			registry: func(t *testing.T) Options { return Options{Registry: registry(t, nil)} },
			platform: "", digest: index,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := tc.registry(t)
			o.WriteLock = filepath.Join(t.TempDir(), "digests.lock")
			p, err := New(o)
			if tc.refused != "" {
				var oe *OptionError
				if !errors.As(err, &oe) || oe.Field != "Platform" || !strings.HasPrefix(oe.Reason, tc.refused) {
					t.Fatalf("New() = %v, want an OptionError for Platform starting %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			res, err := p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("shop/web:1")))
			if err != nil {
				t.Fatalf("Pin() = %v", err)
			}
			if err := res.Commit(); err != nil {
				t.Fatal(err)
			}
			l, err := lockfile.Read(o.WriteLock)
			if err != nil {
				t.Fatal(err)
			}
			entries := l.Entries()
			if len(entries) != 1 || entries[0].Platform != tc.platform || entries[0].Digest != tc.digest.String() {
				t.Errorf("lock file entries = %+v, want one for platform %q, digest %s", entries, tc.platform, tc.digest)
			}
			if len(res.Images) != 1 || res.Images[0].Digest != tc.digest.String() {
				t.Errorf("Pin() images = %+v, want digest %s", res.Images, tc.digest)
			}
		})
	}
}
