package kindpath

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePodSpec(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PodSpec
		wantErr bool
	}{
		{in: "Worker=spec.template.spec", want: PodSpec{Group: "*", Kind: "Worker", Fields: []string{"spec", "template", "spec"}}},
		{in: "example.com/Worker=spec.pods.*.spec", want: PodSpec{Group: "example.com", Kind: "Worker", Fields: []string{"spec", "pods", "*", "spec"}}},
		{in: "Worker", wantErr: true},
		{in: "=spec", wantErr: true},
		{in: "Worker=spec..x", wantErr: true},
		{in: "a/b/C=spec", wantErr: true},
	} {
		got, err := ParsePodSpec(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParsePodSpec(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParsePodSpec(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
