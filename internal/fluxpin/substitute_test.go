package fluxpin

import (
	"reflect"
	"strings"
	"testing"
)

// substituteIn is a stream of three objects: one that uses variables,
// one that turns substitution off by annotation, one by label.
const substituteIn = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  template:
    spec:
      containers:
        - name: app
          image: reg.example/app:${TAG}
          env:
            - {name: MODE, value: "${MODE:=fast}"}
            - {name: LOUD, value: "${NAME^^}"}
            - {name: ESCAPED, value: "$${TAG}"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: raw
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  script: echo ${UNDEFINED}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: raw-label
  labels:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  script: echo ${UNDEFINED}
`

// TestSubstitute: kustomize-controller's substitution, object by object:
// defaults, bash forms, $$ kept as $, objects that turn it off, and a
// variable that is not defined, an error in strict mode (the
// controller's default) and empty otherwise.
func TestSubstitute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     string
		vars   map[string]string
		strict bool
		want   []string // lines of the output
		err    string
	}{
		{name: "defined", in: substituteIn, vars: map[string]string{"TAG": "1.0", "NAME": "web"}, strict: true,
			want: []string{"image: reg.example/app:1.0", `value: "fast"`, `value: "WEB"`, `value: "${TAG}"`, "script: echo ${UNDEFINED}"}},
		{name: "default overridden", in: substituteIn, vars: map[string]string{"TAG": "1.0", "NAME": "web", "MODE": "slow"}, strict: true,
			want: []string{`value: "slow"`}},
		{name: "not defined, strict", in: substituteIn, vars: map[string]string{"NAME": "web"}, strict: true,
			err: `substituting into Deployment app: variable not set (strict mode): "TAG": define it in spec.postBuild.substitute or a substituteFrom object, or give it a default (${VAR:=value}); kustomize-controller fails on it too`},
		{name: "not defined, not strict", in: strings.Replace(substituteIn, "app:${TAG}", "app:1${TAG}", 1), vars: map[string]string{"NAME": "web"},
			want: []string{"image: reg.example/app:1\n", `value: "fast"`}},
		{name: "not YAML after", in: substituteIn + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  a: ${V}\n", vars: map[string]string{"V": "{", "TAG": "1", "NAME": "n"},
			err: "substituting into ConfigMap c: the result is not YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := Substitute([]byte(tc.in), tc.vars, tc.strict)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Errorf("error %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			if n := strings.Count(string(out), "echo ${UNDEFINED}"); n != 2 {
				t.Errorf("the disabled objects changed:\n%s", out)
			}
		})
	}
}

// TestPostBuildVars: substituteFrom's objects in order, each over the
// ones before, substitute over them all, newlines taken out; a name
// that is no variable's is refused, as the controller refuses it.
func TestPostBuildVars(t *testing.T) {
	t.Parallel()
	f := parseTarget(t, "ks.yaml", `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
spec:
  postBuild:
    substitute:
      TAG: "2.0"
    substituteFrom:
      - kind: ConfigMap
        name: first
      - kind: Secret
        name: second
        optional: true
`)
	pb, err := f.PostBuild()
	if err != nil {
		t.Fatal(err)
	}
	if want := []SubstituteRef{{Kind: "ConfigMap", Name: "first"}, {Kind: "Secret", Name: "second", Optional: true}}; !reflect.DeepEqual(pb.From, want) || pb.Always {
		t.Errorf("from %+v, always %v", pb.From, pb.Always)
	}
	vars, err := pb.Vars([]map[string]string{{"TAG": "1.0", "A": "a", "B": "b\n"}, {"A": "second"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"TAG": "2.0", "A": "second", "B": "b"}; !reflect.DeepEqual(vars, want) {
		t.Errorf("vars %v, want %v", vars, want)
	}
	if !pb.Substitutes(vars) || pb.Substitutes(nil) != false {
		t.Errorf("Substitutes")
	}
	if (&PostBuild{Always: true}).Substitutes(nil) != true || (*PostBuild)(nil).Substitutes(vars) {
		t.Errorf("Substitutes with Always, or without postBuild")
	}
	if _, err := pb.Vars([]map[string]string{{"my-var": "x"}}); err == nil || !strings.Contains(err.Error(), `the variable "my-var" is no variable name`) {
		t.Errorf("error %v", err)
	}
	none := parseTarget(t, "ks.yaml", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: shop\nspec:\n  path: ./x\n")
	if pb, err := none.PostBuild(); pb != nil || err != nil {
		t.Errorf("no postBuild: %v, %v", pb, err)
	}
	for _, tc := range []struct{ spec, err string }{
		{"  postBuild:\n    substituteStrategy: Sometimes\n", `spec.postBuild.substituteStrategy "Sometimes" is neither WithVariables nor Always`},
		{"  postBuild:\n    substituteFrom: [{kind: Bucket, name: b}]\n", `spec.postBuild.substituteFrom[0] is a "Bucket": kustomize-controller reads a ConfigMap or a Secret`},
		{"  postBuild:\n    substitute: {N: 1}\n", "spec.postBuild.substitute.N is not a string: quote it"},
	} {
		f := parseTarget(t, "ks.yaml", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: shop\nspec:\n"+tc.spec)
		if _, err := f.PostBuild(); err == nil || err.Error() != "ks.yaml:1: Kustomization shop: "+tc.err {
			t.Errorf("error %v\nwant %s", err, tc.err)
		}
	}
}
