package steady

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// registry is a fake registry state: every reference resolves to a digest
// made from its name and, for the references in moved, a new salt.
type registry struct {
	moved map[string]string // reference name → salt
}

func (r registry) resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	sum := sha256.Sum256([]byte(ref.Name() + r.moved[ref.Name()]))
	return resolution.Resolution{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Source: resolution.Registry}, nil
}

// pinned renders in as digestpin does, against the registry state r.
func pinned(t testing.TB, in []byte, r registry) []byte {
	t.Helper()
	rr := renderer.Renderer{Resolver: resolution.Func(r.resolve)}
	res, err := rr.Render(context.Background(), in)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return res.Output
}

// read returns the contents of testdata/name.
func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
