package helmcmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/digestpin/digestpin/helmaction"
)

// A chart's values files (a HelmChart's spec.valuesFiles, and the
// HelmRelease's spec.chart.spec.valuesFiles that helm-controller copies
// into the HelmChart it makes) are read as source-controller v1.9 builds
// the chart: each file, in order, merged over the ones before (maps
// merged key by key, anything else replaced, Helm's own merge of -f
// files), and the result REPLACES the chart's values.yaml as its
// defaults; valuesFrom and values then go over those, as ever. A list
// that is just values.yaml changes nothing. For a chart of a
// GitRepository or Bucket the paths are from the top of the source (as
// spec.chart is), for a HelmRepository's or OCI chart they are files of
// the chart. A missing file is an error unless ignoreMissingValuesFiles.

// valuesFile is one values file a chart spec lists.
type valuesFile struct {
	// field names it: "valuesFiles[1]", or "valuesFile".
	field, path string
}

// files are the values files cs lists, the deprecated valuesFile first;
// none when the list is just values.yaml, which changes nothing.
func (cs chartSpec) files() []valuesFile {
	var out []valuesFile
	for i, p := range cs.valuesFiles {
		field := fmt.Sprintf("valuesFiles[%d]", i-cs.singular())
		if i == 0 && cs.singular() == 1 {
			field = "valuesFile"
		}
		out = append(out, valuesFile{field: field, path: p})
	}
	if len(out) == 1 && filepath.Clean(out[0].path) == "values.yaml" {
		return nil
	}
	return out
}

// singular is 1 when the first of cs.valuesFiles is the deprecated
// valuesFile, else 0.
func (cs chartSpec) singular() int {
	if cs.hasValuesFile {
		return 1
	}
	return 0
}

// valuesFileError is a values file that cannot be read: its message is
// the whole line, not a render error.
type valuesFileError struct{ msg string }

func (e *valuesFileError) Error() string { return e.msg }

// failf is a valuesFileError about v of cs.
func (cs chartSpec) failf(v valuesFile, format string, args ...any) error {
	return &valuesFileError{msg: fmt.Sprintf("%s.%s %q: ", cs.at, v.field, v.path) + fmt.Sprintf(format, args...)}
}

// relPath is v's path, cleaned and checked to stay inside what it is
// relative to (what, for messages: "the chart", "the repository R").
func (cs chartSpec) relPath(v valuesFile, what string) (string, error) {
	if v.path == "" {
		return "", cs.failf(v, "is empty: name a file")
	}
	if strings.HasPrefix(v.path, "/") || filepath.IsAbs(v.path) {
		return "", cs.failf(v, "is an absolute path: name the file relative to %s", what)
	}
	p := filepath.Clean(filepath.FromSlash(v.path))
	if !filepath.IsLocal(p) {
		return "", cs.failf(v, "leaves %s: refusing to read it", what)
	}
	return p, nil
}

// localValues sets ro to render with the chart's values files read from
// root, the copy of the repository repo as source-controller archives it
// (a chart of a GitRepository or Bucket): each is checked and read now,
// before anything renders; messages name repo.
func (cs chartSpec) localValues(root, repo string, ro *helmaction.Options) error {
	files := cs.files()
	if len(files) == 0 {
		return nil
	}
	what := "the repository " + repo
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("reading the repository %s: %w", root, err)
	}
	defaults := map[string]any{}
	for _, v := range files {
		rel, err := cs.relPath(v, what)
		if err != nil {
			return err
		}
		p := filepath.Join(root, rel)
		resolved, err := filepath.EvalSymlinks(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if cs.ignoreMissingFiles {
				continue
			}
			if st, lerr := os.Lstat(filepath.Join(repo, rel)); lerr == nil && st.Mode()&os.ModeSymlink != 0 { //nolint:gosec // G703: rel is checked to be inside the repository (relPath)
				return cs.failf(v, "is a symbolic link, which source-controller leaves out of the %s's artifact, so Flux has no such file either: make it a file", cs.kind)
			}
			return cs.failf(v, "no such file under %s (paths of a %s's chart are from its top level; ignoreMissingValuesFiles: true lets one be missing)", what, cs.kind)
		case err != nil:
			return cs.failf(v, "%v", err)
		}
		if r, err := filepath.Rel(realRoot, resolved); err != nil || !filepath.IsLocal(r) {
			return cs.failf(v, "is a symbolic link to %s, outside %s: refusing to read it", resolved, what)
		}
		b, err := os.ReadFile(resolved) //nolint:gosec // G304: checked to be inside the repository above
		if err != nil {
			return cs.failf(v, "%v", err)
		}
		if defaults, err = mergeValues(defaults, b); err != nil {
			return cs.failf(v, "%v", err)
		}
	}
	ro.Loaded = func(ch *chart.Chart) error {
		ch.Values = defaults
		return nil
	}
	return nil
}

// chartValues sets ro to render with the chart's values files taken from
// the chart itself, once it is fetched (a HelmRepository's or OCI chart).
func (cs chartSpec) chartValues(ro *helmaction.Options) error {
	files := cs.files()
	if len(files) == 0 {
		return nil
	}
	rels := make([]string, len(files))
	for i, v := range files {
		rel, err := cs.relPath(v, "the chart")
		if err != nil {
			return err
		}
		rels[i] = filepath.ToSlash(rel)
	}
	ro.Loaded = func(ch *chart.Chart) error {
		defaults := map[string]any{}
		for i, v := range files {
			if rels[i] == "values.yaml" {
				defaults = loader.MergeMaps(defaults, ch.Values)
				continue
			}
			var b []byte
			for _, f := range ch.Files {
				if f.Name == rels[i] {
					b = f.Data
					break
				}
			}
			if b == nil {
				if cs.ignoreMissingFiles {
					continue
				}
				return cs.failf(v, "no such file in the chart %s (ignoreMissingValuesFiles: true lets one be missing)", ch.Name())
			}
			var err error
			if defaults, err = mergeValues(defaults, b); err != nil {
				return cs.failf(v, "%v", err)
			}
		}
		ch.Values = defaults
		return nil
	}
	return nil
}

// mergeValues is the values file b merged over into (Helm's merge of -f
// files, which source-controller's is).
func mergeValues(into map[string]any, b []byte) (map[string]any, error) {
	vals, err := loader.LoadValues(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not YAML values: %w", err)
	}
	return loader.MergeMaps(into, vals), nil
}
