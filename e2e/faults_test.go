package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/pin"
)

// faultImages are the images of the fault suite's stream.
var faultImages = []string{"shop/web:1", "shop/api:1"}

// faultEnv is one row's world: a registry holding faultImages, maybe a
// mirror of it and a Redis, a folder for the cache, the lock file and the
// report, and the stream.
type faultEnv struct {
	reg, mirror *testregistry.Registry
	redis       *testredis.Server
	dir         string
	in          []byte
	// digests are the registry's, then the mirror's, by image
	// ("shop/web:1", "mirror shop/web:1").
	digests map[string]string
	// cache is the row's cache flag: --cache-dir DIR or --cache URL.
	cache []string
	// images are those of the stream: faultImages, or its first.
	images []string
}

// entries returns the files of the disk cache.
func (e *faultEnv) entries(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.dir, "cache", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("cache entries: %v, %v", files, err)
	}
	return files
}

// resolvedAt rewrites every disk cache entry as resolved at now+shift: a
// clock that jumped by -shift since they were written (or entries that
// aged by -shift).
func (e *faultEnv) resolvedAt(t *testing.T, shift time.Duration) {
	t.Helper()
	for _, f := range e.entries(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var entry map[string]any
		if err := json.Unmarshal(b, &entry); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		entry["resolved"] = time.Now().Add(shift).UTC().Format(time.RFC3339Nano)
		if b, err = json.Marshal(entry); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// faultCase is one fault: how the world is before the run and what the
// run must do.
type faultCase struct {
	name string
	// redis keeps the cache on Redis instead of a folder; mirror adds a
	// mirror of the registry (--registry-mirror REGISTRY=MIRROR) whose
	// images differ.
	redis, mirror bool
	// args are more flags of both runs.
	args []string
	// noFirst leaves out the first run; lock has both runs write the
	// same lock file (--write-lock), which may stand in for the
	// registry.
	noFirst, lock bool
	// one has the stream hold one image: the first that meets a hung
	// registry waits for it, and the others that were asked meanwhile
	// too, but those asked later do not (a count that depends on the
	// timing of the two).
	one bool
	// midRun is Redis killed while the run uses it: the warning names
	// whichever call failed first.
	midRun bool
	// before changes the world after the first run (which fills the
	// cache, the registry answering) and before the second (whose
	// requests are counted).
	before func(t *testing.T, e *faultEnv)
	// want is the image → digest key (of faultEnv.digests) that the
	// second run pins; nil: the run fails and writes nothing.
	want map[string]string
	// wantExit is the second run's exit status.
	wantExit int
}

// registryDown is a fault that fails every request with code (and
// header pairs).
func registryDown(code int, header ...string) func(*testing.T, *faultEnv) {
	return func(_ *testing.T, e *faultEnv) { e.reg.SetFault(testregistry.Status(code, header...)) }
}

// onManifests makes f a fault of the manifest requests only: the
// registry answers its ping.
func onManifests(f testregistry.Handler) testregistry.Handler {
	return func(w http.ResponseWriter, r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/manifests/") && f(w, r)
	}
}

// aged is a run whose cache entries were resolved 10 minutes ago (past
// the 5m TTL, within --stale-if-error 1h), and then fault.
func aged(fault func(*testing.T, *faultEnv)) func(*testing.T, *faultEnv) {
	return func(t *testing.T, e *faultEnv) {
		e.resolvedAt(t, -10*time.Minute)
		fault(t, e)
	}
}

// then runs the changes one after the other.
func then(fs ...func(*testing.T, *faultEnv)) func(*testing.T, *faultEnv) {
	return func(t *testing.T, e *faultEnv) {
		for _, f := range fs {
			f(t, e)
		}
	}
}

// same is the want of a run that pins what the first run pinned (the
// registry's digests), stale or not.
var same = map[string]string{"shop/web:1": "shop/web:1", "shop/api:1": "shop/api:1"}

// faultCases are the faults of issue 38: a registry stopped, answering
// 500, 429 with Retry-After, hanging (after its headers too), a mirror
// serving another digest; Redis stopped; a corrupt cache entry; a clock
// that jumps.
var faultCases = []faultCase{
	{name: "registry stopped", before: aged(func(_ *testing.T, e *faultEnv) { e.reg.Stop() }), want: same},
	{name: "registry 500", before: aged(registryDown(http.StatusInternalServerError)), want: same},
	{name: "registry 500, stale-if-error 0", args: []string{"--stale-if-error", "0"}, before: aged(registryDown(http.StatusInternalServerError)), wantExit: 1},
	{name: "registry 429 Retry-After 1", before: aged(registryDown(http.StatusTooManyRequests, "Retry-After", "1")), want: same},
	{name: "registry 429 Retry-After 3600", before: aged(registryDown(http.StatusTooManyRequests, "Retry-After", "3600")), want: same},
	{name: "registry hangs", args: []string{"--request-timeout", "1s"}, before: aged(func(_ *testing.T, e *faultEnv) { e.reg.SetFault(e.reg.Hang()) }), want: same},
	{
		name: "registry hangs after headers", one: true, args: []string{"--request-timeout", "1s", "--platform", "linux/amd64"},
		before: aged(func(_ *testing.T, e *faultEnv) { e.reg.SetFault(onManifests(e.reg.HangAfterHeaders())) }),
		want:   map[string]string{"shop/web:1": "shop/web:1 linux/amd64"},
	},
	{name: "registry 503 on manifests", before: aged(func(_ *testing.T, e *faultEnv) {
		e.reg.SetFault(onManifests(testregistry.Status(http.StatusServiceUnavailable)))
	}), want: same},
	{name: "registry 404 on manifests", before: aged(func(_ *testing.T, e *faultEnv) {
		e.reg.SetFault(onManifests(testregistry.Status(http.StatusNotFound)))
	}), wantExit: 1},
	{name: "registry 503, no cache answer, the lock file stands in", lock: true, before: func(t *testing.T, e *faultEnv) {
		e.resolvedAt(t, -2*time.Hour)
		e.reg.SetFault(testregistry.Status(http.StatusServiceUnavailable))
	}, want: same},
	{name: "mirror serves another digest", mirror: true, noFirst: true, wantExit: 1},
	{name: "mirror serves another digest, mirror-lag warn", mirror: true, noFirst: true, args: []string{"--mirror-lag", "warn"}, want: map[string]string{"shop/web:1": "mirror shop/web:1", "shop/api:1": "mirror shop/api:1"}},
	{name: "Redis killed", redis: true, before: func(_ *testing.T, e *faultEnv) { e.redis.Kill() }, want: same},
	{name: "Redis killed, registry 503", redis: true, before: func(_ *testing.T, e *faultEnv) {
		e.redis.Kill()
		e.reg.SetFault(testregistry.Status(http.StatusServiceUnavailable))
	}, wantExit: 1},
	{name: "Redis stalled", redis: true, before: func(t *testing.T, e *faultEnv) { e.redis.Pause(t) }, want: same},
	{name: "Redis killed mid-run", redis: true, midRun: true, before: func(_ *testing.T, e *faultEnv) {
		// When the registry is first asked, after the process read
		// the entries: Redis goes while the process uses it.
		var once sync.Once
		e.reg.Handle(func(http.ResponseWriter, *http.Request) bool {
			once.Do(e.redis.Kill)
			return false
		})
	}, args: []string{"--cache-ttl", "1ms"}, want: same},
	{name: "corrupt cache entry", before: func(t *testing.T, e *faultEnv) {
		for _, f := range e.entries(t) {
			if err := os.WriteFile(f, []byte(`{"format":"digestpin-cache-v2","reference":`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}, want: same},
	{name: "corrupt cache entry, registry 503", before: func(t *testing.T, e *faultEnv) {
		for _, f := range e.entries(t) {
			if err := os.WriteFile(f, []byte("\x00garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e.reg.SetFault(testregistry.Status(http.StatusServiceUnavailable))
	}, wantExit: 1},
	{name: "clock jumped back an hour", before: func(t *testing.T, e *faultEnv) { e.resolvedAt(t, time.Hour) }, want: same},
	{name: "clock jumped back an hour, registry 503", before: then(func(t *testing.T, e *faultEnv) { e.resolvedAt(t, time.Hour) }, registryDown(http.StatusServiceUnavailable)), wantExit: 1},
	{name: "clock jumped forward two hours", before: func(t *testing.T, e *faultEnv) { e.resolvedAt(t, -2*time.Hour) }, want: same},
	{name: "clock jumped forward two hours, registry 503", before: then(func(t *testing.T, e *faultEnv) { e.resolvedAt(t, -2*time.Hour) }, registryDown(http.StatusServiceUnavailable)), wantExit: 1},
}

// faultOutcome is what the golden file holds of a row's second run.
type faultOutcome struct {
	exit     int
	stderr   string
	requests map[string]int
	sources  []string // "shop/web:1 stale", from the report
}

func (o faultOutcome) String() string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range o.requests {
			if !yield(k) {
				return
			}
		}
	})
	var reqs []string
	for _, k := range keys {
		reqs = append(reqs, fmt.Sprintf("%s %d", k, o.requests[k]))
	}
	if len(reqs) == 0 {
		reqs = []string{"none"}
	}
	if len(o.sources) == 0 {
		o.sources = []string{"no report"}
	}
	return fmt.Sprintf("exit %d\nrequests: %s\nsources: %s\n%s", o.exit, strings.Join(reqs, ", "), strings.Join(o.sources, ", "), o.stderr)
}

// ageWords are the ages and timings of messages, which change from run
// to run: "resolved 10m3s ago", "retrying in 512ms".
var ageWords = regexp.MustCompile(`(resolved|retrying in) [0-9hms.]+`)

// redisKey is a cache key in a message: a hash of the reference, or of
// the registry (the auth cache's), whose port changes.
var redisKey = regexp.MustCompile(`((?:digestpin:(?:failed:)?resolution|auth-ping|auth-token):)[0-9a-f]{64}`)

// redisCall is the call to Redis that failed first and how, in a warning:
// when Redis is killed mid-run, any of the calls in flight.
var redisCall = regexp.MustCompile(`(Redis redis://REDIS/0: ).*(; going on without Redis)`)

// attemptsWords are how many times a request was tried, or why it was
// not tried again.
var attemptsWords = regexp.MustCompile(` \((after \d+ attempts|not retried: [^)]*)\)`)

// hungWords are what an image says of a hung registry: the request that
// ran into --request-timeout, or one skipped after it. With the ping
// answer cached, the images' requests go out at once, and any of them may
// be the one that hangs.
var hungWords = regexp.MustCompile(`no answer from REGISTRY within [0-9.a-z]+|skipped: REGISTRY gave no answer within [0-9.a-z]+ earlier in this run`)

// TestFaults runs the real binary against the loopback registry and Redis
// while each fails as issue 38 lists, on a stream of two images: the
// exact stderr (testdata/faults.golden, digests, ports and ages
// normalised; go test ./e2e -run TestFaults -update rewrites it), the exit
// status, the registry's requests, and nothing half-written: stdout is
// the whole pinned stream or empty, the lock file and the report are
// whole (and pin what stdout pins) or absent, the cache folder holds
// whole entries only.
func TestFaults(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	outcomes := make([]faultOutcome, len(faultCases))
	t.Run("rows", func(t *testing.T) {
		for i, tc := range faultCases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				outcomes[i] = runFault(t, bin, tc)
			})
		}
	})
	if t.Failed() {
		return
	}
	var b strings.Builder
	for i, tc := range faultCases {
		fmt.Fprintf(&b, "## %s\n%s\n", tc.name, outcomes[i])
	}
	golden := filepath.Join(repoRoot(t), "testdata", "faults.golden")
	if updating() {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading the golden file (go test ./e2e -run TestFaults -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("fault outcomes differ from %s (-want +got):\n%s", golden, diff)
	}
}

// runFault runs one row: a first run that fills the cache, the row's
// change, and the second run, which it checks and returns.
func runFault(t *testing.T, bin string, tc faultCase) faultOutcome {
	e := &faultEnv{reg: testregistry.New(t), dir: t.TempDir(), digests: map[string]string{}, images: faultImages}
	if tc.one {
		e.images = faultImages[:1]
	}
	var refs []string
	if tc.mirror {
		e.mirror = testregistry.New(t)
	}
	for _, im := range e.images {
		d, children := e.reg.PushIndex(t, im, "linux/amd64", "linux/arm64")
		e.digests[im] = d.String()
		e.digests[im+" linux/amd64"] = children["linux/amd64"].String()
		refs = append(refs, e.reg.Ref(im))
		if tc.mirror {
			d, _ := e.mirror.PushIndex(t, im, "linux/amd64", "linux/arm64")
			e.digests["mirror "+im] = d.String()
		}
	}
	e.in = gen.Deployments("", refs...)
	if tc.redis {
		e.redis = testredis.Start(t, testredis.Options{})
		e.cache = []string{"--cache", e.redis.URL(0)}
	} else {
		e.cache = []string{"--cache-dir", filepath.Join(e.dir, "cache")}
	}
	// One resolution at a time, so that the order of the messages, and
	// which image's resolution pings the registry, is the stream's.
	args := append([]string{"--cache-ttl", "5m", "--stale-if-error", "1h", "--concurrency", "1"}, e.cache...)
	if tc.mirror {
		args = append(args, "--registry-mirror", e.reg.Host()+"="+e.mirror.Host())
	}
	args = append(args, tc.args...)
	lock, report := filepath.Join(e.dir, "out.lock"), filepath.Join(e.dir, "report.json")
	var first result
	if !tc.noFirst {
		firstArgs := args
		if tc.lock {
			firstArgs = append(firstArgs, "--write-lock", lock)
		}
		if first = runCmd(t, e.dir, e.in, nil, bin, firstArgs...); first.err != nil || first.stderr != "" {
			t.Fatalf("first run: %v\n%s", first.err, first.stderr)
		}
	}
	lockBefore, _ := os.ReadFile(lock)
	if tc.before != nil {
		tc.before(t, e)
	}
	e.reg.ResetCounts()
	if e.mirror != nil {
		e.mirror.ResetCounts()
	}
	second := runCmd(t, e.dir, e.in, nil, bin, append(args, "--write-lock", lock, "--report", report)...)
	out := faultOutcome{exit: exitCode(second.err), requests: e.reg.Counts(), stderr: second.stderr}
	if e.mirror != nil {
		for k, n := range e.mirror.Counts() {
			out.requests["mirror "+k] = n
		}
	}
	if out.exit != tc.wantExit {
		t.Errorf("exit %d, want %d; stderr:\n%s", out.exit, tc.wantExit, second.stderr)
	}
	out.sources = checkFaultFiles(t, e, tc, first.stdout, second.stdout, lockBefore, lock, report)

	// Normalised: the registries, Redis, the folder, the digests, ages.
	s := out.stderr
	for k, d := range e.digests {
		s = strings.ReplaceAll(s, d, "DIGEST("+k+")")
	}
	s = strings.ReplaceAll(s, e.reg.Host(), "REGISTRY")
	if e.mirror != nil {
		s = strings.ReplaceAll(s, e.mirror.Host(), "MIRROR")
	}
	if e.redis != nil {
		s = strings.ReplaceAll(s, e.redis.Addr, "REDIS")
	}
	s = strings.ReplaceAll(s, e.dir, "DIR")
	s = redisKey.ReplaceAllString(s, "${1}KEY")
	if tc.midRun {
		s = redisCall.ReplaceAllString(s, "${1}CALL: CAUSE${2}")
	}
	s = ageWords.ReplaceAllString(s, "$1 AGE")
	// The images are resolved at once: their warnings come in any order,
	// and the one that pings the registry first says how often it tried
	// (the others share its answer), the one whose request hung first
	// says so (the others skip the registry): a count of each such note
	// first.
	lines := strings.SplitAfter(s, "\n")
	attempts := map[string]int{}
	for i, l := range lines {
		if m := attemptsWords.FindString(l); m != "" {
			attempts[m]++
			lines[i] = strings.Replace(l, m, "", 1)
		}
		if m := hungWords.FindString(lines[i]); m != "" {
			attempts[" ("+m+")"]++
			lines[i] = strings.Replace(lines[i], m, "NO ANSWER", 1)
		}
	}
	slices.SortStableFunc(lines, func(a, b string) int {
		if strings.Contains(a, ": warning: ") && strings.Contains(b, ": warning: ") {
			return strings.Compare(a, b)
		}
		return 0
	})
	var said strings.Builder
	for _, m := range slices.Sorted(maps.Keys(attempts)) {
		fmt.Fprintf(&said, "%d said%s\n", attempts[m], m)
	}
	out.stderr = said.String() + strings.Join(lines, "")
	return out
}

// checkFaultFiles checks what the second run wrote: with tc.want, the
// whole stream pinned to those digests, and a lock file and a report
// that say the same; without, nothing on stdout and neither file. The
// cache folder holds whole entries only, either way.
func checkFaultFiles(t *testing.T, e *faultEnv, tc faultCase, first, stdout string, lockBefore []byte, lock, report string) (sources []string) {
	t.Helper()
	lockAfter, _ := os.ReadFile(lock)
	_, reportErr := os.Stat(report)
	if tc.want == nil {
		if stdout != "" || string(lockAfter) != string(lockBefore) || reportErr == nil {
			t.Errorf("a failed run wrote stdout %q, the lock file %q (was %q), a report (%v)", stdout, lockAfter, lockBefore, reportErr)
		}
	} else {
		l, err := lockfile.Read(lock)
		if err != nil {
			t.Fatalf("lock file: %v", err)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var rep pin.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("report: %v", err)
		}
		if len(rep.Images) != len(e.images) || l.Len() != len(e.images) {
			t.Errorf("report of %d images, lock file of %d, want %d", len(rep.Images), l.Len(), len(e.images))
		}
		for _, im := range e.images {
			d := e.digests[tc.want[im]]
			ref := e.reg.Ref(im)
			if !strings.Contains(stdout, "image: "+ref+"@"+d+"\n") {
				t.Errorf("stdout does not pin %s to %s:\n%s", ref, d, stdout)
			}
			if !slices.ContainsFunc(l.Entries(), func(le lockfile.Entry) bool { return le.Reference == ref && le.Digest == d }) {
				t.Errorf("lock file does not pin %s to %s: %+v", ref, d, l.Entries())
			}
			for _, ri := range rep.Images {
				if ri.Reference == ref {
					if ri.Digest != d {
						t.Errorf("report: %s is %s, want %s", ref, ri.Digest, d)
					}
					sources = append(sources, im+" "+string(ri.Source))
				}
			}
		}
		// The whole stream: as the first run wrote it when it pins the
		// same digests, else as many pod templates with a checksum.
		if reflect.DeepEqual(tc.want, same) && first != "" {
			if stdout != first {
				t.Errorf("stdout differs from the first run's:\n%s", cmp.Diff(first, stdout))
			}
		} else if n, m := strings.Count(stdout, "\n---\n")+1, strings.Count(stdout, "checksum/images: "); !strings.HasSuffix(stdout, "\n") || n != len(e.images) || m != len(e.images) {
			t.Errorf("stdout has %d documents and %d checksums, want %d:\n%s", n, m, len(e.images), stdout)
		}
	}
	if e.redis != nil {
		return sources
	}
	files, err := os.ReadDir(filepath.Join(e.dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(e.dir, "cache", f.Name()))
		var entry struct{ Digest string }
		switch {
		case err != nil:
			t.Error(err)
		case !strings.HasSuffix(f.Name(), ".json"):
			t.Errorf("cache folder holds %s", f.Name())
		case json.Unmarshal(b, &entry) != nil && !strings.Contains(tc.name, "corrupt"):
			t.Errorf("cache entry %s is not whole: %q", f.Name(), b)
		}
	}
	return sources
}
