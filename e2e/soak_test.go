package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// The soak's settings: the processes that render at once, the images of
// the stream, the cache's TTL and --stale-if-error (so that a stale
// answer is at most soakTTL+soakStale old), --request-timeout.
const (
	soakProcs   = 8
	soakImages  = 4
	soakTTL     = 2 * time.Second
	soakStale   = 6 * time.Second
	soakRequest = time.Second
	// soakSlack is what the checks allow for the time between a
	// registry's answer and its entry in Redis (a process starved on a
	// loaded machine), and the rounding of the ages in warnings: a TTL,
	// so that no check is tighter than the TTL.
	soakSlack = soakTTL
)

// soakTime is how long TestSoak runs: $DIGESTPIN_SOAK_TIME (make soak
// sets it from SOAKTIME), else a minute.
func soakTime(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("DIGESTPIN_SOAK_TIME")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("DIGESTPIN_SOAK_TIME=%q: want a positive duration", v)
	}
	return d
}

// soakPhase is a span of time in which the registry answered, or failed
// as state says; from is when the state was set, to when the next was.
type soakPhase struct {
	state    string // "up", "503", "429", "refused", "hang"
	from, to time.Time
}

// soakMove is a push that moved a tag: it began at from, and the
// registry served digest from to on.
type soakMove struct {
	tag      string
	digest   string
	from, to time.Time
}

// soakRender is one digestpin process: when it ran, how it ended, and
// what it pinned, from which source, with the stale answers' ages.
type soakRender struct {
	proc       int
	start, end time.Time
	exit       int
	stderr     string
	digests    map[string]string // by tag ("soak/app-0:live")
	sources    map[string]string
	staleAges  map[string]time.Duration
}

var (
	soakPinned  = regexp.MustCompile(`image: \S+/(soak/app-\d+:live)@(sha256:[0-9a-f]{64})\n`)
	soakWarning = regexp.MustCompile(`warning: \S+/(soak/app-\d+:live): using sha256:[0-9a-f]{64}, resolved (\S+) ago`)
	soakError   = regexp.MustCompile(`(?m)^digestpin: error: .*? container "app": \S+/(soak/app-\d+:live): `)
)

