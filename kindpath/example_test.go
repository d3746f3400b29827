package kindpath_test

import (
	"fmt"

	"github.com/digestpin/digestpin/kindpath"
)

// A path as --image-path and the configuration file take it, parsed and
// formatted back, and the objects it applies to.
func ExampleParseImage() {
	p, err := kindpath.ParseImage("example.com/Runner=spec.containers[name=main].env[name=TOOL_IMAGE].value")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Group, p.Kind, len(p.Fields))
	fmt.Println(p)
	fmt.Println(p.Matches("example.com", "Runner"), p.Matches("other.example", "Runner"))
	sel, _ := kindpath.ParseSelector(p.Fields[len(p.Fields)-2])
	fmt.Printf("%s[%s=%s]\n", sel.Field, sel.Key, sel.Value)

	_, err = kindpath.ParseImage("v1/Pod=spec.image")
	fmt.Println(err)
	// Output:
	// example.com Runner 4
	// example.com/Runner=spec.containers[name=main].env[name=TOOL_IMAGE].value
	// true false
	// env[name=TOOL_IMAGE]
	// parsing image path "v1/Pod=spec.image": "v1" is an API version, not a group: write Pod=… for the kind in any group, or /Pod=… for the core group
}
