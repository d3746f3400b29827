//go:build linux

package flux

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// The names docs/flux.md's setups use for what the tests serve on
// loopback, replaced by the tests' own.
const (
	docsGitURL   = "https://git.example/shop/fleet.git"
	docsRegistry = "registry.example"
)

// fluxScenarios are the scenarios that run docs/flux.md's command blocks
// marked <!-- test: flux NAME --> (e2e/docs_test.go leaves them to this
// suite).
var fluxScenarios = []string{"OCIArtifact", "OCIArtifactKeyless"}

// fluxMarker is the marker of such a block.
var fluxMarker = regexp.MustCompile(`^\s*<!-- test: flux (\S+) -->\s*$`)

// fileMarker is the docs' marker of a block written to a file
// (e2e/docs_test.go reads the same markers).
var fileMarker = regexp.MustCompile(`^\s*<!-- test: file (\S+) -->\s*$`)

// docsFile returns the block of docs/flux.md marked as the file name,
// with the docs' git URL and registry replaced by gitURL and registry.
func docsFile(t *testing.T, name, gitURL, registry string) []byte {
	t.Helper()
	b := docsBlock(t, fileMarker, name)
	return []byte(strings.NewReplacer(docsGitURL, gitURL, docsRegistry, registry).Replace(b))
}

// docsCommands returns the command block of docs/flux.md that the
// scenario name runs.
func docsCommands(t *testing.T, name string) string {
	t.Helper()
	return docsBlock(t, fluxMarker, name)
}

// docsBlock returns the fenced block of docs/flux.md after the marker
// that marker matches with the name name.
func docsBlock(t *testing.T, marker *regexp.Regexp, name string) string {
	t.Helper()
	lines := strings.Split(string(testfiles.Read(t, filepath.Join(repoRoot(), "docs", "flux.md"))), "\n")
	for i, l := range lines {
		m := marker.FindStringSubmatch(l)
		if m == nil || m[1] != name {
			continue
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) == ""; i++ {
		}
		if i == len(lines) || !strings.HasPrefix(lines[i], "```") {
			t.Fatalf("docs/flux.md: the marker of %s is not followed by a fenced block", name)
		}
		var b strings.Builder
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			fmt.Fprintln(&b, lines[i])
		}
		return b.String()
	}
	t.Fatalf("docs/flux.md: no block after a marker %s naming %s", marker, name)
	return ""
}

// TestDocsFluxMarkers checks that every block docs/flux.md leaves to this
// suite is one a scenario runs: a marker naming no scenario would be a
// command no test runs.
func TestDocsFluxMarkers(t *testing.T) {
	for i, l := range strings.Split(string(testfiles.Read(t, filepath.Join(repoRoot(), "docs", "flux.md"))), "\n") {
		if m := fluxMarker.FindStringSubmatch(l); m != nil && !slices.Contains(fluxScenarios, m[1]) {
			t.Errorf("docs/flux.md:%d: <!-- test: flux %s --> names no scenario of TestFlux (%v)", i+1, m[1], fluxScenarios)
		}
	}
}

// TestDocsFluxVersions checks that docs/flux.md names the versions of the
// controllers the suite runs, as tools/go.mod requires them.
func TestDocsFluxVersions(t *testing.T) {
	doc := string(testfiles.Read(t, filepath.Join(repoRoot(), "docs", "flux.md")))
	for _, ctl := range controllers {
		if v := toolModule(t, ctl.module).Version; !strings.Contains(doc, ctl.name+" "+v) {
			t.Errorf("docs/flux.md does not name %s %s, the version e2e/flux/tools requires", ctl.name, v)
		}
	}
	for _, tl := range sigstoreTools {
		if v := moduleIn(t, "sigstore", tl.module).Version; !strings.Contains(doc, tl.name+" "+v) {
			t.Errorf("docs/flux.md does not name %s %s, the version e2e/flux/sigstore requires", tl.name, v)
		}
	}
}
