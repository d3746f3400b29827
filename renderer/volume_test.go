package renderer

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// volumePod is a Pod with a container and an image volume of one name.
const volumePod = `apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: data
    image: registry.example/app:1
  volumes:
  - name: data
    image:
      reference: IMAGE
      pullPolicy: IfNotPresent
`

// TestImageVolumes renders a pod spec with an image volume in each mode:
// the volume's reference is written as a container's image is, and the
// checksum covers it as the line volume/NAME=REF.
func TestImageVolumes(t *testing.T) {
	t.Parallel()
	app, data := "registry.example/app:1", "registry.example/data:1"
	in := strings.Replace(volumePod, "IMAGE", data, 1)
	for _, tc := range []struct {
		mode      Mode
		app, data string // the fields as written
		lines     []string
	}{
		{mode: ModePin, app: app + "@" + dg(app), data: data + "@" + dg(data),
			lines: []string{"data=" + app + "@" + dg(app), "volume/data=" + data + "@" + dg(data)}},
		{mode: ModeDigest, app: "registry.example/app@" + dg(app), data: "registry.example/data@" + dg(data),
			lines: []string{"data=registry.example/app@" + dg(app), "volume/data=registry.example/data@" + dg(data)}},
		{mode: ModeAnnotate, app: app, data: data,
			lines: []string{"data=" + app + "@" + dg(app), "volume/data=" + data + "@" + dg(data)}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), Mode: tc.mode}
			res, err := r.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			want := strings.Replace(in, "  name: p\n", "  name: p\n  annotations:\n    checksum/images: '"+Checksum(tc.lines)+"'\n", 1)
			want = strings.Replace(want, "image: "+app, "image: "+tc.app, 1)
			want = strings.Replace(want, "reference: "+data, "reference: "+tc.data, 1)
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			var got []Workload
			for _, img := range res.Images {
				got = append(got, img.Workloads...)
			}
			wantW := []Workload{{Kind: "Pod", Name: "p", Container: "data"}, {Kind: "Pod", Name: "p", Container: "volume/data"}}
			if diff := cmp.Diff(wantW, got); diff != "" {
				t.Errorf("Render() workloads (-want +got):\n%s", diff)
			}
			if tc.mode == ModePin {
				checkAsAPIServer(t, []byte(in), res.Bytes())
			}
		})
	}
}

// TestImageVolumesKeepChecksums checks that volumes without an image
// leave the checksum as it is without volumes, and that a volume line
// cannot be mistaken for a container's.
func TestImageVolumesKeepChecksums(t *testing.T) {
	t.Parallel()
	app := "registry.example/app:1"
	plain := strings.Replace(pod, "IMAGE", app, 1)
	withVolumes := plain + "  volumes:\n  - name: c\n    configMap: {name: c}\n  - name: e\n    emptyDir: {}\n  - name: n\n    image: null\n"
	for _, in := range []string{plain, withVolumes} {
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
		if err != nil {
			t.Fatalf("Render(%q) = %v", in, err)
		}
		if want := Checksum([]string{"app=" + app + "@" + dg(app)}); !strings.Contains(string(res.Bytes()), want) {
			t.Errorf("Render(%q) = %s, want the checksum %s", in, res.Bytes(), want)
		}
	}
	if Checksum([]string{"data=x"}) == Checksum([]string{"volume/data=x"}) {
		t.Errorf("a container and a volume of one name have the same checksum")
	}
}

// TestImageVolumesRefused renders image volumes that cannot be pinned:
// each must be refused with one line naming the line and the volume.
func TestImageVolumesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     []string
	}{
		{
			desc: "reference is null",
			in:   strings.Replace(volumePod, "IMAGE", "null", 1),
			want: []string{"document 1, line 12", `Pod/p volume "data": reference is empty`},
		},
		{
			desc: "reference is a number",
			in:   strings.Replace(volumePod, "IMAGE", "12", 1),
			want: []string{"line 12", `volume "data": reference is int 12`},
		},
		{
			desc: "reference with an uppercase repository",
			in:   strings.Replace(volumePod, "IMAGE", "registry.example/Data:1", 1),
			want: []string{"line 12", `volume "data": parsing reference "registry.example/Data:1"`},
		},
		{
			desc: "a volume name that is not a string",
			in:   strings.Replace(strings.Replace(volumePod, "IMAGE", "registry.example/data:1", 1), "  volumes:\n  - name: data\n", "  volumes:\n  - name: [data]\n", 1),
			want: []string{"line 10", "Pod/p volumes[0]: name is a sequence, want a string"},
		},
		{
			desc: "an image volume's image shared with data outside the pod spec",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nx: &i {reference: registry.example/d:1}\nspec:\n  containers: []\n  volumes:\n  - name: d\n    image: *i\n",
			want: []string{"line 5", "&i is not on the way to a pod spec's images"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			wantRefused(t, &Renderer{Resolver: newFixed()}, tc.in, tc.want)
		})
	}
}
