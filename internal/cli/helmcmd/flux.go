package helmcmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	helmcli "helm.sh/helm/v4/pkg/cli"
	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/helmaction"
	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/internal/fluxpin"
	"github.com/digestpin/digestpin/pin"
)

// FluxUsage is the help of digestpin flux pin, before its flags.
const FluxUsage = `Usage: digestpin flux pin [flags] FILE...

Writes the digest of every image a Flux HelmRelease or Kustomization runs
into the FILE itself, where Flux applies it: for a HelmRelease
(helm.toolkit.fluxcd.io), the images of a kustomize post-renderer
(spec.postRenderers[].kustomize.images); for a Kustomization
(kustomize.toolkit.fluxcd.io), spec.images. Each entry keeps the tag as the
manifests write it (newTag) and adds its digest; helm-controller and
kustomize-controller then run exactly that digest, with Helm's hooks and
rollback intact. Commit the files (CI: after a push of the tags).

A HelmRelease's chart is rendered with Helm 4's engine and its spec.values
(and valuesFrom ConfigMaps and Secrets found beside it), over the chart's
valuesFiles: a chart folder of the repository (sourceRef GitRepository or
Bucket, its path under --repo-root), or the chart of a HelmRepository or
OCIRepository whose object is in FILE or a file beside it (or whose URL
--chart-repo gives); spec.chartRef may name a HelmChart found so too.
A Kustomization's spec.path (under --repo-root) is built with kustomize as
kustomize-controller builds it: its patches, components, targetNamespace,
namePrefix, nameSuffix and hand-written images merged into the folder's
kustomization, then spec.postBuild's variables substituted (substituteFrom
ConfigMaps and Secrets found as valuesFrom's are). A HelmRelease's kustomize
post-renderers apply in order, as helm-controller applies them. digestpin
then builds what runs with its entries, and writes nothing if an image
would not run at the digest it resolved.

Only the entries digestpin writes change, each marked "# digestpin" on its
name; every other byte of the file stays. Hand-written entries are kept
and listed; one for an image the release runs is an error. Any error
writes no file. --summary and --summary-text say what moved in each file:
old → new digest per image, images added and removed.

Flags:
`

// fluxOptions are the flags of digestpin flux pin.
type fluxOptions struct {
	repoRoot  string
	chartRepo string
	kustomize string
	timeout   time.Duration
	dryRun    bool
	summary   string
	summaryT  string
	pin       *cli.Options
	pinFS     *pflag.FlagSet
}

// flags are the flags of digestpin flux pin; docs/reference.md is written
// from them. The pinning flags are argocd refresh's: it resolves the
// tags as written, with no stream, lock file or tag policy of its own.
func (o *fluxOptions) flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("digestpin flux pin", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.repoRoot, "repo-root", "", "the folder that a GitRepository's chart paths and a Kustomization's spec.path are relative to (default: the git top level of each FILE)")
	fs.StringVar(&o.chartRepo, "chart-repo", "", "the `URL` of the HelmRepository (https://... or oci://...) or OCIRepository (oci://...) of the chart, instead of the object's spec.url")
	fs.StringVar(&o.kustomize, "kustomize", "kustomize", "the kustomize binary that builds a Kustomization's spec.path: a `PATH`, or a name on PATH")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	fs.BoolVar(&o.dryRun, "dry-run", false, "say what would change, write no file")
	fs.StringVar(&o.summary, "summary", "", "also write what moved, per file and object, in Markdown to `FILE` (old → new digest per image, images added and removed, the workloads that roll): a job summary, a pull-request comment; with --dry-run too")
	fs.StringVar(&o.summaryT, "summary-text", "", "the same in plain text to `FILE`: a commit message, a log")
	o.pin, o.pinFS = resolvingFlags(fs)
	return fs
}

// fluxFile is one FILE of digestpin flux pin, read and pinned.
type fluxFile struct {
	path string
	f    *fluxpin.File
	res  *fluxpin.Result
	perm os.FileMode
	// changes are what moved in the file's digests.
	changes *pin.ChangeSet
}

