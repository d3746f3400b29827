package pin

import "testing"

// TestImageOf checks which field paths of a Roll are image fields, and
// of which container: those the image lists name already.
func TestImageOf(t *testing.T) {
	for _, tc := range []struct {
		field, want string
		ok          bool
	}{
		{field: "spec.containers[web].image", want: "web", ok: true},
		{field: "spec.initContainers[migrate].image", want: "migrate", ok: true},
		{field: "spec.ephemeralContainers[debug].image", want: "debug", ok: true},
		{field: "containers[web].image", want: "web", ok: true},
		{field: "spec.volumes[data]", want: "volume/data", ok: true},
		{field: "spec.containers[web].env"},
		{field: "spec.containers[web]"},
		{field: "spec.sidecars[web].image"},
		{field: "metadata.annotations.x[web].image"},
		{field: "spec.extravolumes[data]"},
		{field: "].image"},
	} {
		if got, ok := imageOf(tc.field); got != tc.want || ok != tc.ok {
			t.Errorf("imageOf(%q) = %q, %v, want %q, %v", tc.field, got, ok, tc.want, tc.ok)
		}
	}
}
