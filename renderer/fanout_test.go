package renderer

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/kindpath"
)

// sharedSpecList returns a List, from template c/templates/pods.yaml, of
// objects Pods that share one pod spec of containers containers through
// an alias, the anchor on the first: the spec's image fields are used
// containers·objects times. Pod pK is on stream line 6+K.
func sharedSpecList(containers, objects int) string {
	var b strings.Builder
	b.WriteString("---\n# Source: c/templates/pods.yaml\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p0}, spec: &s {containers: [")
	for i := range containers {
		fmt.Fprintf(&b, "{name: c%d, image: %s},", i, hostileImage)
	}
	b.WriteString("]}}\n")
	for i := 1; i < objects; i++ {
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: Pod, metadata: {name: p%d}, spec: *s}\n", i)
	}
	return b.String()
}

// fanOutRefusal matches the refusal of a document whose aliases name a
// large node in too many objects, for Render and Snapshot: the document,
// its source, the line of the object where the bound ran out, the object.
var fanOutRefusal = regexp.MustCompile(`^document 1 \(c/templates/pods\.yaml\), line (\d+)(?: \(rendered line \d+ of the template\))?: (?:Pod|Runner|Worker)/p(\d+): its (?:pod templates and image fields|pod templates and Secrets) hold more than \d+ entries to read, counting those that aliases name again \(the document's nodes plus 65536\): an alias names a large node in too many places$`)

// checkFanOutRefusal checks that err is fanOutRefusal at the line of the
// object it names.
func checkFanOutRefusal(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("got nil error, want the document refused")
	}
	m := fanOutRefusal.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error = %q, want one line matching %s", err, fanOutRefusal)
	}
	line, _ := strconv.Atoi(m[1])
	k, _ := strconv.Atoi(m[2])
	if line != 6+k {
		t.Errorf("error = %q names line %d, want the line of p%d, %d", err, line, k, 6+k)
	}
}

// TestFanOutRefused renders documents in which an alias names a large
// node in many objects: a pod spec shared by thousands of Pods (each of
// its image fields used once per Pod), a job list that an image path's
// "*" steps into for each object, a list of pod templates that a pod spec
// path's "*" does, a pod spec whose nodes each object's checksum holders
// are checked against. The finder's work is bounded by the document's nodes
// plus 65536 entries (fanOut, Snapshot's bound too), so each is refused,
// naming the document, its source, and the object where the bound ran
// out, without work that grows with the square of the document: the bound
// holds the time, and renderWithin's minute only guards against a hang.
func TestFanOutRefused(t *testing.T) {
	t.Parallel()
	list := func(kind, anchored, item string, n int) string {
		var b strings.Builder
		b.WriteString("---\n# Source: c/templates/pods.yaml\napiVersion: v1\nkind: List\nitems:\n")
		fmt.Fprintf(&b, "- {apiVersion: example.com/v1, kind: %s, metadata: {name: p0}, spec: %s}\n", kind, anchored)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "- {apiVersion: example.com/v1, kind: %s, metadata: {name: p%d}, spec: %s}\n", kind, i, item)
		}
		return b.String()
	}
	many := func(n int, f func(i int) string) string {
		var s []string
		for i := range n {
			s = append(s, f(i))
		}
		return strings.Join(s, ", ")
	}
	jobs := "&s {jobs: [" + many(2000, func(i int) string { return fmt.Sprintf("{name: j%d, tool: %s}", i, hostileImage) }) + "]}"
	notJobs := "&s {jobs: [" + many(2000, func(int) string { return "{tool: null}" }) + "]}"
	pools := "&s {pools: [" + many(2000, func(i int) string {
		return fmt.Sprintf("{template: {spec: {containers: [{name: c%d, image: %s}]}}}", i, hostileImage)
	}) + "]}"
	// A pod spec without images, whose nodes a checksum path's holder
	// is checked against for each object.
	emptySpec := "&s {jobs: [{tool: " + hostileImage + "}], template: {spec: {containers: [" + many(2000, func(i int) string { return fmt.Sprintf("{name: c%d}", i) }) + "]}}}"
	tool := kindpath.Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}}
	runnerSpec, err := kindpath.ParsePodSpec("example.com/Runner=spec.template.spec")
	if err != nil {
		t.Fatal(err)
	}
	jobSum, err := kindpath.ParseChecksum("Runner=spec.jobs.*")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := kindpath.ParsePodSpec("example.com/Worker=spec.pools.*.template.spec")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		in   string
		r    *Renderer
	}{
		{desc: "a pod spec of 2000 containers shared by 2000 Pods", in: sharedSpecList(2000, 2000), r: &Renderer{}},
		{desc: "2000 jobs with images shared by 2000 objects", in: list("Runner", jobs, "*s", 2000), r: &Renderer{ImagePaths: []kindpath.Image{tool}}},
		{desc: "2000 jobs without images shared by 2000 objects", in: list("Runner", notJobs, "*s", 2000), r: &Renderer{ImagePaths: []kindpath.Image{tool}}},
		{desc: "a pod spec of 2000 containers without images shared by 2000 objects with checksum paths", in: list("Runner", emptySpec, "*s", 2000), r: &Renderer{ImagePaths: []kindpath.Image{tool}, ChecksumPaths: []kindpath.Checksum{jobSum}, PodSpecPaths: []kindpath.PodSpec{runnerSpec}}},
		{desc: "2000 pod templates shared by 2000 objects", in: list("Worker", pools, "*s", 2000), r: &Renderer{PodSpecPaths: append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], worker)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.r.Resolver = newFixed()
			res, err := renderWithin(t, tc.r, tc.in)
			if res.Bytes() != nil {
				t.Errorf("Render() returned output with error %v", err)
			}
			checkFanOutRefusal(t, err)
		})
	}
	// The case of the report: a List of 20,000 Pods sharing a pod spec
	// of 10,000 containers, 2·10^8 uses of its images, which did not
	// render within 5 minutes.
	t.Run("a pod spec of 10000 containers shared by 20000 Pods", func(t *testing.T) {
		testfiles.Slow(t)
		_, err := renderWithin(t, &Renderer{Resolver: newFixed()}, sharedSpecList(10000, 20000))
		checkFanOutRefusal(t, err)
	})
}

// TestFanOutWithinBound checks that sharing through aliases that stays
// within the bound is pinned as before: each image field written once, a
// checksum on each Pod.
func TestFanOutWithinBound(t *testing.T) {
	t.Parallel()
	res, err := renderWithin(t, &Renderer{Resolver: newFixed()}, sharedSpecList(100, 100))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	out := string(res.Bytes())
	if got := strings.Count(out, hostileImage+"@"+dg(hostileImage)); got != 100 {
		t.Errorf("output pins %d image fields, want the shared spec's 100", got)
	}
	if got := strings.Count(out, "checksum/images"); got != 100 {
		t.Errorf("output has %d checksums, want one for each of 100 Pods", got)
	}
	if got := len(res.Images); got != 1 || len(res.Images[0].Workloads) != 100*100 {
		t.Errorf("Render() reports %d images, want 1 used 10000 times", got)
	}
}