// runFluxPin is `digestpin flux pin [flags] FILE...`: every FILE is
// rendered and pinned first, and written only when all of them succeeded.
func runFluxPin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o fluxOptions
	fs := o.flags()
	perr := fs.Parse(args)
	if errors.Is(perr, pflag.ErrHelp) {
		fmt.Fprint(stderr, FluxUsage+fs.FlagUsages())
		return perr
	}
	log, err := o.pin.Preamble(ctx, o.pinFS, perr, "digestpin flux pin --help", nil, nil, stdout, stderr, nil)
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &cli.UsageError{Err: errors.New("digestpin flux pin: name the files of the HelmReleases or Kustomizations to pin (FILE...)")}
	}
	popts, err := o.pin.PinOptions(log)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	p, err := pin.New(popts)
	if err != nil {
		return &cli.UsageError{Err: o.pin.LibraryError(err)}
	}
	if err := o.checkSummaries(fs.Args()); err != nil {
		return &cli.UsageError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var files []*fluxFile
	for _, path := range fs.Args() {
		ff, err := o.pinFile(ctx, p, path)
		if err != nil {
			return err
		}
		files = append(files, ff)
	}
	for _, ff := range files {
		t := ff.f.Target
		for _, k := range ff.res.Kept {
			renamed := ""
			if k.NewName != "" {
				renamed = ", newName " + k.NewName
			}
			fmt.Fprintf(stdout, "%s: %s: kept the hand-written images entry %s (not digestpin's%s)\n", ff.path, t.Describe(), k, renamed)
		}
		switch {
		case !ff.res.Changed:
			fmt.Fprintf(stdout, "%s: %s: %d images pinned, unchanged\n", ff.path, t.Describe(), len(ff.res.Owned))
		case o.dryRun:
			fmt.Fprintf(stdout, "%s: %s: would write %d images\n", ff.path, t.Describe(), len(ff.res.Owned))
		default:
			if err := atomicfile.WriteFile(ff.path, ff.res.Out, ff.perm); err != nil {
				return fmt.Errorf("writing %s: %w", ff.path, err)
			}
			fmt.Fprintf(stdout, "%s: %s: wrote %d images\n", ff.path, t.Describe(), len(ff.res.Owned))
		}
	}
	return o.writeSummaries(files)
}

// checkSummaries refuses a summary file that is one of the FILEs, or
// both summaries in one file.
func (o *fluxOptions) checkSummaries(paths []string) error {
	same := func(a, b string) bool {
		x, err1 := filepath.Abs(a)
		y, err2 := filepath.Abs(b)
		return err1 == nil && err2 == nil && x == y
	}
	for _, s := range []string{o.summary, o.summaryT} {
		for _, p := range paths {
			if s != "" && same(s, p) {
				return fmt.Errorf("the summary file %s is a FILE to pin: give it a file of its own", s)
			}
		}
	}
	if o.summary != "" && same(o.summary, o.summaryT) {
		return fmt.Errorf("--summary and --summary-text are both %s: give each a file of its own", o.summary)
	}
	return nil
}

// writeSummaries writes the --summary and --summary-text files: what
// moved in each file, with pin's own summaries of a change set.
func (o *fluxOptions) writeSummaries(files []*fluxFile) error {
	if o.summary == "" && o.summaryT == "" {
		return nil
	}
	sums := make([]fluxpin.Summary, len(files))
	for i, ff := range files {
		sums[i] = fluxpin.Summary{Path: ff.path, Object: ff.f.Target.Describe(), Changes: ff.changes}
	}
	for _, out := range []struct {
		path string
		data []byte
	}{{o.summary, fluxpin.Markdown(sums)}, {o.summaryT, fluxpin.Text(sums)}} {
		if out.path == "" {
			continue
		}
		if err := atomicfile.WriteFile(out.path, out.data, 0o644); err != nil {
			return fmt.Errorf("writing the summary %s: %w", out.path, err)
		}
	}
	return nil
}