// TestSoak renders a stream of 4 images from 8 digestpin processes in a
// loop, sharing one real Redis, for DIGESTPIN_SOAK_TIME (a minute; make
// soak: 10 minutes), while the loopback registry flaps every few seconds
// (answering, 503, 429 with Retry-After, refusing connections, hanging)
// with an outage longer than the stale bound now and then, and tags are
// pushed again during outages and between them. It checks issue 38's
// three promises on the record of every render and of the registry:
//
//   - no render fails for an image that was resolved (by any render that
//     ended before it began) within --cache-ttl plus --stale-if-error of
//     its end, and every failure names its images;
//   - no render serves an answer older than that: a stale answer's age,
//     as warned, is within it (and a TTL for the rounding), and no digest
//     is served later than that (and a TTL of slack) after its tag moved
//     on;
//   - every move of a tag is picked up within the TTL of the registry
//     answering again (plus --request-timeout, for a request that hung
//     as it came back, whose failure the processes share, and a TTL of
//     slack): no render that begins after that, and ends before the
//     registry fails again, pins an older digest of the tag.
//
// It logs the counts (renders, failures, stale answers, the oldest stale
// answer, moves picked up and the longest it took, registry requests).
func TestSoak(t *testing.T) {
	testfiles.Slow(t)
	t.Parallel()
	bin := digestpinBin(t)
	d := soakTime(t)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("soak for %s, seed %d", d, seed)

	reg := testregistry.New(t)
	srv := testredis.Start(t, testredis.Options{})
	var refs []string
	history := map[string][]soakMove{} // by tag, oldest first
	for i := range soakImages {
		tag := fmt.Sprintf("soak/app-%d:live", i)
		h := reg.PushImage(t, tag)
		history[tag] = []soakMove{{tag: tag, digest: h.String()}}
		refs = append(refs, reg.Ref(tag))
	}
	in := gen.Deployments("", refs...)
	reg.ResetCounts()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		mu      sync.Mutex
		renders []soakRender
		wg      sync.WaitGroup
	)
	for p := range soakProcs {
		dir := t.TempDir()
		wg.Go(func() {
			for ctx.Err() == nil {
				r := soakRun(t, bin, dir, in, srv)
				r.proc = p
				mu.Lock()
				renders = append(renders, r)
				mu.Unlock()
				// An Argo CD repo server renders now and then, not in
				// a tight loop: a pause keeps 8 processes cheap.
				time.Sleep(time.Duration(250+rand.IntN(250)) * time.Millisecond)
			}
		})
	}

	// The registry flaps: up for 7 to 10 s (longer than the TTL and the
	// slacks, so that a move is seen to be picked up), then down for 1.5
	// to 3.5 s, each way of failing in turn, and every sixth outage 12 s,
	// past the stale bound. A tag moves at the start of an outage the
	// test can push through (not a refused one), and a second into an up
	// phase.
	var phases []soakPhase
	var moves []soakMove
	push := func() {
		tag := fmt.Sprintf("soak/app-%d:live", rng.IntN(soakImages))
		from := time.Now()
		h := reg.PushImage(t, tag)
		m := soakMove{tag: tag, digest: h.String(), from: from, to: time.Now()}
		moves = append(moves, m)
		history[tag] = append(history[tag], m)
	}
	set := func(state string) {
		now := time.Now()
		if n := len(phases); n > 0 {
			phases[n-1].to = now
		}
		switch state {
		case "up":
			reg.Start(t)
			reg.SetFault(nil)
		case "503":
			reg.SetFault(testregistry.Status(http.StatusServiceUnavailable))
		case "429":
			reg.SetFault(testregistry.Status(http.StatusTooManyRequests, "Retry-After", "1"))
		case "hang":
			reg.SetFault(reg.Hang())
		case "refused":
			reg.Stop()
		}
		// An up phase begins once the registry answers again.
		phases = append(phases, soakPhase{state: state, from: time.Now()})
	}
	seconds := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(time.Second))
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	faults := []string{"503", "refused", "hang", "429"}
	end := time.Now().Add(d)
	set("up")
	sleep(3 * time.Second) // every image resolved once
	for i := 0; time.Now().Before(end); i++ {
		sleep(time.Second)
		if rng.IntN(3) > 0 {
			push()
		}
		sleep(seconds(6, 9))
		fault := faults[i%len(faults)]
		set(fault)
		if fault != "refused" && rng.IntN(3) > 0 {
			push()
		}
		down := seconds(1.5, 3.5)
		if i%6 == 2 {
			down = 12 * time.Second
		}
		sleep(down)
		set("up")
	}
	sleep(soakTTL + soakRequest + 2*soakSlack) // the last moves picked up
	phases[len(phases)-1].to = time.Now().Add(time.Hour)
	stop()
	wg.Wait()

	s := checkSoak(t, renders, phases, moves, history)
	requests := reg.Total() - reg.Pushes()
	t.Logf("soak: %d renders by %d processes in %s (%d phases, %d outages past the stale bound); %d failed (%d while an image was older than the bound, %d violations); %d stale answers in %d renders, the oldest %s (bound %s); %d moves, %d checked, %d picked up, the longest %s after the registry came back (the last render pinning an older digest began %s after it, back from %s; bound %s); %d registry requests (%.2f a render), %d manifest requests",
		len(renders), soakProcs, d, len(phases), s.longOutages, s.failed, s.failedBeyond, s.failedViolations, s.staleAnswers, s.staleRenders, s.maxStaleAge, soakTTL+soakStale,
		len(moves), s.movesChecked, s.movesPickedUp, s.maxLatency.Round(time.Millisecond), s.maxLastOld.Round(time.Millisecond), s.maxLastOldAfter, soakTTL+soakRequest+soakSlack, requests, float64(requests)/float64(max(len(renders), 1)), reg.Manifests())
}

