package steady

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// charts are the fixtures in testdata, each three streams as Helm rendered
// them with the same chart and values: NAME.input.yaml and
// NAME.second.yaml, two renders of now, and NAME.previous.yaml, what
// digestpin wrote for an earlier render (images resolved against
// registry{}).
var charts = []struct {
	name string
	// images are the references, as resolved, that the chart uses.
	images []string
	// from, to is an edit of a value that matters, at field.
	from, to, field string
}{
	{
		// genSelfSignedCert: a Secret's tls.crt and tls.key, a webhook's
		// caBundle, and checksum/config on the Deployment.
		name:   "webhook",
		images: []string{"registry.example/tz/tzinject:1.4"},
		from:   "replicas: 2", to: "replicas: 3", field: "Deployment/tz/tzinject: spec.replicas",
	},
	{
		// randAlphaNum: a Secret's password and checksum/secret on the
		// StatefulSet.
		name:   "password",
		images: []string{"index.docker.io/library/postgres:16", "index.docker.io/library/busybox:1.36"},
		from:   `max_connections: "200"`, to: `max_connections: "300"`, field: "ConfigMap/money/ledger-db: data.max_connections",
	},
	{
		// A test hook Pod with a random name suffix.
		name:   "hook",
		images: []string{"registry.example/shop/web:2.0", "index.docker.io/library/busybox:1.36"},
		from:   "replicas: 3", to: "replicas: 4", field: "Deployment/shop/shop: spec.replicas",
	},
	{
		// now: a pod template label and a ConfigMap annotation.
		name:   "now",
		images: []string{"registry.example/clock/clock:latest"},
		from:   "TZ: UTC", to: "TZ: Europe/Paris", field: "ConfigMap/clock/clock: data.TZ",
	},
}

const extraDoc = "---\n# Source: extra/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  a: b\n"

// dropLast removes the last document of a stream.
func dropLast(s []byte) []byte {
	i := bytes.LastIndex(s, []byte("\n---\n"))
	return s[:i+1]
}

// keepCase is a render of now, and the choice Keep should make.
type keepCase struct {
	desc       string
	edit       func([]byte) []byte // applied to both renders of now
	registry   registry            // the registry now
	noSecond   bool                // Keep without a second render
	wantKept   bool
	wantReason string // a part of Decision.Reason
}

// TestCharts renders each chart now, finds the volatile fields from its
// two renders, and checks which output Keep chooses when nothing real
// changed, when an image moved, when a value that matters changed, and
// when a document was added or removed.
func TestCharts(t *testing.T) {
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			input, second, previous := read(t, c.name+".input.yaml"), read(t, c.name+".second.yaml"), read(t, c.name+".previous.yaml")
			v, err := Diff(input, second, Options{})
			if err != nil {
				t.Fatalf("Diff = %v", err)
			}
			checkGolden(t, c.name+".volatile.golden", volatileText(t, v))
			// The other way round, the same fields are volatile.
			back, err := Diff(second, input, Options{})
			if err != nil {
				t.Fatalf("Diff(second, input) = %v", err)
			}
			fields := func(v *Volatility) (f [][]string) {
				for _, x := range v.Volatile {
					f = append(f, x.Fields)
				}
				return f
			}
			if diff := cmp.Diff(fields(v), fields(back)); diff != "" {
				t.Errorf("Diff(second, input) fields differ from Diff(input, second) (-want +got):\n%s", diff)
			}
			// The previous output is kept against itself.
			if d, err := Keep(previous, previous, v, Options{}); err != nil || !d.Kept {
				t.Errorf("Keep(previous, previous) = kept %v (%s), %v; want kept", d.Kept, d.Reason, err)
			}

			same := func(b []byte) []byte { return b }
			tests := []keepCase{
				{desc: "nothing real changed", edit: same, wantKept: true, wantReason: "only volatile fields changed"},
				{desc: "no second render", edit: same, noSecond: true, wantReason: " changed"},
				{desc: "a value that matters changed", edit: func(b []byte) []byte { return bytes.Replace(b, []byte(c.from), []byte(c.to), 1) }, wantReason: c.field + " changed"},
				{desc: "a document added", edit: func(b []byte) []byte { return append(b, extraDoc...) }, wantReason: "(extra/templates/cm.yaml) is new"},
				{desc: "a document removed", edit: dropLast, wantReason: "of the previous output is gone"},
			}
			for _, im := range c.images {
				tests = append(tests, keepCase{desc: "image " + im + " moved", edit: same, registry: registry{moved: map[string]string{im: "v2"}}, wantReason: "image field"})
			}
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					in, sec := tc.edit(bytes.Clone(input)), tc.edit(bytes.Clone(second))
					out := pinned(t, in, tc.registry)
					var vol *Volatility
					if !tc.noSecond {
						if vol, err = Diff(in, sec, Options{}); err != nil {
							t.Fatalf("Diff = %v", err)
						}
					}
					got, err := Keep(previous, out, vol, Options{})
					if err != nil {
						t.Fatalf("Keep = %v", err)
					}
					want := out
					if tc.wantKept {
						want = previous
					}
					if got.Kept != tc.wantKept || !bytes.Equal(got.Output, want) || !strings.Contains(got.Reason, tc.wantReason) {
						t.Errorf("Keep() = kept %v (%s), want kept %v (%s); output differs from the one wanted: %v", got.Kept, got.Reason, tc.wantKept, tc.wantReason, !bytes.Equal(got.Output, want))
					}
				})
			}
		})
	}
}

// volatileText is the golden form of v: its warnings, then its report.
func volatileText(t *testing.T, v *Volatility) []byte {
	t.Helper()
	j, err := json.MarshalIndent(v.Volatile, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Join(v.Warnings(), "\n") + "\n\n" + string(j) + "\n")
}

// checkGolden compares got with testdata/name; go test -update rewrites
// the file first, and the comparison runs all the same.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