// pinFile reads path, renders its HelmRelease or Kustomization, resolves
// the images and prepares the file with their digests.
func (o *fluxOptions) pinFile(ctx context.Context, p *pin.Pinner, path string) (*fluxFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	f, err := fluxpin.Parse(path, b)
	if err != nil {
		return nil, err
	}
	if err := f.SetTarget(); err != nil {
		return nil, err
	}
	root := o.repoRoot
	if root == "" {
		if root, err = gitTop(ctx, filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	var bd *built
	if f.Target.Kind == fluxpin.HelmRelease {
		bd, err = o.renderRelease(ctx, f, root)
	} else {
		bd, err = o.build(ctx, f, root)
	}
	if err != nil {
		return nil, err
	}
	if bd.cleanup != nil {
		defer bd.cleanup()
	}
	res, err := p.Pin(ctx, bd.stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, f.Target.Describe(), err)
	}
	images := map[string]string{}
	for _, im := range res.Images {
		images[im.Written] = im.Digest
	}
	if err := res.Commit(); err != nil {
		return nil, err
	}
	entries, err := fluxpin.Entries(images)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, f.Target.Describe(), err)
	}
	// What runs once the entries are written: every image pinned to the
	// digest resolved for it, else nothing is written.
	final, after, err := bd.with(ctx, entries)
	if err != nil {
		return nil, err
	}
	if err := fluxpin.Check(final, images, after); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, f.Target.Describe(), err)
	}
	r, err := f.Pin(entries)
	if err != nil {
		return nil, err
	}
	return &fluxFile{path: path, f: f, res: r, perm: st.Mode().Perm(), changes: r.Changes(res.Images)}, nil
}

// gitTop is the top level of the git work tree that holds dir.
func gitTop(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel")
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return "", &cli.UsageError{Err: fmt.Errorf("finding the git top level of %s for the chart and kustomize paths (or give --repo-root): %s", dir, firstLine(errb.String(), err))}
	}
	return strings.TrimSpace(string(out)), nil
}

// firstLine is the first line of s, else err's message.
func firstLine(s string, err error) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return err.Error()
	}
	return s
}

// str is the string at path in m ("" when absent or not a string).
func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

// renderRelease renders the HelmRelease's chart with its values, as
// helm-controller would, with Helm's own template functions: only the
// images of the manifests matter here, which no generator makes, so no
// seed is needed.
func (o *fluxOptions) renderRelease(ctx context.Context, f *fluxpin.File, root string) (*built, error) {
	t := f.Target
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", f.Path, t.Line, t.Describe(), fmt.Sprintf(format, args...))
	}
	ro := helmaction.Options{Source: helmaction.Source{Settings: helmcli.New()}}
	ns := str(t.Spec, "targetNamespace")
	if ns == "" {
		ns = t.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	ro.Settings.SetNamespace(ns)
	ro.ReleaseName = str(t.Spec, "releaseName")
	if ro.ReleaseName == "" {
		ro.ReleaseName = t.Name
		if tn := str(t.Spec, "targetNamespace"); tn != "" {
			ro.ReleaseName = tn + "-" + t.Name
		}
	}
	tmp, err := os.MkdirTemp("", "digestpin-flux-")
	if err != nil {
		return nil, fmt.Errorf("making a folder for the chart and values of %s: %w", f.Path, err)
	}
	defer os.RemoveAll(tmp)
	if err := o.chart(f, root, tmp, &ro); err != nil {
		return nil, fail("%s", err)
	}
	files, err := o.values(f, tmp)
	if err != nil {
		return nil, fail("%s", err)
	}
	ro.Values.ValueFiles = files
	var hlog bytes.Buffer
	ro.Log = &hlog
	out, err := helmaction.Template(ctx, ro)
	if vfe := (*valuesFileError)(nil); errors.As(err, &vfe) {
		return nil, fail("%s", vfe)
	}
	if err != nil {
		return nil, fail("rendering chart %s: %s", ro.Chart, oneLine(err))
	}
	rs, at, err := f.PostRenderers()
	if err != nil {
		return nil, err
	}
	stream, err := postRender(out, rs, at, nil)
	if err != nil {
		return nil, fail("%s", err)
	}
	after := "no images entry matches it"
	if at+1 < len(rs) {
		after = fmt.Sprintf("spec.postRenderers[%d] runs after spec.postRenderers[%d], which holds digestpin's entries: move its patch before them, or mark an images entry of the last post-renderer %q for digestpin to write there", rs[at+1].Index, rs[at].Index, fluxpin.Mark)
	}
	return &built{
		stream: stream,
		with: func(_ context.Context, want []fluxpin.Image) ([]byte, string, error) {
			final, err := postRender(out, rs, at, want)
			if err != nil {
				return nil, "", fail("with digestpin's images entries: %s", err)
			}
			return final, after, nil
		},
	}, nil
}