// soakRun renders in once with digestpin, and returns what it did.
func soakRun(t *testing.T, bin, dir string, in []byte, srv *testredis.Server) soakRender {
	report := filepath.Join(dir, "report.json")
	_ = os.Remove(report)
	cmd := exec.Command(bin, "--report", report)
	cmd.Env = cleanEnv("DIGESTPIN_CACHE="+srv.URL(0), "DIGESTPIN_CACHE_TTL="+soakTTL.String(),
		"DIGESTPIN_STALE_IF_ERROR="+soakStale.String(), "DIGESTPIN_REQUEST_TIMEOUT="+soakRequest.String(),
		"DIGESTPIN_TIMEOUT=30s")
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	r := soakRender{start: time.Now(), digests: map[string]string{}, sources: map[string]string{}, staleAges: map[string]time.Duration{}}
	err := cmd.Run()
	r.end, r.exit, r.stderr = time.Now(), exitCode(err), errb.String()
	if r.exit != 0 {
		if out.Len() > 0 {
			t.Errorf("a render that failed (exit %d) wrote %d bytes on stdout", r.exit, out.Len())
		}
		return r
	}
	for _, m := range soakPinned.FindAllStringSubmatch(out.String(), -1) {
		r.digests[m[1]] = m[2]
	}
	if len(r.digests) != soakImages {
		t.Errorf("a render that succeeded pinned %d images, want %d:\n%s", len(r.digests), soakImages, out.String())
	}
	b, err := os.ReadFile(report)
	var rep pin.Report
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Errorf("report of a render that succeeded: %v", err)
	}
	for _, im := range rep.Images {
		tag := im.Reference[strings.Index(im.Reference, "/")+1:]
		r.sources[tag] = string(im.Source)
		if im.Digest != r.digests[tag] {
			t.Errorf("the report pins %s to %s, stdout to %s", tag, im.Digest, r.digests[tag])
		}
	}
	for _, m := range soakWarning.FindAllStringSubmatch(r.stderr, -1) {
		age, err := time.ParseDuration(m[2])
		if err != nil {
			t.Errorf("stale warning's age %q: %v", m[2], err)
		}
		r.staleAges[m[1]] = age
	}
	for tag, src := range r.sources {
		if _, warned := r.staleAges[tag]; warned != (src == "stale") {
			t.Errorf("%s: source %s, stale warning %t:\n%s", tag, src, warned, r.stderr)
		}
	}
	return r
}

// soakStats are the soak's counts.
type soakStats struct {
	failed, failedBeyond, failedViolations int
	staleAnswers, staleRenders             int
	maxStaleAge                            time.Duration
	movesChecked, movesPickedUp            int
	maxLatency                             time.Duration
	// maxLastOld is the latest a render began, after the registry came
	// back, that still pinned a digest older than a move.
	maxLastOld      time.Duration
	maxLastOldAfter string // "503", "hang"…, or "a push" in an up phase
	longOutages     int
}

