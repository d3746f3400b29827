package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// The commands that README.md and docs/*.md show run in TestDocsCommands.
// Every ```sh block (or bash, shell, console) carries a marker, an HTML
// comment on the line before its fence, which GitHub does not show:
//
//	<!-- test: run [helm=3|4] [plugin] -->   run it; helm is Helm 4 unless helm=3;
//	                                          plugin: that Helm's digestpin plugin
//	                                          is installed first
//	<!-- test: skip REASON -->               not run, and why (a cluster, the
//	                                          internet); docsNotRun counts them
//	<!-- test: file NAME -->                 (on any block) written to NAME in
//	                                          the workspace, for the blocks after it
//	<!-- test: flux NAME -->                 run by the Flux suite (e2e/flux), in
//	                                          its scenario NAME, against Flux's
//	                                          controllers; it fails when a block
//	                                          so marked is not one it runs
//
// The blocks of one file run in order, in one workspace of their own, as a
// reader would run them one after the other: its folder is the working
// folder and HOME, ./chart is testdata/chart with images on
// registry.example, and registry.example is an in-process registry on
// loopback, reached through DIGESTPIN_REGISTRY_MIRROR and
// DIGESTPIN_MIRROR_ONLY (as `make demo` does), so that the output keeps the
// name the docs show. digestpin and helm on PATH are the ones under test,
// beside the CI steps of scripts/ci (as a release archive holds them).

// docsNotRun is how many blocks the docs mark as not run. A change is
// deliberate: TestDocsCommands fails until this says the new number.
const docsNotRun = 13

// docsFiles are the Markdown files whose commands and links are tested.
func docsFiles(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// docBlock is a fenced block of a Markdown file.
type docBlock struct {
	file   string // relative to the repository's root
	line   int    // of the opening fence
	lang   string // the info string's first word
	marker string // the test marker's text, "" when there is none
	text   string // the block, without the indentation of its fence
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	fenceLine  = regexp.MustCompile("^( *)(```+)\\s*([^`\\s]*)")
	markerLine = regexp.MustCompile(`^\s*<!-- test: (.*?) -->\s*$`)
)

// docBlocks returns the fenced blocks of the Markdown file at path.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(repoRoot(t), path)
	lines := strings.Split(string(b), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		m := fenceLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		blk := docBlock{file: rel, line: i + 1, lang: m[3]}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				continue
			}
			if mm := markerLine.FindStringSubmatch(lines[j]); mm != nil {
				blk.marker = mm[1]
			}
			break
		}
		indent, fence := m[1], m[2]
		var body strings.Builder
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == fence {
				break
			}
			body.WriteString(strings.TrimPrefix(lines[i], indent) + "\n")
		}
		blk.text = body.String()
		blocks = append(blocks, blk)
	}
	return blocks
}

// isCommands says whether a block's language is one of shell commands.
func isCommands(lang string) bool {
	return slices.Contains([]string{"sh", "bash", "shell", "console"}, lang)
}

// docsWorkspace is where the blocks of one file run.
type docsWorkspace struct {
	dir    string
	env    []string          // for every block
	path   map[string]string // helm major → PATH folder
	bin    string
	helm   map[string]string // major → the Helm CLI
	plugin map[string]bool   // major → its plugin is installed
}

// newDocsWorkspace makes the workspace of one file: the chart, the
// registry with its images, Helm homes, PATH folders.
func newDocsWorkspace(t *testing.T) *docsWorkspace {
	t.Helper()
	bin, h3, h4 := digestpinBin(t), helm3(t), helm4(t)
	dir := t.TempDir()
	reg := testregistry.New(t)
	for _, img := range []string{"shop/web:1.4", "shop/web:dev", "shop/web:staging", "shop/db:16", "shop/tools:1.0", "shop/api:1.0"} {
		reg.PushImage(t, img)
	}
	chart := filepath.Join(dir, "chart")
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(repoRoot(t), "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	values := "image:\n  app: registry.example/shop/web:1.4\n  db: registry.example/shop/db:16\n  tools: registry.example/shop/tools:1.0\n"
	for _, f := range []string{"chart/values.yaml", "chart/values-prod.yaml", "values.yaml", "values-prod.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(values), 0o644); err != nil { //nolint:gosec // a chart's file
			t.Fatal(err)
		}
	}
	// PATH holds what a release archive holds (the binary and the CI
	// steps), the Helm CLI and kustomize (which digestpin flux pin runs).
	kustomize := kustomizeBin(t)
	onPath := func(helm string) map[string]string {
		ci := filepath.Join(repoRoot(t), "scripts", "ci")
		return map[string]string{"digestpin": bin, "helm": helm, "kustomize": kustomize,
			"digestpin-lock.sh": filepath.Join(ci, "digestpin-lock.sh"), "digestpin-ci.sh": filepath.Join(ci, "digestpin-ci.sh")}
	}
	w := &docsWorkspace{dir: dir, bin: bin, helm: map[string]string{"3": h3, "4": h4}, plugin: map[string]bool{}, path: map[string]string{
		"3": pathDir(t, onPath(h3)),
		"4": pathDir(t, onPath(h4)),
	}}
	w.env = []string{
		"HOME=" + dir,
		"XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"),
		"DOCKER_CONFIG=" + filepath.Join(dir, ".docker"),
		"DIGESTPIN_REGISTRY_MIRROR=registry.example=" + reg.Host(),
		"DIGESTPIN_MIRROR_ONLY=true",
		"DIGESTPIN_PLUGIN_URL=http://127.0.0.1:1/no-release",
	}
	return w
}