// chart sets ro's chart and where it comes from, from the HelmRelease's
// spec.chart or spec.chartRef, and the chart's values files.
func (o *fluxOptions) chart(f *fluxpin.File, root, tmp string, ro *helmaction.Options) error {
	spec := f.Target.Spec
	if ref, ok := spec["chartRef"].(map[string]any); ok {
		kind, name := str(ref, "kind"), str(ref, "name")
		switch kind {
		case "HelmChart":
			ns := str(ref, "namespace")
			if ns == "" {
				ns = f.Target.Namespace
			}
			hc := o.source(f, kind, name, ns)
			if hc == nil {
				return fmt.Errorf("spec.chartRef: no HelmChart %s in %s or beside it, and digestpin reads no cluster: put the HelmChart beside the file, or name the chart in spec.chart", name, f.Path)
			}
			if hc.Spec == nil {
				return fmt.Errorf("spec.chartRef: %s (%s:%d) has no spec", hc.Describe(), hc.Path, hc.Line)
			}
			cs := chartSpecOf(hc.Spec, hc.Namespace)
			cs.at = fmt.Sprintf("spec.chartRef: %s (%s:%d): spec", hc.Describe(), hc.Path, hc.Line)
			return o.chartOf(f, root, tmp, cs, ro)
		case "OCIRepository":
		default:
			return fmt.Errorf("spec.chartRef is a %s: digestpin reads the chart of an OCIRepository or a HelmChart, or of spec.chart", kind)
		}
		url, src := o.chartRepo, o.source(f, kind, name, str(ref, "namespace"))
		if url == "" {
			if src == nil {
				return fmt.Errorf("spec.chartRef: no OCIRepository %s in %s or beside it: give its URL with --chart-repo oci://HOST/PATH", name, f.Path)
			}
			url = str(src.Spec, "url")
		}
		ro.Chart = url
		if src != nil {
			ro.ChartPath.PlainHTTP = insecure(src)
			ro.ChartPath.Version = str(src.Spec, "ref", "tag")
			if v := str(src.Spec, "ref", "semver"); v != "" {
				ro.ChartPath.Version = v
			}
		}
		return nil
	}
	cs, _ := spec["chart"].(map[string]any)
	inner, _ := cs["spec"].(map[string]any)
	if str(inner, "chart") == "" {
		return errors.New("neither spec.chart.spec.chart nor spec.chartRef: no chart to render")
	}
	return o.chartOf(f, root, tmp, chartSpecOf(inner, str(inner, "sourceRef", "namespace")), ro)
}

// chartSpec is a chart as a HelmRelease's spec.chart.spec, or a HelmChart's
// spec, names it: both render alike, as helm-controller makes the one a
// HelmChart of the other.
type chartSpec struct {
	// at is where the spec is, for messages: "spec.chart.spec".
	at                 string
	chart, version     string
	kind, name, srcNS  string // the sourceRef, and the namespace to find it in
	valuesFiles        []string
	hasValuesFile      bool // the first of valuesFiles is the deprecated valuesFile
	ignoreMissingFiles bool
}

