package pin

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// mustPolicies returns tag policies of "IMAGE=STRATEGY" entries.
func mustPolicies(t *testing.T, entries ...string) *tagpolicy.TagPolicies {
	t.Helper()
	ps := &tagpolicy.TagPolicies{}
	for _, e := range entries {
		if err := AddTagEntry(e, "IMAGE=STRATEGY", ps.Add); err != nil {
			t.Fatalf("tag policy %q: %v", e, err)
		}
	}
	return ps
}

// TestGolden pins each testdata/NAME.input.yaml with the options of
// NAME against a fakeRegistry, and compares the output, the lock file and
// the report with NAME.golden.yaml, NAME.lock and NAME.report.json (those
// the options write). Then it pins the golden output again, with the same
// options, to prove that a Pin of its own output changes nothing.
func TestGolden(t *testing.T) {
	certificate := &Generated{
		Certificates: []GeneratedCertificate{{
			Template: "shop/templates/tls.yaml", Function: "genSelfSignedCert", CommonName: "web.shop",
			NotBefore: fakeEpoch, NotAfter: fakeEpoch.Add(365 * 24 * time.Hour), ReissueAt: fakeEpoch.Add(335 * 24 * time.Hour),
		}},
		Varying: []GeneratedUse{{Template: "shop/templates/job.yaml", Function: "now"}},
	}
	for _, tc := range []struct {
		name     string
		registry *fakeRegistry
		opts     func(t *testing.T) Options
		asked    int // registry resolutions of the first Pin
		listings int // tag listings of the first Pin
		builds   int // build times the first Pin asks: its moved and added digests
		// previous, when set, is the lock file in testdata that the lock
		// file replaces: the first Pin writes NAME.summary.md and
		// NAME.summary.txt against it, and the second one compares with
		// the lock file of the first and finds nothing changed.
		previous string
		// before, when set, is an earlier Helm output in testdata, which
		// beforeRegistry pins into the output that the first Pin
		// compares with (DiffAgainst) and writes NAME.summary.md and
		// NAME.summary.txt against; the second one compares with the
		// golden output and finds nothing changed. secrets are values
		// of its Secrets that no summary and no report may show, in any
		// form.
		before         string
		beforeRegistry *fakeRegistry
		secrets        []string
	}{
		{
			// Every kind of image: resolved, used twice, pinned already,
			// unresolvable (kept), and a ConfigMap value left alone.
			name:     "record",
			registry: newFake("registry.example/shop/web:1.4", "registry.example/shop/proxy:2", "registry.example/shop/db:16"),
			opts: func(*testing.T) Options {
				o := Options{Generated: func() *Generated { return certificate }}
				o.Renderer.KeepUnresolved = true
				return o
			},
			asked: 4,
		},
		{
			name: "tag-policies",
			registry: newFake(
				"registry.example/shop/web:1.4.1", "registry.example/shop/web:1.4.2", "registry.example/shop/web:1.5.0",
				"registry.example/shop/web:2.0.0-rc.1", "registry.example/shop/web:2.0.0", "registry.example/shop/web:1.4",
				"registry.example/shop/api:1.4.9", "registry.example/shop/api:main-3", "registry.example/shop/api:latest",
				"registry.example/shop/api:1.4.9", // pushed again: now the latest
				"registry.example/shop/side:1"),
			opts: func(t *testing.T) Options {
				return Options{TagPolicies: mustPolicies(t, "registry.example/shop/web=semver:~1.4", "registry.example/shop/api=latest"), MaxTags: 3}
			},
			asked: 3, listings: 2,
		},
		{
			// Keel's policies per workload; the cache workload has none,
			// and follows the caller's policy for its image.
			name: "keel",
			registry: newFake(
				"registry.example/shop/web:1.4.1", "registry.example/shop/web:1.4.2", "registry.example/shop/web:1.5.0",
				"registry.example/shop/web:2.0.0", "registry.example/shop/web:1.4",
				"registry.example/shop/api:1.4.1", "registry.example/shop/api:1.4.2", "registry.example/shop/api:1.5.0",
				"registry.example/shop/tool:main-1", "registry.example/shop/tool:main-2", "registry.example/shop/tool:other",
				"registry.example/shop/db:16", "registry.example/shop/db:17",
				"registry.example/shop/side:1",
				"registry.example/shop/cache:1", "registry.example/shop/cache:2"),
			opts: func(t *testing.T) Options {
				o := Options{KeelAnnotations: true, TagPolicies: mustPolicies(t, "registry.example/shop/cache=latest")}
				o.Renderer.Mode = renderer.ModeDigest
				return o
			},
			asked: 7, listings: 4,
		},
		{
			// Against the lock file it replaces: shop/web:dev (of two
			// Deployments and an init container) and the CronJob's
			// shop/tool:1 moved, shop/proxy:2 is new, shop/old:1 no longer
			// used, shop/db:16 the same, shop/gone:1 left as a tag.
			name: "changes",
			// shop/tool:1 was built reproducibly (at the epoch): its
			// build time is not shown.
			registry: newFake("registry.example/shop/web:dev", "registry.example/shop/web:dev",
				"registry.example/shop/tool:1", "registry.example/shop/tool:1",
				"registry.example/shop/db:16", "registry.example/shop/proxy:2").reproducible("registry.example/shop/tool:1"),
			opts: func(*testing.T) Options {
				o := Options{}
				o.Renderer.KeepUnresolved = true
				return o
			},
			asked:    5,
			builds:   3,
			previous: "changes.previous.lock",
		},
		{
			// Against an earlier output: shop/web:dev moved (web and
			// worker roll for it); web rolls for its checksum/config and
			// env too, api for a new container; the CronJob is new and
			// the StatefulSet gone; web-tls's certificate was re-issued,
			// db gained a key, legacy is gone.
			name:           "rolls",
			registry:       newFake("registry.example/shop/web:dev", "registry.example/shop/web:dev", "registry.example/shop/api:1", "registry.example/shop/proxy:2"),
			beforeRegistry: newFake("registry.example/shop/web:dev", "registry.example/shop/api:1"),
			opts:           func(*testing.T) Options { return Options{} },
			asked:          3,
			builds:         2,
			before:         "rolls.before.yaml",
			secrets: []string{
				"Q0VSVC1UV08=", "S0VZLVRXTw==", "Q0VSVC1PTkU=", "S0VZLU9ORQ==", "b2xkLXRva2Vu", "CERT-", "KEY-", "old-token", "s3cr3t",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.name+".input.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			o := tc.opts(t)
			o.Registry = tc.registry
			o.WriteLock = filepath.Join(dir, "digests.lock")
			o.Report = filepath.Join(dir, "report.json")
			if tc.previous != "" {
				if err := os.WriteFile(o.WriteLock, readFile(t, filepath.Join("testdata", tc.previous)), 0o644); err != nil {
					t.Fatal(err)
				}
				o.Summary, o.SummaryText = filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt")
			}
			if tc.before != "" {
				bo := tc.opts(t)
				bo.Registry = tc.beforeRegistry
				res, err := pinOnce(t, bo, readFile(t, filepath.Join("testdata", tc.before)))
				if err != nil {
					t.Fatalf("Pin(%s) = %v", tc.before, err)
				}
				o.DiffAgainst = filepath.Join(dir, "earlier.yaml")
				if err := os.WriteFile(o.DiffAgainst, res.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				o.Summary, o.SummaryText = filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt")
			}
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Pin(context.Background(), in)
			if err != nil {
				t.Fatalf("Pin(%s) = %v", tc.name, err)
			}
			if err := res.Commit(); err != nil {
				t.Fatal(err)
			}
			if builds := tc.registry.buildCount(); builds != tc.builds {
				t.Errorf("Pin(%s) asked %d build times, want %d", tc.name, builds, tc.builds)
			}
			if asked, listings := tc.registry.counts(); asked != tc.asked || listings != tc.listings {
				t.Errorf("Pin(%s) asked the registry %d times and listed tags %d times, want %d and %d", tc.name, asked, listings, tc.asked, tc.listings)
			}
			goldens := map[string][]byte{
				tc.name + ".golden.yaml": res.Bytes(),
				tc.name + ".lock":        readFile(t, o.WriteLock),
				tc.name + ".report.json": readFile(t, o.Report),
			}
			if o.Summary != "" {
				goldens[tc.name+".summary.md"] = readFile(t, o.Summary)
				goldens[tc.name+".summary.txt"] = readFile(t, o.SummaryText)
			}
			for golden, got := range goldens {
				compareGolden(t, filepath.Join("testdata", golden), got)
				if strings.HasSuffix(golden, ".yaml") {
					continue
				}
				for _, v := range tc.secrets {
					if bytes.Contains(got, []byte(v)) {
						t.Errorf("%s shows a Secret's value %q", golden, v)
					}
				}
			}

			// Idempotence: the golden output is a fixed point, and,
			// against the lock file just written, nothing moved.
			want := readFile(t, filepath.Join("testdata", tc.name+".golden.yaml"))
			o.Report, o.Summary, o.SummaryText = "", "", ""
			o.Changes = tc.previous != "" || tc.before != ""
			if !o.Changes {
				o.WriteLock = ""
			}
			against := AgainstLock
			if tc.before != "" {
				// Against the golden output itself.
				against, o.DiffAgainst = AgainstOutput, filepath.Join(dir, "golden.yaml")
				if err := os.WriteFile(o.DiffAgainst, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p, err = New(o)
			if err != nil {
				t.Fatal(err)
			}
			again, err := p.Pin(context.Background(), want)
			if err != nil {
				t.Fatalf("Pin(%s.golden.yaml) = %v", tc.name, err)
			}
			if !bytes.Equal(want, again.Bytes()) {
				t.Errorf("Pin(%s.golden.yaml) changed its own output (-want +got):\n%s", tc.name, cmp.Diff(string(want), string(again.Bytes())))
			}
			if cs := again.Changes; o.Changes && (cs.Len() != 0 || cs.Against != against || len(cs.Rolls) != 0 || len(cs.Secrets) != 0) {
				t.Errorf("Pin(%s.golden.yaml).Changes = %s, want nothing changed %s", tc.name, cs.Text(), cs.against())
			}
			again.Discard()
		})
	}
}

// compareGolden compares got with the golden file, after writing it there
// with -update.
func compareGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}

// readFile returns the content of path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenInputs checks that every input has its case, so that a new
// input file cannot go untested.
func TestGoldenInputs(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range inputs {
		names = append(names, strings.TrimSuffix(filepath.Base(in), ".input.yaml"))
	}
	if diff := cmp.Diff([]string{"changes", "keel", "record", "rolls", "tag-policies"}, names); diff != "" {
		t.Errorf("inputs in testdata (-want +got):\n%s", diff)
	}
}
