package pin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/verification"
	"github.com/digestpin/digestpin/verify"
)

// TestVerifyNeedsVerifier: a configuration file's signature policies,
// without Verify to check them, fail New in one line rather than a Pin
// that verifies nothing; with package verify's Policies, even empty, the
// same file's policy is Verify's; with Policies that cannot take a
// file's, AddConfig fails.
func TestVerifyNeedsVerifier(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\nverify: ['ghcr.io/acme/**=none']\n"))
	if err != nil {
		t.Fatal(err)
	}

	var o Options
	if err := o.AddConfig(cfg); err != nil {
		t.Fatalf("AddConfig() = %v, want New to fail", err)
	}
	_, err = New(o)
	want := "Verify is nil, but digestpin.yaml, line 3 declares signature policies (verify)"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("New(file's policies, no Verify) = %v, want one line starting %q", err, want)
	}
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Field != "Verify" {
		t.Errorf("New(file's policies, no Verify) = %#v, want an *OptionError of Verify", err)
	}

	o = Options{Verify: &verify.Policies{}}
	if err := o.AddConfig(cfg); err != nil {
		t.Fatalf("AddConfig() = %v", err)
	}
	if _, err := New(o); err != nil {
		t.Errorf("New(file's policies, verify.Policies) = %v", err)
	}
	if diff := cmp.Diff([]string{"ghcr.io/acme/**"}, globsOf(o.Verify)); diff != "" {
		t.Errorf("AddConfig() signature policies (-want +got):\n%s", diff)
	}

	o = Options{Verify: &fakePolicies{prefix: "ghcr.io/"}}
	err = o.AddConfig(cfg)
	if want := "digestpin.yaml, line 3: verify: the signature policies of Verify"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("AddConfig(not Configurable) = %v, want an error starting %q", err, want)
	}
}

// fakePolicies verify every image of one repository prefix, as signed
// by "the fake", without package verify: a Pinner needs no more of
// signature verification than verification.Policies.
type fakePolicies struct {
	prefix string
	mu     sync.Mutex
	asked  []string // the digests verified
}

type fakePolicy string

func (p fakePolicy) Glob() string { return string(p) }
func (fakePolicy) String() string { return "fake" }
func (fakePolicy) None() bool     { return false }

func (f *fakePolicies) Policy(repo name.Repository) verification.Policy {
	if strings.HasPrefix(repo.Name(), f.prefix) {
		return fakePolicy(f.prefix + "**")
	}
	return nil
}

func (f *fakePolicies) Policies() []verification.Policy {
	return []verification.Policy{fakePolicy(f.prefix + "**")}
}
func (f *fakePolicies) TrustDigest() string { return "" }
func (f *fakePolicies) Check() error        { return nil }
func (f *fakePolicies) Verifier(verification.Registry) (verification.Verifier, error) {
	return f, nil
}

func (f *fakePolicies) Verify(_ context.Context, d name.Digest, p verification.Policy) (*verification.Record, error) {
	f.mu.Lock()
	f.asked = append(f.asked, d.String())
	f.mu.Unlock()
	return &verification.Record{Policy: p.String(), Signers: []verification.Signer{{Term: "fake", Identity: "the fake", Bundle: d.DigestStr()}}}, nil
}

// TestVerifyWithOwnPolicies: Policies of the caller's own verify the
// images they cover, and their records reach the result and the lock
// file; the lock file's record stands for them when Frozen.
func TestVerifyWithOwnPolicies(t *testing.T) {
	t.Parallel()
	f := newFake("registry.example/shop/web:1.4", "registry.example/other/db:16")
	ps := &fakePolicies{prefix: "registry.example/shop/"}
	lock := filepath.Join(t.TempDir(), "digests.lock")
	in := gen.Deployments("prod", "registry.example/shop/web:1.4", "registry.example/other/db:16")
	res, err := pinOnce(t, Options{Registry: f, Verify: ps, WriteLock: lock}, in)
	if err != nil {
		t.Fatalf("Pin() = %v", err)
	}
	d := f.digest("registry.example/shop/web:1.4").String()
	want := map[string]*verification.Record{"registry.example/shop/web:1.4": {Policy: "fake", Signers: []verification.Signer{{Term: "fake", Identity: "the fake", Bundle: d}}}}
	if diff := cmp.Diff(want, res.Verified); diff != "" {
		t.Errorf("Pin() verified (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"registry.example/shop/web@" + d}, ps.asked); diff != "" {
		t.Errorf("Verify() asked (-want +got):\n%s", diff)
	}
	l, err := lockfile.Read(lock)
	if err != nil {
		t.Fatal(err)
	}
	if lv, _, ok := l.LookupVerified(name.MustParseReference("registry.example/shop/web:1.4"), "", ""); !ok || lv.Policy != "fake" || len(lv.Signers) != 1 || lv.Signers[0].Identity != "the fake" {
		t.Errorf("lock file's verification = %+v, %v, want the fake's", lv, ok)
	}

	frozen := &fakePolicies{prefix: "registry.example/shop/"}
	res, err = pinOnce(t, Options{Registry: f, Verify: frozen, Lock: lock, Frozen: true}, in)
	if err != nil {
		t.Fatalf("Pin(Frozen) = %v", err)
	}
	if diff := cmp.Diff(want, res.Verified); diff != "" {
		t.Errorf("Pin(Frozen) verified (-want +got):\n%s", diff)
	}
	if len(frozen.asked) != 0 {
		t.Errorf("Pin(Frozen) asked the Verifier about %v, want nothing", frozen.asked)
	}
}