// helmEnv is the environment for Helm major: Helm 3 and Helm 4 get data
// homes of their own, as docs/install.md says to do.
func (w *docsWorkspace) helmEnv(major string) []string {
	home := filepath.Join(w.dir, ".helm"+major)
	return []string{
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"HELM_PLUGINS=" + filepath.Join(home, "data", "plugins"),
		"PATH=" + w.path[major] + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
}

// installPlugin installs the plugins of Helm major (the root plugin.yaml,
// and for Helm 4 the post-renderer plugin too) from a copy of the
// checkout, with the binary under test, once.
func (w *docsWorkspace) installPlugin(t *testing.T, major string) {
	t.Helper()
	if w.plugin[major] {
		return
	}
	src := checkout(t, w.bin)
	env := append(w.helmEnv(major), "DIGESTPIN_PLUGIN_BINARY="+w.bin)
	mustRun(t, append(w.env, env...), w.helm[major], "plugin", "install", src)
	if major == "4" {
		mustRun(t, append(w.env, env...), w.helm[major], "plugin", "install", filepath.Join(src, h4PluginDir))
	}
	w.plugin[major] = true
}

// marker is a parsed test marker.
type marker struct {
	run    bool
	file   string // the workspace file the block is written to
	reason string // of a skip
	flux   string // the e2e/flux scenario that runs it
	helm   string // "3" or "4"
	plugin bool
}

func parseMarker(text string) (marker, error) {
	verb, rest, _ := strings.Cut(text, " ")
	switch verb {
	case "file":
		if !filepath.IsLocal(rest) {
			return marker{}, fmt.Errorf("file %q: want a path inside the workspace", rest)
		}
		return marker{file: rest}, nil
	case "flux":
		if len(strings.Fields(rest)) != 1 {
			return marker{}, fmt.Errorf("flux %q: want the name of one e2e/flux scenario", rest)
		}
		return marker{flux: rest}, nil
	case "skip":
		if strings.TrimSpace(rest) == "" {
			return marker{}, fmt.Errorf("skip without a reason")
		}
		return marker{reason: rest}, nil
	case "run":
		m := marker{run: true, helm: "4"}
		for _, opt := range strings.Fields(rest) {
			switch opt {
			case "helm=3", "helm=4":
				m.helm = strings.TrimPrefix(opt, "helm=")
			case "plugin":
				m.plugin = true
			default:
				return marker{}, fmt.Errorf("unknown option %q (want helm=3, helm=4, plugin)", opt)
			}
		}
		return m, nil
	}
	return marker{}, fmt.Errorf("want run, skip, flux or file, not %q", verb)
}

// TestDocsCommands runs every command block of README.md and docs/*.md as
// shown, against the real binary and Helm CLIs and a loopback registry; a
// block that fails fails the test with its file and line. Blocks marked
// skip are listed and counted.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	var notRun, elsewhere []string
	for _, path := range docsFiles(t) {
		var runs []docBlock
		for _, b := range docBlocks(t, path) {
			if b.marker == "" {
				if isCommands(b.lang) {
					t.Errorf("%s: a %s block without a test marker: precede it with <!-- test: run --> or <!-- test: skip REASON -->", b, b.lang)
				}
				continue
			}
			m, err := parseMarker(b.marker)
			if err != nil {
				t.Errorf("%s: test marker %q: %v", b, b.marker, err)
				continue
			}
			if isCommands(b.lang) == (m.file != "") {
				t.Errorf("%s: test marker %q on a %s block: run and skip are for commands, file for the rest", b, b.marker, b.lang)
				continue
			}
			if m.file != "" {
				runs = append(runs, b)
				continue
			}
			if m.flux != "" {
				elsewhere = append(elsewhere, fmt.Sprintf("%s: e2e/flux, scenario %s", b, m.flux))
				continue
			}
			if !m.run {
				notRun = append(notRun, fmt.Sprintf("%s: %s", b, m.reason))
				continue
			}
			runs = append(runs, b)
		}
		if len(runs) == 0 {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			w := newDocsWorkspace(t)
			for _, b := range runs {
				m, _ := parseMarker(b.marker)
				if m.file != "" {
					p := filepath.Join(w.dir, m.file)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil { //nolint:gosec // the workspace
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(b.text), 0o644); err != nil { //nolint:gosec // the workspace
						t.Fatal(err)
					}
					continue
				}
				if m.plugin {
					w.installPlugin(t, m.helm)
				}
				res := w.run(t, b.text, m.helm)
				if res.err != nil {
					t.Fatalf("%s: the block fails: %v\n%s\nstdout:\n%s\nstderr:\n%s", b, res.err, b.text, res.stdout, res.stderr)
				}
			}
		})
	}
	for _, n := range elsewhere {
		t.Logf("run by another suite: %s", n)
	}
	for _, n := range notRun {
		t.Logf("not run: %s", n)
	}
	if len(notRun) != docsNotRun {
		t.Errorf("%d command blocks are marked not run, docsNotRun says %d: run them, or change docsNotRun deliberately", len(notRun), docsNotRun)
	}
}

