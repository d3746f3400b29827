package pin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/errgroup"

	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/verification"
)

// verifyJobs bounds the goroutines of verifications in flight; the
// registry resolver bounds their requests (WithJobs).
const verifyJobs = 256

// verifyImages verifies the digest of every image a signature policy
// covers, after the render and before anything is written: the digests
// resolved, those taken from the lock file and the cache, and those the
// manifests pinned already. It returns the records by image reference.
// Every image that does not hold is listed in one error, one line each;
// an image kept unresolved (KeepUnresolved) under a policy other than
// none is one of them, as the lock file's record of a digest is only
// trusted for the same policy and digest. Under Frozen nothing is asked:
// an image without such a record fails. Under Check each image is
// verified again, and a signer other than the lock file's is a
// difference (ErrLockDiffers).
func (p *Pinner) verifyImages(ctx context.Context, c *chain, images []renderer.Image) (map[string]*verification.Record, error) {
	ps := p.o.Verify
	if !p.o.verifies() {
		return nil, nil
	}
	var v verification.Verifier
	if !p.o.Frozen {
		var err error
		if v, err = p.verifier(c); err != nil {
			return nil, err
		}
	}
	run := &verifyRun{recs: map[string]*verification.Record{}}
	fail := run.fail
	used := map[verification.Policy]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verifyJobs)
	for _, im := range images {
		ref, err := name.ParseReference(im.Reference)
		if err != nil {
			fail(fmt.Sprintf("%s: parsing reference: %v", im.Reference, err))
			continue
		}
		pol := ps.Policy(ref.Context())
		if pol == nil {
			continue
		}
		used[pol] = true
		switch {
		case pol.None():
			run.record(im.Reference, &verification.Record{Policy: pol.String()})
			continue
		case im.Digest == "":
			fail(fmt.Sprintf("%s: not resolved, so not verified under policy %s (an image a signature policy covers is never kept unresolved, whatever %s says)", im.Reference, pol, resolution.OptionName(ctx, "KeepUnresolved")))
			continue
		}
		d := ref.Context().Digest(im.Digest)
		// The lock file's record, for the same policy and digest, stands
		// for a verification unless Check asks again.
		locked := lockedVerification(c, ref, im)
		if locked != nil && locked.Policy == pol.String() && !p.o.Check {
			run.record(im.Reference, fromLock(locked))
			continue
		}
		if p.o.Frozen {
			fail(fmt.Sprintf("%s@%s: no verification under policy %s in lock file %s, and %s asks no registry", ref.Context().Name(), im.Digest, pol, p.o.Lock, resolution.OptionName(ctx, "Frozen")))
			continue
		}
		g.Go(func() error {
			rec, err := p.verifyDigest(gctx, c, v, d, pol)
			if err != nil {
				fail(err.Error())
				return nil
			}
			run.record(im.Reference, rec)
			if p.o.Check && locked != nil && !sameSigners(locked, rec) {
				c.moved.add(fmt.Sprintf("%s: signed by %s, the lock file says %s", ref, signersOf(rec.Signers), signersOf(fromLock(locked).Signers)))
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs := run.recs
	if err := notVerified(run.fails, ps, used); err != nil {
		return nil, err
	}
	for _, im := range images {
		if r := recs[im.Reference]; r != nil {
			p.o.logf("%s@%s: verified under %s: %s", im.Reference, im.Digest, r.Policy, signersOf(r.Signers))
		}
	}
	return recs, nil
}

// verifyRun gathers what verifyImages's goroutines find.
type verifyRun struct {
	mu    sync.Mutex
	recs  map[string]*verification.Record // by image reference
	fails []string                        // one line for each image that fails
}

func (r *verifyRun) fail(s string) {
	r.mu.Lock()
	r.fails = append(r.fails, s)
	r.mu.Unlock()
}

func (r *verifyRun) record(ref string, rec *verification.Record) {
	r.mu.Lock()
	r.recs[ref] = rec
	r.mu.Unlock()
}

// verifyDigest verifies d under pol with v, or takes the verification
// from the cache, and caches what it verified.
func (p *Pinner) verifyDigest(ctx context.Context, c *chain, v verification.Verifier, d name.Digest, pol verification.Policy) (*verification.Record, error) {
	if rec, cached := p.cachedVerification(ctx, c, d, pol); cached {
		return rec, nil
	}
	rec, err := v.Verify(ctx, d, pol)
	if err != nil {
		return nil, err
	}
	p.cacheVerification(ctx, c, d, pol, rec)
	return rec, nil
}

// notVerified returns the error of a verification: each image that
// failed, and each policy that matches no image of the stream (not in
// used), sorted, one a line; nil when there is neither.
func notVerified(fails []string, ps verification.Policies, used map[verification.Policy]bool) error {
	for _, pol := range ps.Policies() {
		if !used[pol] {
			fails = append(fails, fmt.Sprintf("signature policy %s=%s matches no image of the stream: a typo, most likely", pol.Glob(), pol))
		}
	}
	if len(fails) == 0 {
		return nil
	}
	slices.Sort(fails)
	errs := []error{fmt.Errorf("%d image(s) not verified", len(fails))}
	for _, f := range fails {
		errs = append(errs, errors.New("  "+f))
	}
	return errors.Join(errs...)
}

// verifier returns the Verifier of the Pin's signature policies, reading
// signatures from Signatures, else from the chain's registry resolver,
// else from one made with ResolveOptions.
func (p *Pinner) verifier(c *chain) (verification.Verifier, error) {
	reg := p.o.Signatures
	if reg == nil && c.resolver != nil {
		reg = c.resolver
	}
	if reg == nil {
		r, err := resolve.New(p.o.ResolveOptions...)
		if err != nil {
			return nil, err
		}
		reg = r
	}
	v, err := p.o.Verify.Verifier(reg)
	if err == nil && v == nil {
		err = fmt.Errorf("%T.Verifier returned no Verifier", p.o.Verify)
	}
	if err != nil {
		return nil, &OptionError{Field: "Verify", Err: err}
	}
	return v, nil
}

// lockedVerification returns the lock file's record of the verification
// of im's digest, under the tag policy ref has now, or nil: an image the
// manifest pinned itself, or one whose lock entry has another digest, has
// none.
func lockedVerification(c *chain, ref name.Reference, im renderer.Image) *lockfile.Verification {
	if im.Source == resolution.Pinned {
		return nil
	}
	tagPolicy := ""
	if tp := c.tags.For(ref); tp != nil {
		tagPolicy = tp.String()
	}
	if lv, h, ok := c.lock.LookupVerified(ref, c.platform, tagPolicy); ok && h.String() == im.Digest {
		return lv
	}
	return nil
}

// verificationKey keys a verification in the cache: the digest, the
// policy in canonical form (keys by fingerprint) and the trusted root.
func verificationKey(d name.Digest, pol verification.Policy, ps verification.Policies) string {
	return "verification\n" + d.Context().Name() + "@" + d.DigestStr() + "\n" + pol.String() + "\n" + ps.TrustDigest()
}

// cachedVerification returns the verification of d under pol that the
// cache keeps, if any.
func (p *Pinner) cachedVerification(ctx context.Context, c *chain, d name.Digest, pol verification.Policy) (*verification.Record, bool) {
	if c.records == nil {
		return nil, false
	}
	b, ok := c.records.Get(ctx, verificationKey(d, pol, p.o.Verify))
	if !ok {
		return nil, false
	}
	var rec verification.Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Policy != pol.String() || len(rec.Signers) == 0 {
		return nil, false
	}
	return &rec, true
}

// cacheVerification keeps a verification in the cache; a cache that
// fails is warned about, never an error.
func (p *Pinner) cacheVerification(ctx context.Context, c *chain, d name.Digest, pol verification.Policy, rec *verification.Record) {
	if c.records == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = c.records.Put(ctx, verificationKey(d, pol, p.o.Verify), b)
	}
	if err != nil {
		p.o.warnf("caching the verification of %s: %v", d, err)
	}
}

// fromLock is the record of a lock file's verification.
func fromLock(l *lockfile.Verification) *verification.Record {
	return &verification.Record{Policy: l.Policy, Signers: append([]verification.Signer(nil), l.Signers...)}
}

// toLock is the lock file's record of a verification.
func toLock(r *verification.Record) *lockfile.Verification {
	if r == nil {
		return nil
	}
	return &lockfile.Verification{Policy: r.Policy, Signers: append([]verification.Signer(nil), r.Signers...)}
}

// sameSigners reports whether a verification found the signers the lock
// file records (by identity: a new bundle of the same signer is no
// change).
func sameSigners(l *lockfile.Verification, r *verification.Record) bool {
	if l.Policy != r.Policy {
		return false
	}
	return signersOf(fromLock(l).Signers) == signersOf(r.Signers)
}

// signersOf names the signers in one phrase.
func signersOf(ss []verification.Signer) string {
	if len(ss) == 0 {
		return "nobody (policy none)"
	}
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.Identity
	}
	return strings.Join(ids, " and ")
}
