package pin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/renderer"
)

// shopImages are the images of testdata/changes.input.yaml that resolve;
// registry.example/shop/gone:1 does not.
var shopImages = []string{"registry.example/shop/web:dev", "registry.example/shop/proxy:2", "registry.example/shop/tool:1", "registry.example/shop/db:16", "registry.example/shop/new:1"}

// describe lists a change set one line per image, with the containers
// that roll: "moved registry.example/shop/web:dev OLD → NEW:
// Deployment/prod/web (migrate, web)", digests short.
func describe(cs *ChangeSet) []string {
	var out []string
	add := func(what string, c Change) {
		l := what + " " + c.Reference
		if c.Previous != nil {
			l += " " + ShortDigest(c.Previous.Digest) + " (" + c.Previous.Source + ")"
		}
		if c.Digest != "" {
			l += " → " + ShortDigest(c.Digest)
		}
		if wl := containers(c.Workloads); len(wl) > 0 {
			l += ": " + strings.Join(wl, ", ")
		}
		out = append(out, l)
	}
	for _, c := range cs.Moved {
		add("moved", c)
	}
	for _, c := range cs.Added {
		add("added", c)
	}
	for _, c := range cs.Removed {
		add("removed", c)
	}
	for _, u := range cs.Unchanged {
		out = append(out, "unchanged "+u)
	}
	for _, t := range cs.Tags {
		out = append(out, "tag "+t.Reference+" ("+t.Why+"): "+strings.Join(containers(t.Workloads), ", "))
	}
	for _, r := range cs.Rolls {
		out = append(out, strings.TrimSpace("roll "+rollObject(r.Kind, r.Namespace, r.Name)+" "+r.Change+" "+strings.Join(r.Fields, ", ")))
	}
	for _, s := range cs.Secrets {
		out = append(out, "secret "+secretLine(s, func(k string) string { return k }))
	}
	return out
}

