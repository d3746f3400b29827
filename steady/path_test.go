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

func TestPathSetCovers(t *testing.T) {
	data := path{}.key("data")
	for _, tc := range []struct {
		set  []path
		p    path
		want bool
	}{
		{[]path{data}, data.key("a"), true},
		{[]path{data}, data, true},
		{[]path{data.key("a")}, data, false},
		{[]path{data}, path{}.key("data2"), false},
		{[]path{data.name("0")}, data.index(0), false},
		{[]path{data.name("x")}, data.name("x").key("v"), true},
		{[]path{data.key("a.b")}, data.key("a").key("b"), false},
		{[]path{nil}, data.key("x"), true},
		{nil, data.key("x"), false},
	} {
		if got := newPathSet(tc.set).covers(tc.p); got != tc.want {
			t.Errorf("%v.covers(%s) = %v, want %v", tc.set, tc.p, got, tc.want)
		}
	}
	var none pathSet
	if none.covers(data) {
		t.Errorf("a nil set covers %s", data)
	}
}
