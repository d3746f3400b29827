package renderer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	syaml "sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// keyError turns an error of stream.Get into a document error: where, then who
// (an object or a container, when known), then what.
func keyError(d *document, err error, who string) error {
	var ke *stream.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	if who == "" {
		return fmt.Errorf("%s: %w", d.At(ke.Line), err)
	}
	return fmt.Errorf("%s: %s: %w", d.At(ke.Line), who, err)
}

// yaml11Reading returns what the API server reads for the plain scalar
// n when it is not the string digestpin reads, and false otherwise. The
// API server reads YAML 1.1 (sigs.k8s.io/yaml), where a plain y, yes, on,
// n, no or off is a boolean; digestpin's parser
// reads YAML 1.2, where they are strings. A scalar with "/", ":" or "@" is
// never one of them, and is not looked at again.
func yaml11Reading(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Style != 0 || strings.ContainsAny(n.Value, "/:@") {
		return "", false
	}
	j, err := syaml.YAMLToJSON([]byte("v: " + n.Value))
	if err != nil {
		return "", false
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return "", false
	}
	switch v := m["v"].(type) {
	case string:
		return "", false
	case bool:
		return fmt.Sprintf("the boolean %t", v), true
	case nil:
		return "null", true
	default:
		return fmt.Sprintf("the number %v", v), true
	}
}
