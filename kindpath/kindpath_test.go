package kindpath

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		group, kind string // the path's
		objGroup    string
		objKind     string
		want        bool
	}{
		{desc: "same group and kind", group: "apps", kind: "Deployment", objGroup: "apps", objKind: "Deployment", want: true},
		{desc: "another group", group: "apps", kind: "Deployment", objGroup: "extensions", objKind: "Deployment"},
		{desc: "another kind", group: "apps", kind: "Deployment", objGroup: "apps", objKind: "StatefulSet"},
		{desc: "any group", group: "*", kind: "Runner", objGroup: "example.com", objKind: "Runner", want: true},
		{desc: "any group, the core group", group: "*", kind: "Pod", objGroup: "", objKind: "Pod", want: true},
		{desc: "the core group", group: "", kind: "Pod", objGroup: "", objKind: "Pod", want: true},
		{desc: "the core group, not another", group: "", kind: "Pod", objGroup: "example.com", objKind: "Pod"},
		{desc: "kinds are case-sensitive", group: "*", kind: "runner", objGroup: "example.com", objKind: "Runner"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := PodSpec{Group: tc.group, Kind: tc.kind, Fields: []string{"spec"}}
			i := Image{Group: tc.group, Kind: tc.kind, Fields: []string{"spec", "image"}}
			c := Checksum{Group: tc.group, Kind: tc.kind}
			for _, got := range []bool{p.Matches(tc.objGroup, tc.objKind), i.Matches(tc.objGroup, tc.objKind), c.Matches(tc.objGroup, tc.objKind)} {
				if got != tc.want {
					t.Errorf("%s.Matches(%q, %q) = %v, want %v", p, tc.objGroup, tc.objKind, got, tc.want)
				}
			}
		})
	}
}

func TestFormatKind(t *testing.T) {
	for _, tc := range []struct{ group, kind, want string }{
		{"*", "Runner", "Runner"},
		{"example.com", "Runner", "example.com/Runner"},
		{"", "Pod", "/Pod"},
	} {
		if got := FormatKind(tc.group, tc.kind); got != tc.want {
			t.Errorf("FormatKind(%q, %q) = %q, want %q", tc.group, tc.kind, got, tc.want)
		}
	}
}

func TestParseSelector(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   Selector
		ok     bool
		isFlag bool
	}{
		{in: "env[name=AGENT_IMAGE]", want: Selector{Field: "env", Key: "name", Value: "AGENT_IMAGE"}, ok: true},
		{in: "args[flag=--image]", want: Selector{Field: "args", Key: "flag", Value: "--image"}, ok: true, isFlag: true},
		{in: "env[name=a=b]", want: Selector{Field: "env", Key: "name", Value: "a=b"}, ok: true},
		{in: "env[name=a.b]", want: Selector{Field: "env", Key: "name", Value: "a.b"}, ok: true},
		{in: "image"},
		{in: "*"},
		{in: "[name=x]"},
		{in: "env[name]"},
		{in: "env[name=x]y"},
	} {
		got, ok := ParseSelector(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseSelector(%q) = %v, %v, want ok %v", tc.in, got, ok, tc.ok)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseSelector(%q) (-want +got):\n%s", tc.in, diff)
		}
		if got.IsFlag() != tc.isFlag {
			t.Errorf("ParseSelector(%q).IsFlag() = %v, want %v", tc.in, got.IsFlag(), tc.isFlag)
		}
	}
}
