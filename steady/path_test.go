package steady

import "testing"

func TestPathString(t *testing.T) {
	for _, tc := range []struct {
		p    path
		want string
	}{
		{nil, "."},
		{path{}.key("spec").key("replicas"), "spec.replicas"},
		{path{}.key("data").key("tls.crt"), `data["tls.crt"]`},
		{path{}.key("a/b"), `["a/b"]`},
		{path{}.key("0"), "0"},
		{path{}.key("l").index(0).key("0"), "l[0].0"},
		{path{}.key("c").name("app.v1-x_y"), "c[name=app.v1-x_y]"},
		{path{}.key("c").name("a]b"), `c[name="a]b"]`},
		{path{}.key("c").name(""), `c[name=""]`},
		{path{}.index(2), "[2]"},
		{path{}.key("é"), `["é"]`},
		{path{}.key("x\n"), `["x\n"]`},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v.String() = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestPathHasPrefix(t *testing.T) {
	data := path{}.key("data")
	for _, tc := range []struct {
		p, q path
		want bool
	}{
		{data.key("a"), data, true},
		{data, data, true},
		{data, data.key("a"), false},
		{path{}.key("data2"), data, false},
		{data.index(0), data.name("0"), false},
		{data.name("x").key("v"), data.name("x"), true},
		{data.key("x"), nil, true},
	} {
		if got := tc.p.hasPrefix(tc.q); got != tc.want {
			t.Errorf("%s.hasPrefix(%s) = %v, want %v", tc.p, tc.q, got, tc.want)
		}
	}
}