// run runs a block's text with bash (errexit, pipefail) in the workspace,
// without a controlling terminal, as in CI.
func (w *docsWorkspace) run(t *testing.T, text, major string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "errexit", "-o", "nounset", "-o", "pipefail", "-c", text)
	cmd.Dir = w.dir
	cmd.Env = cleanEnv(append(w.env, w.helmEnv(major)...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

// TestQuickStartIsCI checks that the test command of the README's
// contributor block is the one .ci/run runs, on an empty tools cache.
func TestQuickStartIsCI(t *testing.T) {
	t.Parallel()
	var cmds []string
	for _, b := range docBlocks(t, filepath.Join(repoRoot(t), "README.md")) {
		for l := range strings.SplitSeq(b.text, "\n") {
			if c, _, _ := strings.Cut(l, "#"); strings.HasPrefix(c, "make test") {
				cmds = append(cmds, strings.TrimSpace(c))
			}
		}
	}
	if len(cmds) != 1 {
		t.Fatalf("README.md shows %d make test commands (%q), want 1", len(cmds), cmds)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	// .ci/run may time a step: "step make test" runs "make test".
	runs := func(l string) bool { return strings.TrimPrefix(l, "step ") == cmds[0] }
	lines := strings.Split(string(ci), "\n")
	if !slices.ContainsFunc(lines, runs) {
		t.Errorf(".ci/run does not run %q, the README's test command:\n%s", cmds[0], ci)
	}
	// And it runs it as a fresh machine would: from an empty tools cache
	// (XDG_CACHE_HOME made anew), with Go's caches kept warm.
	fresh := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "XDG_CACHE_HOME=$(mktemp -d ") })
	first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "step make ") })
	if fresh < 0 || fresh > first || !strings.Contains(string(ci), "export GOCACHE GOMODCACHE GOLANGCI_LINT_CACHE XDG_CACHE_HOME") {
		t.Errorf(".ci/run does not start its make steps from an empty tools cache with Go's caches kept:\n%s", ci)
	}
}

// TestDocsLinks checks that every relative link of README.md, docs/*.md,
// SECURITY.md and CHANGELOG.md leads to a file that exists and, with a
// #fragment into a Markdown file, to one of its headings.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	files := append(docsFiles(t), filepath.Join(root, "SECURITY.md"), filepath.Join(root, "CHANGELOG.md"))
	link := regexp.MustCompile(`\]\(([^()\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")
	anchors := map[string][]string{}
	n := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, l := range proseLines(t, file) {
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(l.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				p, frag, hash := strings.Cut(target, "#")
				if hash && frag == "" {
					t.Errorf("%s:%d: link %s: an empty #fragment", rel, l.n, target)
					continue
				}
				to := file
				if p != "" {
					to = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
					if _, err := os.Stat(to); err != nil {
						t.Errorf("%s:%d: link %s: %v", rel, l.n, target, err)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(to, ".md") {
					continue
				}
				if _, ok := anchors[to]; !ok {
					anchors[to] = headingAnchors(t, to)
				}
				if !slices.Contains(anchors[to], frag) {
					t.Errorf("%s:%d: link %s: no heading #%s in %s", rel, l.n, target, frag, filepath.Base(to))
				}
			}
		}
	}
	if n < 50 {
		t.Errorf("found %d relative links, want the docs' many: not a real search", n)
	}
}

// numbered is a line of a file and its number.
type numbered struct {
	n    int
	text string
}

// proseLines returns the lines of a Markdown file outside fenced blocks.
func proseLines(t *testing.T, path string) []numbered {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []numbered
	fence := ""
	for i, l := range strings.Split(string(b), "\n") {
		if m := fenceLine.FindStringSubmatch(l); m != nil && (fence == "" || strings.TrimSpace(l) == fence) {
			if fence == "" {
				fence = m[2]
			} else {
				fence = ""
			}
			continue
		}
		if fence == "" {
			out = append(out, numbered{i + 1, l})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, punctuation dropped, spaces as hyphens, a
// repeated one numbered.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	links := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	seen := map[string]int{}
	var out []string
	for _, l := range proseLines(t, path) {
		if !strings.HasPrefix(l.text, "#") {
			continue
		}
		_, text, ok := strings.Cut(l.text, " ")
		if !ok || strings.Trim(strings.Fields(l.text)[0], "#") != "" {
			continue
		}
		text = strings.ReplaceAll(links.ReplaceAllString(text, "$1"), "`", "")
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
				a.WriteRune(r)
			}
		}
		s := a.String()
		if k := seen[s]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, k))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}