// checkSoak checks the three promises on the record (see TestSoak) and
// returns the counts.
func checkSoak(t *testing.T, renders []soakRender, phases []soakPhase, moves []soakMove, history map[string][]soakMove) soakStats {
	t.Helper()
	var s soakStats
	bound := soakTTL + soakStale
	for _, p := range phases {
		if p.state != "up" && p.to.Sub(p.from) > bound {
			s.longOutages++
		}
	}
	// lastResolved returns when the latest render that ended before
	// at, and asked the registry for tag, began.
	lastResolved := func(tag string, at time.Time) (time.Time, bool) {
		var last time.Time
		for _, r := range renders {
			if r.sources[tag] == "registry" && !r.end.After(at) && r.start.After(last) {
				last = r.start
			}
		}
		return last, !last.IsZero()
	}
	// movedOn returns when the tag stopped serving digest: the end of
	// the push that moved it on; zero if it still serves it.
	movedOn := func(tag, digest string) (time.Time, bool) {
		h := history[tag]
		for i, m := range h {
			if m.digest == digest {
				if i+1 < len(h) {
					return h[i+1].to, true
				}
				return time.Time{}, true
			}
		}
		return time.Time{}, false
	}
	for _, r := range renders {
		if r.exit != 0 {
			// Each image that failed must have been resolved too long
			// ago; a failure that names none is one too many.
			s.failed++
			failed := soakError.FindAllStringSubmatch(r.stderr, -1)
			violation := len(failed) == 0
			for _, m := range failed {
				if at, ok := lastResolved(m[1], r.start); ok && r.end.Sub(at) < bound {
					violation = true
				}
			}
			if violation {
				s.failedViolations++
				t.Errorf("render of process %d (%s to %s) failed, though the images it names were resolved within %s of its end:\n%s", r.proc, r.start.Format(time.StampMilli), r.end.Format(time.StampMilli), bound, r.stderr)
			} else {
				s.failedBeyond++
			}
			continue
		}
		stale := false
		for tag, digest := range r.digests {
			if age, ok := r.staleAges[tag]; ok {
				stale = true
				s.staleAnswers++
				s.maxStaleAge = max(s.maxStaleAge, age)
				if age > bound+soakSlack {
					t.Errorf("render of process %d served %s resolved %s ago, past the bound %s", r.proc, tag, age, bound)
				}
			}
			gone, ok := movedOn(tag, digest)
			switch {
			case !ok:
				t.Errorf("render of process %d pinned %s to %s, which the tag never was", r.proc, tag, digest)
			case !gone.IsZero() && r.start.Sub(gone) > bound+soakSlack:
				t.Errorf("render of process %d (%s) pinned %s to %s, which the tag left at %s, %s before: past the bound %s", r.proc, r.start.Format(time.StampMilli), tag, digest, gone.Format(time.StampMilli), r.start.Sub(gone), bound)
			}
		}
		if stale {
			s.staleRenders++
		}
	}
	// Each move: from when the registry answered again (the move itself,
	// if it was up), every render that began past the deadline and ended
	// in the same up phase pins this digest or a later one.
	deadline := soakTTL + soakRequest + soakSlack
	for _, m := range moves {
		var up *soakPhase
		after := "a push" // what the registry came back from
		for i := range phases {
			p := &phases[i]
			if p.state == "up" && p.to.After(m.to) {
				up = p
				if i > 0 && m.to.Before(p.from) {
					after = phases[i-1].state
				}
				break
			}
		}
		if up == nil {
			continue
		}
		back := up.from
		if m.to.After(back) {
			back = m.to
		}
		if up.to.Sub(back) < deadline+soakSlack {
			continue // the registry failed again too soon to tell
		}
		s.movesChecked++
		newer := map[string]bool{}
		seen := false
		for _, h := range history[m.tag] {
			seen = seen || h.digest == m.digest
			if seen {
				newer[h.digest] = true
			}
		}
		// The latency: until the end of the last render that pinned an
		// older digest, or of the first that pinned this one.
		var latency, first, lastOld time.Duration
		picked := true
		for _, r := range renders {
			if r.exit != 0 || r.start.Before(back) || r.end.After(up.to) {
				continue
			}
			if newer[r.digests[m.tag]] {
				if first == 0 || r.end.Sub(back) < first {
					first = r.end.Sub(back)
				}
				continue
			}
			latency = max(latency, r.end.Sub(back))
			lastOld = max(lastOld, r.start.Sub(back))
			if r.start.Sub(back) > deadline {
				picked = false
				t.Errorf("render of process %d began %s after the registry answered again (%s) and pinned %s to %s, not %s pushed at %s", r.proc, r.start.Sub(back), back.Format(time.StampMilli), m.tag, r.digests[m.tag], m.digest, m.to.Format(time.StampMilli))
			}
		}
		if picked {
			s.movesPickedUp++
		}
		s.maxLatency = max(s.maxLatency, latency, first)
		if lastOld > s.maxLastOld {
			s.maxLastOld, s.maxLastOldAfter = lastOld, after
		}
	}
	// A soak that tested nothing is a failure too.
	switch {
	case s.movesChecked == 0:
		t.Errorf("none of %d moves could be checked", len(moves))
	case s.staleAnswers == 0:
		t.Error("no render answered stale: the outages never reached them")
	}
	return s
}
