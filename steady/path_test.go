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
		if _, got := newPathSet(tc.set, nil).covers(tc.p); got != tc.want {
			t.Errorf("%v.covers(%s) = %v, want %v", tc.set, tc.p, got, tc.want)
		}
	}
	var none pathSet
	if _, ok := none.covers(data); ok {
		t.Errorf("a nil set covers %s", data)
	}

	// A string path gets its template when it is the path covered, not
	// when an ancestor covers it.
	s := newPathSet([]path{data.key("a"), data.key("b")}, map[string][2]string{"data.a": {"x=1 y", "x=2 y"}})
	if tm, ok := s.covers(data.key("a")); !ok || tm == nil {
		t.Errorf("covers(data.a) = %v, %v, want a template", tm, ok)
	}
	if tm, ok := s.covers(data.key("b")); !ok || tm != nil {
		t.Errorf("covers(data.b) = %v, %v, want no template (not strings)", tm, ok)
	}
	if tm, ok := newPathSet([]path{data}, nil).covers(data.key("a")); !ok || tm != nil {
		t.Errorf("covers(data.a) under data = %v, %v, want no template", tm, ok)
	}
}
