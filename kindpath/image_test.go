package kindpath

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Image
		err  string
	}{
		{in: "argoproj.io/Workflow=spec.templates.*.container.image", want: Image{Group: "argoproj.io", Kind: "Workflow", Fields: []string{"spec", "templates", "*", "container", "image"}}},
		{in: "Runner=spec.runnerImage", want: Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "runnerImage"}}},
		{in: "/Pod=spec.x", want: Image{Group: "", Kind: "Pod", Fields: []string{"spec", "x"}}},
		{in: "v1/Pod=spec.x", err: `parsing image path "v1/Pod=spec.x": "v1" is an API version, not a group: write Pod=… for the kind in any group, or /Pod=… for the core group`},
		{in: "v2beta1/Runner=spec.x", err: `"v2beta1" is an API version, not a group`},
		{in: "Runner=spec.images.*", err: `parsing image path "Runner=spec.images.*": the last field must name the image field, not "*"`},
		{in: "Runner", err: `parsing image path "Runner": want KIND=FIELD.PATH or GROUP/KIND=FIELD.PATH`},
		{in: "=spec.image", err: `want KIND=FIELD.PATH`},
		{in: "a/b/C=spec.image", err: `parsing image path "a/b/C=spec.image": bad kind "a/b/C"`},
		{in: "Runner=spec..image", err: `parsing image path "Runner=spec..image": empty field in "spec..image"`},
		// Selectors.
		{in: "Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE].value", want: Image{Group: "*", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "env[name=AGENT_IMAGE]", "value"}}},
		{in: "apps/Deployment=spec.template.spec.containers[name=manager].args[flag=--prometheus-config-reloader]", want: Image{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers[name=manager]", "args[flag=--prometheus-config-reloader]"}}},
		{in: "Runner=spec.env[name=a.b.c].value", want: Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "env[name=a.b.c]", "value"}}},
		{in: "Runner=spec.command[flag=-image]", want: Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "command[flag=-image]"}}},
		{in: "Runner=spec.env[name=X]", err: `parsing image path "Runner=spec.env[name=X]": the last field must name the image field, not "env[name=X]"`},
		{in: "Runner=spec.args[flag=--x].value", err: `parsing image path "Runner=spec.args[flag=--x].value": args[flag=--x] selects a flag's value, which only an image path may end in`},
		{in: "Runner=spec.env[name=X.value", err: `malformed selector "env[name=X.value": want FIELD[KEY=VALUE]`},
		{in: "Runner=spec.env[name].value", err: `malformed selector "env[name]"`},
		{in: "Runner=spec.env[name=X]x.value", err: `malformed selector "env[name=X]x"`},
		{in: "Runner=spec.env[[name=X]].value", err: `malformed selector "env[[name=X]]"`},
		{in: "Runner=spec.[name=X].value", err: `malformed selector "[name=X]"`},
		{in: "Runner=spec.*[name=X].value", err: `malformed selector "*[name=X]": "*" is not a field name`},
		{in: "Runner=spec.env[=X].value", err: `malformed selector "env[=X]": "" is not a key`},
		{in: "Runner=spec.env[a.b=X].value", err: `malformed selector "env[a.b=X]": "a.b" is not a key`},
		{in: "Runner=spec.env[name=].value", err: `malformed selector "env[name=]": empty value`},
		{in: "Runner=spec.args[flag=image]", err: `the flag "image" of args[flag=image] matches no argument: a flag starts with "-" (args[flag=--image])`},
		{in: "Runner=spec.args[flag=--]", err: `the flag "--" of args[flag=--] matches no argument: want -NAME or --NAME`},
		{in: "Runner=spec.args[flag=---x]", err: `matches no argument: want -NAME or --NAME`},
		{in: "Runner=spec.args[flag=--x=y]", err: `the flag "--x=y" of args[flag=--x=y] matches no argument: a flag name holds no "=" or blank`},
		{in: "Runner=spec.args[flag=--x y]", err: `matches no argument: a flag name holds no "=" or blank`},
		{in: "Runner=spec]", err: `malformed selector "spec]"`},
		// Escapes, and image fields inside a string's document.
		{in: `ConfigMap=data.policy\.yaml`, want: Image{Group: "*", Kind: "ConfigMap", Fields: []string{"data", "policy.yaml"}}},
		{in: `ConfigMap=data.a\|b\\c`, want: Image{Group: "*", Kind: "ConfigMap", Fields: []string{"data", `a|b\c`}}},
		{in: `/ConfigMap=data.policy\.yaml|spec.image`, want: Image{Group: "", Kind: "ConfigMap", Fields: []string{"data", "policy.yaml"}, Embedded: []string{"spec", "image"}}},
		{in: `argoproj.io/WorkflowTemplate=spec.templates.*.resource.manifest|spec.containers[name=c].image`, want: Image{Group: "argoproj.io", Kind: "WorkflowTemplate", Fields: []string{"spec", "templates", "*", "resource", "manifest"}, Embedded: []string{"spec", "containers[name=c]", "image"}}},
		{in: `Runner=spec.env[name=a|b].value`, want: Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "env[name=a|b]", "value"}}},
		{in: `ConfigMap=data.x|spec.*.image`, want: Image{Group: "*", Kind: "ConfigMap", Fields: []string{"data", "x"}, Embedded: []string{"spec", "*", "image"}}},
		{in: "ConfigMap=data.x|", err: `want a path after "|"`},
		{in: "ConfigMap=data.x|spec..image", err: `empty field in "spec..image"`},
		{in: "ConfigMap=data.x|spec.images.*", err: `the last field after "|" must name the image field, not "*"`},
		{in: "ConfigMap=data.x|spec.env[name=X]", err: `the last field after "|" must name the image field, not "env[name=X]"`},
		{in: "ConfigMap=data.x|spec.args[flag=--image]", err: `args[flag=--image] selects a flag's value, which a path inside a string may not`},
		{in: "ConfigMap=data.args[flag=--image]|spec.image", err: `the last field must name the string that holds a document, not "args[flag=--image]"`},
		{in: "ConfigMap=data.*|spec.image", err: `the last field must name the string that holds a document, not "*"`},
		{in: "ConfigMap=data.x|a|b", err: `one "|" at most`},
		{in: `ConfigMap=data.x|a\|b`, want: Image{Group: "*", Kind: "ConfigMap", Fields: []string{"data", "x"}, Embedded: []string{"a|b"}}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseImage(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseImage(%q) = %v, %v, want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseImage(%q) = %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseImage(%q) (-want +got):\n%s", tc.in, diff)
			}
			if got.String() != tc.in {
				t.Errorf("ParseImage(%q).String() = %q", tc.in, got.String())
			}
		})
	}
}
