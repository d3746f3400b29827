package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// argocdParametersEnv is where Argo CD gives a Config Management Plugin the
// Application's spec.source.plugin.parameters, as a JSON array.
const argocdParametersEnv = "ARGOCD_APP_PARAMETERS"

// Kinds of plugin parameters, as Argo CD's collectionType names them.
const (
	paramString = "string"
	paramArray  = "array"
	paramMap    = "map"
)

// argocdParameters are the parameters that the Argo CD plugin takes
// (scripts/argocd/plugin.yaml announces them, digestpin argocd generate
// applies them), with their kind. A test checks that they equal the
// announcement.
var argocdParameters = map[string]string{
	"release-name":               paramString,
	"namespace":                  paramString,
	"values-files":               paramArray,
	"values":                     paramString,
	"set":                        paramMap,
	"set-string":                 paramMap,
	"set-file":                   paramMap,
	"set-from-env":               paramMap,
	"ignore-missing-value-files": paramString,
	"skip-crds":                  paramString,
	"skip-tests":                 paramString,
	"skip-schema-validation":     paramString,
	"kube-version":               paramString,
	"api-versions":               paramArray,
}

// argocdSeedRefusal says why an Application cannot choose the seed.
const argocdSeedRefusal = "an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's " +
	"(the Secret digestpin-seed; SECURITY.md: The seed)"

// argocdSeedParameters are parameter names that would choose the seed;
// argocdGate refuses them with argocdSeedRefusal rather than as
// unknown, so that the Application's author learns why.
var argocdSeedParameters = []string{"seed", "seed-file"}

// argocdSeedEnv are the variables of an Application's plugin env (Argo CD
// prefixes each name with ARGOCD_ENV_) that would choose the seed or how
// the sidecar picks it. digestpin argocd generate reads none of them, and
// checkArgocdSeedEnv refuses them, so that no Application believes it
// renders with a seed of its own, nor points the render at a file of the
// sidecar's (another team's seed).
var argocdSeedEnv = []string{"DIGESTPIN_SEED_FILE", "DIGESTPIN_SEED", "DIGESTPIN_CMP_SEED_PER_PROJECT"}

// checkArgocdSeedEnv returns a usage error naming every variable of
// argocdSeedEnv that the Application's plugin env sets (found by lookup
// as ARGOCD_ENV_ + name), even to an empty value; nil when it sets none.
func checkArgocdSeedEnv(lookup func(string) (string, bool)) error {
	var set []string
	for _, name := range argocdSeedEnv {
		if _, ok := lookup("ARGOCD_ENV_" + name); ok {
			set = append(set, name)
		}
	}
	if set == nil {
		return nil
	}
	return &UsageError{fmt.Errorf("plugin env %s: %s", strings.Join(set, ", "), argocdSeedRefusal)}
}

// argocdParameter is one entry of ARGOCD_APP_PARAMETERS. Pointers tell a
// field that is absent from one that is empty.
type argocdParameter struct {
	Name   string             `json:"name"`
	String *string            `json:"string"`
	Array  *[]string          `json:"array"`
	Map    *map[string]string `json:"map"`
}

// argocdValue is one value of a plugin parameter: Key is empty for a
// string, the index for an array item, the key for a map entry.
type argocdValue struct{ Name, Key, Value string }

// readArgocdParameters reads the JSON that lookup finds in
// ARGOCD_APP_PARAMETERS, checks each parameter's name and kind against
// argocdParameters, and returns one argocdValue per value, in the
// parameters' order (maps in key order, as Argo CD's own Helm passes its
// parameters). An unset or empty variable has no values. No value holds a
// NUL character (none can be an argument of a command) and no map has an
// empty key.
func readArgocdParameters(lookup func(string) (string, bool)) ([]argocdValue, error) {
	raw, _ := lookup(argocdParametersEnv)
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var params []argocdParameter
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&params); err != nil {
		return nil, fmt.Errorf("reading %s: %w", argocdParametersEnv, err)
	}
	var out []argocdValue
	seen := map[string]bool{}
	for _, p := range params {
		kind, ok := argocdParameters[p.Name]
		if !ok && slices.Contains(argocdSeedParameters, p.Name) {
			return nil, fmt.Errorf("plugin parameter %q: %s", p.Name, argocdSeedRefusal)
		}
		if !ok {
			return nil, fmt.Errorf("plugin parameter %q: unknown; the digestpin plugin takes %s", p.Name, strings.Join(argocdParameterNames(), ", "))
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("plugin parameter %q: set twice", p.Name)
		}
		seen[p.Name] = true
		if got := p.kinds(); !slices.Equal(got, []string{kind}) {
			return nil, fmt.Errorf("plugin parameter %q: want %s value, have %s", p.Name, withArticle(kind), describeKinds(got))
		}
		values, err := p.values(kind)
		if err != nil {
			return nil, fmt.Errorf("plugin parameter %q: %w", p.Name, err)
		}
		out = append(out, values...)
	}
	return out, nil
}

// values returns p's values of the given kind, which p holds.
func (p argocdParameter) values(kind string) ([]argocdValue, error) {
	var out []argocdValue
	switch kind {
	case paramString:
		out = append(out, argocdValue{p.Name, "", *p.String})
	case paramArray:
		for i, v := range *p.Array {
			out = append(out, argocdValue{p.Name, strconv.Itoa(i), v})
		}
	case paramMap:
		keys := slices.Sorted(maps.Keys(*p.Map))
		for _, k := range keys {
			if k == "" {
				return nil, fmt.Errorf("has an empty key")
			}
			out = append(out, argocdValue{p.Name, k, (*p.Map)[k]})
		}
	}
	for _, v := range out {
		if strings.ContainsRune(v.Key, 0) || strings.ContainsRune(v.Value, 0) {
			return nil, fmt.Errorf("holds a NUL character")
		}
	}
	return out, nil
}

// kinds returns the kinds of value p holds, in argocdParameters' spelling.
func (p argocdParameter) kinds() []string {
	var k []string
	if p.String != nil {
		k = append(k, paramString)
	}
	if p.Array != nil {
		k = append(k, paramArray)
	}
	if p.Map != nil {
		k = append(k, paramMap)
	}
	return k
}

// describeKinds says which values a parameter has, for an error message.
func describeKinds(kinds []string) string {
	if len(kinds) == 0 {
		return "no value"
	}
	return strings.Join(kinds, " and ")
}

// withArticle returns kind with its indefinite article.
func withArticle(kind string) string {
	if kind == paramArray {
		return "an " + kind
	}
	return "a " + kind
}

// argocdParameterNames returns the names of argocdParameters, sorted.
func argocdParameterNames() []string {
	names := make([]string, 0, len(argocdParameters))
	for n := range argocdParameters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