// chartSpecOf reads the chart spec m; sourceNS is the namespace of its
// source ("" for any). The deprecated valuesFile comes before valuesFiles,
// as source-controller takes it.
func chartSpecOf(m map[string]any, sourceNS string) chartSpec {
	cs := chartSpec{
		at: "spec.chart.spec", chart: str(m, "chart"), version: str(m, "version"),
		kind: str(m, "sourceRef", "kind"), name: str(m, "sourceRef", "name"), srcNS: sourceNS,
	}
	if v := str(m, "valuesFile"); v != "" {
		cs.valuesFiles, cs.hasValuesFile = append(cs.valuesFiles, v), true
	}
	files, _ := m["valuesFiles"].([]any)
	for _, v := range files {
		s, _ := v.(string)
		cs.valuesFiles = append(cs.valuesFiles, s)
	}
	cs.ignoreMissingFiles, _ = m["ignoreMissingValuesFiles"].(bool)
	return cs
}

// chartOf sets ro's chart from cs: a folder of the repository, or a chart
// of a HelmRepository; and its values files. A folder of the repository
// is rendered from a copy of the repository in tmp, made as
// source-controller archives it (copyTree: no links, no .git), since
// helm-controller renders the chart of that archive: a link in the chart,
// or a values file that is a link, is not there for Flux either.
func (o *fluxOptions) chartOf(f *fluxpin.File, root, tmp string, cs chartSpec, ro *helmaction.Options) error {
	chart, kind, name := cs.chart, cs.kind, cs.name
	ro.ChartPath.Version = cs.version
	if ro.ChartPath.Version == "*" {
		ro.ChartPath.Version = ""
	}
	switch kind {
	case "GitRepository", "Bucket":
		dir, err := inRepo(root, chart)
		if err != nil {
			return fmt.Errorf("the chart %w", err)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() { //nolint:gosec // G703: inRepo keeps it inside the repository
			return fmt.Errorf("the chart %s of %s %s is no folder under %s (--repo-root)", chart, kind, name, root)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return fmt.Errorf("the chart %s: %w", chart, err)
		}
		artifact := filepath.Join(tmp, "source")
		if err := os.Mkdir(artifact, 0o700); err != nil {
			return fmt.Errorf("copying the repository %s to render its chart: %w", root, err)
		}
		if err := copyTree(root, artifact, kind == "GitRepository"); err != nil {
			return fmt.Errorf("copying the repository %s to render its chart: %w", root, err)
		}
		ro.Chart = filepath.Join(artifact, rel)
		if st, err := os.Stat(ro.Chart); err != nil || !st.IsDir() {
			return fmt.Errorf("the chart %s of %s %s is a link, which source-controller leaves out of the artifact: make it a folder", chart, kind, name)
		}
		return cs.localValues(artifact, root, ro)
	case "HelmRepository":
		url, typ := o.chartRepo, ""
		if src := o.source(f, kind, name, cs.srcNS); src != nil {
			typ = str(src.Spec, "type")
			ro.ChartPath.PlainHTTP = typ == "oci" && insecure(src)
			if url == "" {
				url = str(src.Spec, "url")
			}
		}
		switch {
		case url == "":
			return fmt.Errorf("the chart %s: no HelmRepository %s in %s or beside it: give its URL with --chart-repo", chart, name, f.Path)
		case typ == "oci" || strings.HasPrefix(url, "oci://"):
			ro.Chart = strings.TrimSuffix(url, "/") + "/" + chart
		default:
			ro.Chart, ro.ChartPath.RepoURL = chart, url
		}
		return cs.chartValues(ro)
	}
	return fmt.Errorf("%s.sourceRef is a %q: digestpin reads a chart of a GitRepository, Bucket or HelmRepository", cs.at, kind)
}

// source is the object of kind and name (and namespace, when given) in
// f or in a YAML file beside it; nil when there is none.
func (o *fluxOptions) source(f *fluxpin.File, kind, name, namespace string) *fluxpin.Object {
	match := func(objs []*fluxpin.Object) *fluxpin.Object {
		for _, obj := range objs {
			if obj.Kind == kind && obj.Name == name && (namespace == "" || obj.Namespace == "" || obj.Namespace == namespace) {
				return obj
			}
		}
		return nil
	}
	if obj := match(f.Objects); obj != nil {
		return obj
	}
	dir := filepath.Dir(f.Path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml")) || filepath.Clean(p) == filepath.Clean(f.Path) {
			continue
		}
		b, err := os.ReadFile(p) //nolint:gosec // G703: a file beside FILE, which the user named
		if err != nil {
			continue
		}
		if other, err := fluxpin.Parse(p, b); err == nil {
			if obj := match(other.Objects); obj != nil {
				return obj
			}
		}
	}
	return nil
}