// TestChanges records a lock file (or an output) of
// testdata/changes.input.yaml, changes the registry or the input, pins
// again and compares the change set: images moved, added, removed and
// unchanged, an image shared by two workloads and an init container, a
// CronJob's image, against the lock file a run replaces, the lock file
// of a check, and a previous output in either mode.
func TestChanges(t *testing.T) {
	base := readFile(t, filepath.Join("testdata", "changes.input.yaml"))
	short := func(f *fakeRegistry, image string) string { return ShortDigest(f.digest(image).String()) }
	for _, tc := range []struct {
		desc string
		// against is what the second Pin compares with: "write-lock"
		// (the lock file it replaces), "check" (Lock and Check), "output"
		// (DiffAgainst the first output), or "" (nothing).
		against string
		mode    renderer.Mode // of both Pins
		push    []string      // pushed again between the Pins
		edit    func(string) string
		want    func(before, now func(string) string) []string
	}{
		{
			desc: "nothing moved", against: "write-lock",
			want: func(before, _ func(string) string) []string {
				return []string{
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/proxy:2",
					"unchanged registry.example/shop/tool:1",
					"unchanged registry.example/shop/web:dev",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			desc: "an image of two workloads and an init container moved", against: "write-lock",
			push: []string{"registry.example/shop/web:dev"},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/web:dev " + before("shop/web:dev") + " (lock) → " + now("shop/web:dev") + ": Deployment/prod/web (migrate, web), Deployment/prod/admin (admin)",
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/proxy:2",
					"unchanged registry.example/shop/tool:1",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			desc: "a CronJob's image moved, one added, one removed", against: "write-lock",
			push: []string{"registry.example/shop/tool:1"},
			edit: func(s string) string {
				return strings.Replace(s, "registry.example/shop/proxy:2", "registry.example/shop/new:1", 1)
			},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/tool:1 " + before("shop/tool:1") + " (lock) → " + now("shop/tool:1") + ": CronJob/prod/cleanup (cleanup)",
					"added registry.example/shop/new:1 → " + now("shop/new:1") + ": Deployment/prod/web (proxy)",
					"removed registry.example/shop/proxy:2 " + before("shop/proxy:2") + " (lock)",
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/web:dev",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			desc: "a check against the lock file", against: "check",
			push: []string{"registry.example/shop/db:16"},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/db:16 " + before("shop/db:16") + " (lock) → " + now("shop/db:16") + ": StatefulSet/prod/db (db)",
					"unchanged registry.example/shop/proxy:2",
					"unchanged registry.example/shop/tool:1",
					"unchanged registry.example/shop/web:dev",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			desc: "against the previous output", against: "output",
			push: []string{"registry.example/shop/web:dev"},
			edit: func(s string) string {
				return strings.Replace(s, "registry.example/shop/proxy:2", "registry.example/shop/new:1", 1)
			},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/web:dev " + before("shop/web:dev") + " (output) → " + now("shop/web:dev") + ": Deployment/prod/web (migrate, web), Deployment/prod/admin (admin)",
					"added registry.example/shop/new:1 → " + now("shop/new:1") + ": Deployment/prod/web (proxy)",
					"removed registry.example/shop/proxy:2 " + before("shop/proxy:2") + " (output): Deployment/prod/web (proxy)",
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/tool:1",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			// A template that changes for its own reasons, beside its
			// images: an env value, an image left as a tag; the image
			// that moved and the tag edited are named in the images.
			desc: "against the previous output, a template changed", against: "output",
			push: []string{"registry.example/shop/tool:1"},
			edit: func(s string) string {
				return strings.NewReplacer("registry.example/shop/proxy:2", "registry.example/shop/new:1",
					"registry.example/shop/gone:1", "registry.example/shop/gone:2",
					"          restartPolicy: OnFailure\n", "            env: [{name: MODE, value: fast}]\n          restartPolicy: OnFailure\n",
					"data:\n  image:", "data:\n  other: x\n  image:").Replace(s)
			},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/tool:1 " + before("shop/tool:1") + " (output) → " + now("shop/tool:1") + ": CronJob/prod/cleanup (cleanup)",
					"added registry.example/shop/new:1 → " + now("shop/new:1") + ": Deployment/prod/web (proxy)",
					"removed registry.example/shop/proxy:2 " + before("shop/proxy:2") + " (output): Deployment/prod/web (proxy)",
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/web:dev",
					"tag registry.example/shop/gone:2 (not resolved): StatefulSet/prod/db (gone)",
					"roll CronJob/prod/cleanup changed spec.containers[cleanup].env",
					"roll StatefulSet/prod/db changed spec.containers[gone].image",
				}
			},
		},
		{
			// The digest mode writes name@digest: the tag is gone from the
			// output, and each image is found through its workloads.
			desc: "against a previous output of the digest mode", against: "output", mode: renderer.ModeDigest,
			push: []string{"registry.example/shop/tool:1"},
			want: func(before, now func(string) string) []string {
				return []string{
					"moved registry.example/shop/tool:1 " + before("shop/tool:1") + " (output) → " + now("shop/tool:1") + ": CronJob/prod/cleanup (cleanup)",
					"unchanged registry.example/shop/db:16",
					"unchanged registry.example/shop/proxy:2",
					"unchanged registry.example/shop/web:dev",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
		{
			desc: "nothing to compare with",
			want: func(_, now func(string) string) []string {
				return []string{
					"added registry.example/shop/db:16 → " + now("shop/db:16") + ": StatefulSet/prod/db (db)",
					"added registry.example/shop/proxy:2 → " + now("shop/proxy:2") + ": Deployment/prod/web (proxy)",
					"added registry.example/shop/tool:1 → " + now("shop/tool:1") + ": CronJob/prod/cleanup (cleanup)",
					"added registry.example/shop/web:dev → " + now("shop/web:dev") + ": Deployment/prod/web (migrate, web), Deployment/prod/admin (admin)",
					"tag registry.example/shop/gone:1 (not resolved): StatefulSet/prod/db (gone)",
				}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFake(shopImages...)
			dir := t.TempDir()
			lock := filepath.Join(dir, "digests.lock")
			o := Options{Registry: f}
			o.Renderer.KeepUnresolved, o.Renderer.Mode = true, tc.mode
			first := o
			first.WriteLock = lock
			res, err := pinOnce(t, first, base)
			if err != nil {
				t.Fatal(err)
			}
			prevOut := filepath.Join(dir, "previous.yaml")
			if err := os.WriteFile(prevOut, res.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			before := map[string]string{}
			for _, im := range shopImages {
				before[strings.TrimPrefix(im, "registry.example/")] = short(f, im)
			}
			for _, im := range tc.push {
				f.push(im)
			}
			in := string(base)
			if tc.edit != nil {
				in = tc.edit(in)
			}
			o.Changes = true
			switch tc.against {
			case "write-lock":
				o.WriteLock = lock
			case "check":
				o.Lock, o.Check = lock, true
			case "output":
				o.DiffAgainst = prevOut
			}
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			var cs *ChangeSet
			res, err = p.Pin(context.Background(), []byte(in))
			var de *DiffersError
			switch {
			case errors.As(err, &de):
				if !errors.Is(err, ErrLockDiffers) {
					t.Errorf("Pin() = %v, not ErrLockDiffers", err)
				}
				cs = de.Changes
			case err != nil:
				t.Fatalf("Pin() = %v", err)
			default:
				cs = res.Changes
			}
			if tc.against == "check" && de == nil {
				t.Fatalf("Pin() with Check = %v, want a *DiffersError", err)
			}
			now := func(im string) string { return short(f, "registry.example/"+im) }
			if diff := cmp.Diff(tc.want(func(im string) string { return before[im] }, now), describe(cs)); diff != "" {
				t.Errorf("Pin().Changes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangesOnlyWhenAsked checks that a Pin without a report, a
// summary or Changes reads no previous state: a previous output that
// does not exist fails nothing.
func TestChangesOnlyWhenAsked(t *testing.T) {
	o := Options{Registry: newFake(shopImages...), DiffAgainst: filepath.Join(t.TempDir(), "missing.yaml")}
	o.Renderer.KeepUnresolved = true
	res, err := pinOnce(t, o, readFile(t, filepath.Join("testdata", "changes.input.yaml")))
	if err != nil {
		t.Fatalf("Pin() = %v", err)
	}
	if res.Changes != nil {
		t.Errorf("Pin().Changes = %+v, want nil", res.Changes)
	}
}

// TestDiffAgainstBadInput checks the one-line errors of a previous
// output that cannot be read: missing, not a manifest stream, bad YAML.
func TestDiffAgainstBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		desc, content, want string
	}{
		{desc: "missing", want: "reading earlier output " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{desc: "a lock file", content: "version: 1\nimages:\n- reference: registry.example/shop/web:dev\n  digest: sha256:00\n", want: "not a manifest stream: no document has a kind"},
		{desc: "bad yaml", content: "kind: Deployment\nmetadata: [\n", want: "reading earlier output " + filepath.Join(dir, "bad yaml") + ": "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := filepath.Join(dir, "missing")
			if tc.content != "" {
				path = filepath.Join(dir, tc.desc)
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			o := Options{Registry: newFake(shopImages...), DiffAgainst: path, Changes: true}
			o.Renderer.KeepUnresolved = true
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Pin(context.Background(), readFile(t, filepath.Join("testdata", "changes.input.yaml")))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Pin() = %v, want one line with %q", err, tc.want)
			}
		})
	}
}
