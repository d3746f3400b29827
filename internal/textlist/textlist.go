// Package textlist writes lists for one-line messages: the first few items
// of a long list, and how many more there are.
package textlist

import (
	"fmt"
	"strings"
)

// Some joins at most n of items with ", " and says how many more there
// are: "a, b, c and 2 more".
func Some(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