// values writes the HelmRelease's values into dir as values files, in
// the order helm-controller merges them: each spec.valuesFrom (a
// ConfigMap or Secret in the file or beside it), then spec.values.
func (o *fluxOptions) values(f *fluxpin.File, dir string) ([]string, error) {
	var files []string
	write := func(b []byte) (string, error) {
		p := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", len(files)))
		return p, os.WriteFile(p, b, 0o600) //nolint:gosec // G703: a file of our own temporary folder
	}
	from, _ := f.Target.Spec["valuesFrom"].([]any)
	for i, v := range from {
		ref, _ := v.(map[string]any)
		kind, name, key := str(ref, "kind"), str(ref, "name"), str(ref, "valuesKey")
		if key == "" {
			key = "values.yaml"
		}
		if str(ref, "targetPath") != "" {
			return nil, fmt.Errorf("spec.valuesFrom[%d] (%s %s) has a targetPath, which digestpin does not read: put those values in spec.values", i, kind, name)
		}
		obj := o.source(f, kind, name, f.Target.Namespace)
		if obj == nil || (kind != "ConfigMap" && kind != "Secret") {
			if opt, _ := ref["optional"].(bool); opt {
				continue
			}
			return nil, fmt.Errorf("spec.valuesFrom[%d]: no %s %s in %s or beside it, and digestpin reads no cluster: put the values in spec.values, or the object beside the file", i, kind, name, f.Path)
		}
		b, err := dataKey(obj, key)
		if err != nil {
			return nil, fmt.Errorf("spec.valuesFrom[%d]: %w", i, err)
		}
		p, err := write(b)
		if err != nil {
			return nil, fmt.Errorf("writing the values of %s %s: %w", kind, name, err)
		}
		files = append(files, p)
	}
	if vals, ok := f.Target.Spec["values"].(map[string]any); ok && len(vals) > 0 {
		b, err := yaml.Marshal(vals)
		if err != nil {
			return nil, fmt.Errorf("reading spec.values: %w", err)
		}
		p, err := write(b)
		if err != nil {
			return nil, fmt.Errorf("writing spec.values: %w", err)
		}
		files = append(files, p)
	}
	return slices.Clip(files), nil
}

// dataKey is the value of key in a ConfigMap's data or a Secret's
// stringData or data (decoded).
func dataKey(obj *fluxpin.Object, key string) ([]byte, error) {
	if s, ok := obj.StringData[key].(string); ok && obj.Kind == "Secret" {
		return []byte(s), nil
	}
	s, ok := obj.Data[key].(string)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s %s (line %d) has no key %s", obj.Kind, obj.Name, obj.Line, key)
	case obj.Kind == "Secret":
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s %s (line %d): data.%s is not base64: %w", obj.Kind, obj.Name, obj.Line, key, err)
		}
		return b, nil
	}
	return []byte(s), nil
}

// insecure says that a HelmRepository's or OCIRepository's spec.insecure
// is true: its registry speaks plain HTTP.
func insecure(src *fluxpin.Object) bool {
	b, _ := src.Spec["insecure"].(bool)
	return b
}

// inRepo is the folder rel (a Flux path: slash-separated, relative to the
// source's root) under root; a path that leaves root (..) is an error,
// since Flux reads none outside its source either.
func inRepo(root, rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	if clean != "." && !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%q leaves the repository %s", rel, root)
	}
	return filepath.Join(root, clean), nil
}
