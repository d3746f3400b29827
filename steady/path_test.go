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

func TestPathSetAllows(t *testing.T) {
	// Two renders make the set; a previous and a new output differ in
	// paths the set must allow, every one, for want.
	for _, tc := range []struct {
		desc                  string
		a, b, previous, fresh string
		want                  bool
	}{
		{"a leaf", `{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":4}`, true},
		{"a leaf that is gone", `{"a":1}`, `{"a":2}`, `{"a":3}`, `{}`, false},
		{"a leaf that became a mapping", `{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":{"b":1}}`, false},
		{"another leaf", `{"a":1}`, `{"a":2}`, `{"a":1,"b":1}`, `{"a":1,"b":2}`, false},
		{"a string in its template", `{"a":"x=1 y"}`, `{"a":"x=2 y"}`, `{"a":"x=3 y"}`, `{"a":"x=4 y"}`, true},
		{"a string out of its template", `{"a":"x=1 y"}`, `{"a":"x=2 y"}`, `{"a":"x=3 y"}`, `{"a":"x=4 z"}`, false},
		{"a key that comes and goes", `{"a":{"b":1}}`, `{}`, `{}`, `{"a":{"b":1}}`, true},
		{"a key that comes with another value", `{"a":{"b":1}}`, `{}`, `{}`, `{"a":{"b":2}}`, false},
		{"a field under a key in one render only", `{"a":{"b":1}}`, `{}`, `{"a":{"b":1}}`, `{"a":{"b":2}}`, false},
		{"a field under another shape", `{"d":"none"}`, `{"d":{"v":1}}`, `{"d":{"v":2}}`, `{"d":{"v":3}}`, false},
		{"the shapes of the renders", `{"d":"none"}`, `{"d":{"v":1}}`, `{"d":{"v":1}}`, `{"d":"none"}`, true},
		{"a list of another length", `{"l":[1,2]}`, `{"l":[2]}`, `{"l":[2]}`, `{"l":[1,2]}`, true},
		{"an item of a list of another length", `{"l":[1,2]}`, `{"l":[2]}`, `{"l":[1,3]}`, `{"l":[1,4]}`, false},
		{"items that shift", `{"l":["k1=1","u=2"]}`, `{"l":["u=2","k2=1"]}`, `{"l":["k3=1","u=2"]}`, `{"l":["u=3","k4=1"]}`, false},
		{"items in place", `{"l":["k1","u"]}`, `{"l":["k2","u"]}`, `{"l":["k3","u"]}`, `{"l":["k4","u"]}`, true},
		{"the root", `[1]`, `{}`, `{}`, `[1]`, true},
		{"under the root", `[1]`, `{}`, `{"a":1}`, `{"a":2}`, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			set := differs(t, tc.a, tc.b)
			s := newPathSet(set)
			d := differs(t, tc.previous, tc.fresh)
			got := true
			for _, p := range d.paths {
				if _, ok := s.allows(p, d); !ok {
					got = false
				}
			}
			if got != tc.want || len(d.paths) == 0 {
				t.Errorf("%v allows %v: %v, want %v", set.paths, d.paths, got, tc.want)
			}
		})
	}
	var none pathSet
	d := differs(t, `{"a":1}`, `{"a":2}`)
	if _, ok := none.allows(d.paths[0], d); ok {
		t.Errorf("a nil set allows %s", d.paths[0])
	}
}

// differs returns the differ of two JSON values.
func differs(t *testing.T, a, b string) *differ {
	t.Helper()
	x, err := decode([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	y, err := decode([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	d := newDiffer()
	d.diff(nil, x, y)
	return d
}
