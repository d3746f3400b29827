package pin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/internal/testsign"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/verify"
)

// policies parses specs.
func policies(t *testing.T, specs ...string) *verify.Policies {
	t.Helper()
	ps := &verify.Policies{}
	for _, s := range specs {
		if err := ps.Add(s); err != nil {
			t.Fatalf("Add(%q) = %v", s, err)
		}
	}
	return ps
}

// TestVerifyWorkflow pins a signed image with a key policy, records the
// signer in the lock file, renders it frozen without a request, and
// fails when the tag is pushed again unsigned, even with KeepUnresolved.
func TestVerifyWorkflow(t *testing.T) {
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
	in := gen.Deployments("prod", reg.Ref("acme/app:1"))
	ps := policies(t, reg.Host()+"/acme/*=key:"+keyFile)
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")

	// First the render that verifies and writes the lock file.
	reg.ResetCounts()
	p, err := New(Options{Verify: ps, WriteLock: lock})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), in)
	if err != nil {
		t.Fatalf("Pin(signed image) = %v", err)
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := reg.Count("GET referrers"); got != 1 {
		t.Errorf("referrers requests = %d, want 1", got)
	}
	l, err := lockfile.Read(lock)
	if err != nil {
		t.Fatal(err)
	}
	e := l.Entries()
	if len(e) != 1 || e[0].Verified == nil || len(e[0].Verified.Signers) != 1 || !strings.HasPrefix(e[0].Verified.Signers[0].Identity, "key sha256:") {
		t.Fatalf("lock entries = %+v, want one with a key signer", e)
	}

	// Frozen: the lock's record stands, and nobody is asked.
	reg.ResetCounts()
	p, err = New(Options{Verify: ps, Lock: lock, Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pin(context.Background(), in); err != nil {
		t.Fatalf("Pin(frozen) = %v", err)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("frozen Pin made %d requests, want none", n)
	}
	// Frozen under another policy: the record is for the old one.
	_, other := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ED25519)
	p, err = New(Options{Verify: policies(t, reg.Host()+"/acme/*=key:"+other), Lock: lock, Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pin(context.Background(), in); err == nil || !strings.Contains(err.Error(), "Frozen asks no registry") {
		t.Errorf("Pin(frozen, another policy) = %v, want no verification in the lock file", err)
	}

	// The tag pushed again, unsigned: the new digest fails, with or
	// without KeepUnresolved.
	d2 := testsign.PushImage(t, reg, "acme/app", "1")
	for _, keep := range []bool{false, true} {
		o := Options{Verify: ps}
		o.Renderer.KeepUnresolved = keep
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Pin(context.Background(), in)
		if err == nil || !strings.Contains(err.Error(), d2.DigestStr()) || !strings.Contains(err.Error(), "no signature") {
			t.Errorf("Pin(re-pushed tag, keep %v) = %v, want no signature for %s", keep, err, d2.DigestStr())
		}
	}
	// --check re-verifies: the lock's digest moved, which is a difference.
	p, err = New(Options{Verify: ps, Lock: lock, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pin(context.Background(), in); err == nil {
		t.Error("Pin(check, moved and unsigned) = nil, want an error")
	}
}

// TestVerifyUnresolvedNeverKept: an image that cannot be resolved is kept
// by KeepUnresolved, but never when a signature policy covers it.
func TestVerifyUnresolvedNeverKept(t *testing.T) {
	reg := testregistry.New(t)
	_, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	o := Options{Verify: policies(t, reg.Host()+"/acme/*=key:"+keyFile)}
	o.Renderer.KeepUnresolved = true
	o.Renderer.Warnf = func(string, ...any) {}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("acme/missing:1")))
	if err == nil || !strings.Contains(err.Error(), "is never kept unresolved, whatever KeepUnresolved says") {
		t.Errorf("Pin(unresolvable, keep) = %v, want a refusal", err)
	}
}

// TestVerifyGlobMatchesNothing: a policy no image matches is a typo.
func TestVerifyGlobMatchesNothing(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	p, err := New(Options{Verify: policies(t, "ghcr.io/acme/**=none")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("app:1")))
	if err == nil || !strings.Contains(err.Error(), "matches no image") {
		t.Errorf("Pin = %v, want a policy that matches no image", err)
	}
}

// TestVerifyCheckSignerChanged: --check verifies again, and another
// signer of the same digest than the lock file records is a difference.
func TestVerifyCheckSignerChanged(t *testing.T) {
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	a, keyA := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	b, keyB := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	testsign.Attach(t, d, testsign.KeyBundle(t, b, testsign.Statement(t, d, verify.CosignSignPredicate)))
	in := gen.Deployments("prod", reg.Ref("acme/app:1"))
	ps := policies(t, reg.Host()+"/acme/*=key:"+keyA+" or key:"+keyB)
	lock := filepath.Join(t.TempDir(), "digests.lock")
	p, err := New(Options{Verify: ps, WriteLock: lock})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	check, err := New(Options{Verify: ps, Lock: lock, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check.Pin(context.Background(), in); err != nil {
		t.Fatalf("Pin(check, same signer) = %v", err)
	}
	// Now key A signed too: the first term holds, by another signer.
	testsign.Attach(t, d, testsign.KeyBundle(t, a, testsign.Statement(t, d, verify.CosignSignPredicate)))
	_, err = check.Pin(context.Background(), in)
	if !errors.Is(err, ErrLockDiffers) || !strings.Contains(err.Error(), "the lock file says key sha256:") {
		t.Errorf("Pin(check, another signer) = %v, want ErrLockDiffers naming the signers", err)
	}
}

// TestVerifyCached: with a cache, a second render verifies from it, with
// no referrers request; another policy is another entry.
func TestVerifyCached(t *testing.T) {
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
	in := gen.Deployments("prod", reg.Ref("acme/app:1"))
	dir := t.TempDir()
	pinWith := func(ps *verify.Policies) (*Result, error) {
		p, err := New(Options{Verify: ps, CacheDir: dir, CacheTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return p.Pin(context.Background(), in)
	}
	ps := policies(t, reg.Host()+"/acme/*=key:"+keyFile)
	reg.ResetCounts()
	first, err := pinWith(ps)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pinWith(ps)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Count("GET referrers"); got != 1 {
		t.Errorf("referrers requests over two cached renders = %d, want 1", got)
	}
	if diff := cmp.Diff(first.Verified, again.Verified); diff != "" {
		t.Errorf("cached verification (-first +again):\n%s", diff)
	}
	// Another key is another policy: verified anew, and it fails.
	_, other := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ED25519)
	if _, err := pinWith(policies(t, reg.Host()+"/acme/*=key:"+other)); err == nil || !strings.Contains(err.Error(), "wrong key") {
		t.Errorf("Pin(another key, cached) = %v, want wrong key", err)
	}
}

// TestVerifyBlobsConcurrently: the bundles of different images are read
// at once, up to the resolver's bound, not four at a time (the default
// of go-containerregistry's pullers, which the resolver raises).
func TestVerifyBlobsConcurrently(t *testing.T) {
	reg := testregistry.New(t)
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	var refs []string
	for i := range 12 {
		repo := fmt.Sprintf("acme/app%d", i)
		d := testsign.PushImage(t, reg, repo, "1")
		testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
		refs = append(refs, reg.Ref(repo+":1"))
	}
	var mu sync.Mutex
	inFlight, most := 0, 0
	reg.Handle(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
			return false
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		// Long enough for every reader to arrive.
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return false
	})
	p, err := New(Options{Verify: policies(t, reg.Host()+"/acme/*=key:"+keyFile)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pin(context.Background(), gen.Deployments("prod", refs...)); err != nil {
		t.Fatal(err)
	}
	if most <= 4 {
		t.Errorf("at most %d bundle reads at once, want more than 4", most)
	}
}

// TestVerifyPinnedAndReport: a digest the manifest pinned already is
// verified too (an unsigned one fails), and the report shows the signer.
func TestVerifyPinnedAndReport(t *testing.T) {
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	unsigned := testsign.PushImage(t, reg, "acme/app", "2")
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
	ps := policies(t, reg.Host()+"/acme/*=key:"+keyFile)
	report := filepath.Join(t.TempDir(), "report.json")
	p, err := New(Options{Verify: ps, Report: report})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), gen.Deployments("prod", d.String()))
	if err != nil {
		t.Fatalf("Pin(pinned, signed) = %v", err)
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	var rep Report
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != 1 || rep.Images[0].Verified == nil || len(rep.Images[0].Verified.Signers) != 1 || !strings.HasPrefix(rep.Images[0].Verified.Signers[0].Identity, "key sha256:") {
		t.Errorf("report images = %s, want the key signer", b)
	}
	if _, err := p.Pin(context.Background(), gen.Deployments("prod", unsigned.String())); err == nil || !strings.Contains(err.Error(), "no signature") {
		t.Errorf("Pin(pinned, unsigned) = %v, want no signature", err)
	}
}
