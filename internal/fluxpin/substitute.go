package fluxpin

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/envsubst"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// DisableSubstitute is the label or annotation (with the value
// "disabled") that keeps kustomize-controller from substituting into an
// object.
const DisableSubstitute = "kustomize.toolkit.fluxcd.io/substitute"

// varName is what kustomize-controller takes as a variable's name.
var varName = regexp.MustCompile(`^[_[:alpha:]][_[:alpha:][:digit:]]*$`)

// PostBuild is a Kustomization's spec.postBuild.
type PostBuild struct {
	// Substitute are the variables of spec.postBuild.substitute.
	Substitute map[string]string
	// From are spec.postBuild.substituteFrom, in order.
	From []SubstituteRef
	// Always is substituteStrategy: Always (substitute with no variable
	// defined, for defaults such as ${VAR:=x}).
	Always bool
}

// SubstituteRef is one entry of spec.postBuild.substituteFrom.
type SubstituteRef struct {
	Kind, Name string
	Optional   bool
}

// PostBuild reads the Kustomization's spec.postBuild; nil when it has
// none, and kustomize-controller substitutes nothing.
func (f *File) PostBuild() (*PostBuild, error) {
	t := f.Target
	v, ok := t.Spec["postBuild"]
	if !ok || v == nil {
		return nil, nil
	}
	at := fmt.Sprintf("%s:%d: %s: spec.postBuild", f.Path, t.Line, t.Describe())
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a mapping", at)
	}
	pb := &PostBuild{Substitute: map[string]string{}}
	switch s := str(m["substituteStrategy"]); s {
	case "", "WithVariables":
	case "Always":
		pb.Always = true
	default:
		return nil, fmt.Errorf("%s.substituteStrategy %q is neither WithVariables nor Always", at, s)
	}
	if sv, ok := m["substitute"]; ok && sv != nil {
		sm, ok := sv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s.substitute is not a mapping", at)
		}
		for k, v := range sm {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s.substitute.%s is not a string: quote it", at, k)
			}
			pb.Substitute[k] = s
		}
	}
	from, _ := m["substituteFrom"].([]any)
	for i, item := range from {
		r, _ := item.(map[string]any)
		ref := SubstituteRef{Kind: str(r["kind"]), Name: str(r["name"])}
		ref.Optional, _ = r["optional"].(bool)
		if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
			return nil, fmt.Errorf("%s.substituteFrom[%d] is a %q: kustomize-controller reads a ConfigMap or a Secret", at, i, ref.Kind)
		}
		pb.From = append(pb.From, ref)
	}
	return pb, nil
}

// Vars are the variables kustomize-controller substitutes: the data of
// each substituteFrom object in order (from is their data, nil for an
// optional one not found), each over the ones before, then
// spec.postBuild.substitute over them all; every value with its newlines
// taken out, as the controller does. A name that is no variable's name
// is an error.
func (pb *PostBuild) Vars(from []map[string]string) (map[string]string, error) {
	vars := map[string]string{}
	for _, data := range from {
		for k, v := range data {
			vars[k] = strings.ReplaceAll(v, "\n", "")
		}
	}
	for k, v := range pb.Substitute {
		vars[k] = strings.ReplaceAll(v, "\n", "")
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !varName.MatchString(k) {
			return nil, fmt.Errorf("the variable %q is no variable name (%s), and kustomize-controller refuses it", k, varName)
		}
	}
	return vars, nil
}

// Substitutes says that kustomize-controller substitutes at all: with a
// variable defined, or the Always strategy.
func (pb *PostBuild) Substitutes(vars map[string]string) bool {
	return pb != nil && (len(vars) > 0 || pb.Always)
}

// Substitute substitutes vars into each object of the built stream as
// kustomize-controller does (its envsubst: ${VAR}, $VAR, ${VAR:=default}
// and the other bash forms), but not into an object labelled or
// annotated DisableSubstitute: disabled. strict makes a variable that
// is not defined, and has no default, an error (the controller's
// StrictPostBuildSubstitutions, on by default since v1.9); else it is
// empty.
func Substitute(stream []byte, vars map[string]string, strict bool) ([]byte, error) {
	nodes, err := kio.FromBytes(stream)
	if err != nil {
		return nil, fmt.Errorf("reading the build output: %w", err)
	}
	lookup := func(s string) (string, bool) {
		v, ok := vars[s]
		return v, ok || !strict
	}
	var out bytes.Buffer
	for i, n := range nodes {
		if i > 0 {
			out.WriteString("---\n")
		}
		text, err := n.String()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", describe(n), err)
		}
		if n.GetLabels()[DisableSubstitute] == "disabled" || n.GetAnnotations()[DisableSubstitute] == "disabled" {
			out.WriteString(text)
			continue
		}
		sub, err := envsubst.Eval(text, lookup)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "variable not set") {
				msg += ": define it in spec.postBuild.substitute or a substituteFrom object, or give it a default (${VAR:=value}); kustomize-controller fails on it too"
			}
			return nil, fmt.Errorf("substituting into %s: %s", describe(n), msg)
		}
		if _, err := yaml.Parse(sub); err != nil {
			return nil, fmt.Errorf("substituting into %s: the result is not YAML: %w", describe(n), err)
		}
		out.WriteString(sub)
	}
	return out.Bytes(), nil
}

// describe is "Kind NAME" of an object of a stream.
func describe(n *yaml.RNode) string {
	return n.GetKind() + " " + n.GetName()
}
