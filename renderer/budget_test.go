package renderer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// TestMaxNodesRefused checks that a document that may parse into more
// than MaxNodes nodes is refused before it is parsed, with one line that
// names it and the bound, and that one below the bound is pinned.
func TestMaxNodesRefused(t *testing.T) {
	t.Parallel()
	args := func(n int) string {
		return strings.Replace(pod, "IMAGE", "registry.example/app:1", 1) + "    args: [" + strings.TrimSuffix(strings.Repeat("a,", n), ",") + "]\n"
	}
	in := "---\n# Source: c/templates/p.yaml\n" + args(MaxNodes/2)
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
	if err == nil {
		t.Fatalf("Render() = nil error for %d nodes, want one naming MaxNodes", MaxNodes/2)
	}
	for _, w := range []string{"document 1 (c/templates/p.yaml)", fmt.Sprintf("(MaxNodes %d)", MaxNodes)} {
		if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") || res.Bytes() != nil {
			t.Errorf("Render() error = %q, want one line with %q and no output", err, w)
		}
	}
	// A quarter of a million nodes take half a minute under -race.
	t.Run("below the bound", func(t *testing.T) {
		testfiles.Slow(t)
		ok := args(MaxNodes / 4)
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(ok))
		if err != nil {
			t.Fatalf("Render() = %v for %d nodes", err, MaxNodes/4)
		}
		if !bytes.Contains(res.Bytes(), []byte("@"+dg("registry.example/app:1"))) {
			t.Errorf("Render() did not pin the image")
		}
	})
}
