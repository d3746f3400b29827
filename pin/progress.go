package pin

import "sync"

// Progress is how far the resolutions of a Pin have come: the counts of
// distinct references without a digest (each is resolved once, however
// many workloads use it). The parse meets references as it goes, so
// Images grows during a Pin; Done never exceeds Images.
type Progress struct {
	// Images is the number of references the Pin has begun to resolve.
	Images int
	// Done is the number of those whose resolution has ended, with a
	// digest or with an error.
	Done int
	// InFlight is Images - Done: resolutions begun and not ended (some
	// may wait for a free request, see resolve.WithJobs).
	InFlight int
	// Finished is set on the last call of a Pin, once its render has
	// ended, whether it succeeded or not.
	Finished bool
}

// progress counts the resolutions of one Pin and reports them to
// Options.Progress, one call at a time.
type progress struct {
	report func(Progress) // never nil
	mu     sync.Mutex
	n      Progress
}

// begin notes a resolution begun.
func (p *progress) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n.Images++
	p.n.InFlight++
	p.report(p.n)
}

// end notes a resolution ended.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n.Done++
	p.n.InFlight--
	p.report(p.n)
}

// finish reports the last call.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n.Finished = true
	p.report(p.n)
}
