package kindpath

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseChecksum(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Checksum
		err  string
	}{
		{in: "example.com/Runner=spec.template", want: Checksum{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "template"}}},
		{in: "Runner=spec.templates.*", want: Checksum{Group: "*", Kind: "Runner", Fields: []string{"spec", "templates", "*"}}},
		{in: "example.com/Runner=.", want: Checksum{Group: "example.com", Kind: "Runner"}},
		{in: "Runner=", err: `parsing checksum path "Runner=": want KIND=FIELD.PATH`},
		{in: "Runner=spec.jobs[name=build]", want: Checksum{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs[name=build]"}}},
		{in: "Runner=spec.args[flag=--x]", err: `parsing checksum path "Runner=spec.args[flag=--x]": args[flag=--x] selects a flag's value, which only an image path may end in`},
		{in: "/=.", err: `parsing checksum path "/=.": bad kind "/"`},
		{in: "Runner=spec.", err: `parsing checksum path "Runner=spec.": empty field in "spec."`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseChecksum(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseChecksum(%q) = %v, %v, want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseChecksum(%q) = %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseChecksum(%q) (-want +got):\n%s", tc.in, diff)
			}
			if got.String() != tc.in {
				t.Errorf("ParseChecksum(%q).String() = %q", tc.in, got.String())
			}
		})
	}
}
