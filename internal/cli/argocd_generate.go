package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/readfile"
)

const argocdGenerateUsage = `Usage: digestpin argocd generate

The generate command of the digestpin Config Management Plugin for Argo CD
(scripts/argocd/plugin.yaml). Argo CD runs it in the Application's source
folder, after the plugin's init; it renders the folder as Argo CD's own
tools would, pins every image, and writes the manifests to stdout:

  Chart.yaml                a Helm chart: digestpin template with the
                            sidecar's seed (DIGESTPIN_SEED_FILE), the
                            Application's parameters (ARGOCD_APP_PARAMETERS)
                            and its values files (ARGOCD_ENV_VALUES_FILES)
  kustomization.yaml, .yml  a kustomization: kustomize build . | digestpin
  or Kustomization
  anything else             the folder's *.yaml, *.yml and *.json files, in
                            name order, joined with --- | digestpin

Every path an Application names (values files, --set-file files, the lock
and configuration files, the manifests) must be a relative path to a file
inside the repository, every symbolic link followed, and no symbolic link
of the repository may point outside it. The Application's options are
ARGOCD_ENV_DIGESTPIN_LOCK, _FROZEN, _CONFIG, _CACHE_TTL, _MODE,
_REGISTRY_MIRROR, _PLATFORM, _ON_ERROR and _VERBOSE; the sidecar's own
DIGESTPIN_* variables apply to every Application.
`

// cmpPrefix starts every message of the plugin's own checks, as it did
// when they were the shell scripts generate.sh and init.sh.
const cmpPrefix = "digestpin-cmp: "

// cmpFlavour is what a source folder holds, as Argo CD decides it.
type cmpFlavour string

const (
	cmpHelm          cmpFlavour = "helm"
	cmpKustomization cmpFlavour = "kustomization"
	cmpDirectory     cmpFlavour = "directory"
)

// kustomizationFiles are the names that make a folder a kustomization.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// cmpOptions are the Application's options (spec.source.plugin.env, which
// Argo CD prefixes with ARGOCD_ENV_) that reach digestpin as the variable
// of the same name, over the sidecar's own: digestpin's messages then name
// what the Application wrote (DIGESTPIN_MODE), not a flag it never wrote
// (--mode). No other variable of an Application reaches digestpin.
var cmpOptions = []string{
	"DIGESTPIN_CACHE_TTL", "DIGESTPIN_MODE", "DIGESTPIN_REGISTRY_MIRROR",
	"DIGESTPIN_PLATFORM", "DIGESTPIN_ON_ERROR", "DIGESTPIN_VERBOSE",
}

// argocdProjectName is an AppProject's name: a DNS subdomain, so no / and
// no leading dot, and project.NAME is a file of the seed Secret's folder.
var argocdProjectName = regexp.MustCompile(`^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`)

// cmpSelf returns the digestpin binary that renders and pins: this one.
// Tests of runArgocdGenerate change it, since theirs is the test binary.
var cmpSelf = os.Executable

// cmpError is a failure of the plugin's own checks; its message is
// printed as "digestpin-cmp: MESSAGE" and the generation exits 1.
type cmpError struct{ err error }

func (e *cmpError) Error() string { return e.err.Error() }
func (e *cmpError) Unwrap() error { return e.err }

// cmpFail returns a *cmpError with the formatted message.
func cmpFail(format string, args ...any) error {
	return &cmpError{fmt.Errorf(format, args...)}
}

// toolExit is the exit status of a command that the plugin ran and that
// failed: the command said why on stderr itself, and the generation exits
// with its status, as a shell script's last command.
type toolExit struct{ code int }

func (e *toolExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode is the command's own status, passed on.
func (e *toolExit) ExitCode() int { return e.code }

// cmpGenerate is one run of digestpin argocd generate. Its fields are the
// process's in production; tests set their own.
type cmpGenerate struct {
	cwd       string                      // the source folder Argo CD runs the plugin in
	lookup    func(string) (string, bool) // the environment
	environ   []string                    // the environment the commands get, before the plugin's additions
	gate      func(context.Context) error // argocdGate (see runArgocdGenerate)
	digestpin string                      // the digestpin that renders and pins
	kustomize string                      // kustomize, a name on PATH or a path
	stdout    io.Writer                   // the manifests
	stderr    io.Writer                   // every message
	tmpDir    string                      // where the private folder goes ("" for the system's)
	waitDelay time.Duration               // how long a stopped command may take to exit
	readable  func(path string) bool      // whether this process can read path
	uid       func() int                  // this process's user
}

// cmpRender is what one generation runs, as prepare decides it.
type cmpRender struct {
	flavour cmpFlavour
	// args are digestpin's arguments: template …  -- RELEASE . for a
	// chart, the pinning flags otherwise.
	args []string
	// env is NAME=value for digestpin, over the sidecar's variables.
	env []string
	// manifests are the plain manifests, relative to the repository, in
	// the order they are joined.
	manifests []string
	// tmp is a private folder (the inline values) that cleanup removes.
	tmp string
}

// cleanup removes the render's private folder.
func (r *cmpRender) cleanup() {
	if r.tmp != "" {
		_ = os.RemoveAll(r.tmp)
	}
}

// runArgocdGenerate is `digestpin argocd generate`, the Argo CD plugin's
// generate command. It reports its own failures on stderr, one line
// starting with cmpPrefix, and exits 1; a command it runs (digestpin
// template, kustomize, digestpin) that fails has said why itself, and the
// generation exits with its status.
func runArgocdGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("digestpin argocd generate", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stderr, argocdGenerateUsage)
			return err
		}
		return reported(stderr, &UsageError{fmt.Errorf("%w (see digestpin argocd generate --help)", err)})
	}
	if fs.NArg() > 0 {
		return reported(stderr, &UsageError{fmt.Errorf("digestpin argocd generate takes no arguments, have %q: Argo CD runs it in the Application's source folder", fs.Arg(0))})
	}
	self, err := cmpSelf()
	if err != nil {
		err = fmt.Errorf("finding the digestpin binary: %w", err)
		fmt.Fprintf(stderr, "%s%v\n", cmpPrefix, err)
		return err
	}
	g := &cmpGenerate{
		cwd:     ".",
		lookup:  os.LookupEnv,
		environ: os.Environ(),
		// The sidecar's DIGESTPIN_* variables, the Application's
		// retired settings and its choice of the seed are checked as
		// every digestpin run checks them, and refused with the same
		// line and exit status (2), before anything is rendered.
		gate: func(ctx context.Context) error {
			return argocdGate(ctx, stderr)
		},
		digestpin: self,
		kustomize: "kustomize",
		stdout:    stdout,
		stderr:    stderr,
		waitDelay: 10 * time.Second,
		readable:  readable,
		uid:       os.Getuid,
	}
	return g.run(ctx)
}

// argocdGate checks, before anything is rendered, what every digestpin
// run checks (the preamble: the sidecar's DIGESTPIN_* variables and the
// retired ones), then the Application's retired settings, its choice of the
// seed and its parameters; a refusal is one line on stderr, as the
// filter's, with its exit status.
func argocdGate(ctx context.Context, stderr io.Writer) error {
	o := NewOptions()
	fs := filterFlags(o)
	// The DIGESTPIN_* variables that set nothing are warned about by the
	// digestpin run that pins the render, once.
	quiet := func() bool { return false }
	log, err := o.Preamble(ctx, fs, nil, "digestpin --help", quiet, nil, io.Discard, stderr, nil)
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	if err == nil {
		err = checkRetiredArgocd(os.LookupEnv)
	}
	if err == nil {
		err = checkArgocdSeedEnv(os.LookupEnv)
	}
	if err == nil {
		_, err = readArgocdParameters(os.LookupEnv)
	}
	if err != nil {
		log.Fail(err)
	}
	return err
}

// run is the whole generation: the checks, then the render.
func (g *cmpGenerate) run(ctx context.Context) error {
	err := func() error {
		repo, r, err := g.plan(ctx)
		if err != nil {
			return err
		}
		defer repo.Close()
		defer r.cleanup()
		return g.render(ctx, repo, r)
	}()
	var ce *cmpError
	if errors.As(err, &ce) {
		fmt.Fprintf(g.stderr, "%s%v\n", cmpPrefix, err)
	}
	return err
}

// plan makes every check of the generation and decides what it runs. The
// caller closes the repository and cleans the render up.
func (g *cmpGenerate) plan(ctx context.Context) (*cmpRepo, *cmpRender, error) {
	// First, where the plugin runs and what it may read.
	app, _ := g.lookup("ARGOCD_APP_NAME")
	if app == "" {
		return nil, nil, cmpFail("ARGOCD_APP_NAME is not set: run by Argo CD")
	}
	sourcePath, _ := g.lookup("ARGOCD_APP_SOURCE_PATH")
	repo, err := openCmpRepo(g.cwd, sourcePath)
	if err != nil {
		return nil, nil, &cmpError{err}
	}
	r, err := func() (*cmpRender, error) {
		if err := repo.checkLinks(); err != nil {
			return nil, &cmpError{err}
		}
		flavour := repo.flavour()
		// Next, what the Application asks for.
		if err := g.gate(ctx); err != nil {
			return nil, err
		}
		r, err := g.prepare(repo, flavour, app)
		if err != nil {
			return nil, &cmpError{err}
		}
		return r, nil
	}()
	if err != nil {
		_ = repo.Close()
		return nil, nil, err
	}
	return repo, r, nil
}

// flavour returns what Argo CD would render in the source folder.
func (r *cmpRepo) flavour() cmpFlavour {
	if r.isFile("Chart.yaml") {
		return cmpHelm
	}
	for _, f := range kustomizationFiles {
		if r.isFile(f) {
			return cmpKustomization
		}
	}
	return cmpDirectory
}

// env returns the variable name, "" when it is unset.
func (g *cmpGenerate) env(name string) string {
	v, _ := g.lookup(name)
	return v
}

// helmSettings are the Helm parameters of an Application, read in any
// order before any of them is applied.
type helmSettings struct {
	release, namespace        string
	kubeVersion, apiVersions  string
	valuesFiles, apiVersionsP []string
	inline                    *string
	sets                      []string // --set=K=V and --set-string=K=V words
	setFiles                  [][2]string
	// fromEnv are the set-from-env entries: a Helm key and the name of
	// the Application's plugin env entry whose value it takes.
	fromEnv                 [][2]string
	ignoreMissing, skipCRDs bool
	skipTests, skipSchema   bool
}

// prepare decides what the generation runs: it reads the Application's
// parameters and options, checks every path they name, and writes the
// inline values to a private file. The notes it prints (a values file
// ignored) go to stderr.
func (g *cmpGenerate) prepare(repo *cmpRepo, flavour cmpFlavour, app string) (*cmpRender, error) {
	h, err := g.helmSettings(repo, flavour, app)
	if err != nil {
		return nil, err
	}
	r := &cmpRender{flavour: flavour}
	ok := false
	defer func() {
		if !ok {
			r.cleanup()
		}
	}()
	switch flavour {
	case cmpHelm:
		if r.args, err = g.helmArgs(repo, h, r); err != nil {
			return nil, err
		}
	case cmpKustomization:
		// The Helm options of the Application's env do not apply either.
		if g.env("ARGOCD_ENV_VALUES_FILES") != "" {
			return nil, fmt.Errorf("VALUES_FILES: only for a Helm chart, and %s is a kustomization (no Chart.yaml)", repo.sourcePath)
		}
	case cmpDirectory:
		if g.env("ARGOCD_ENV_VALUES_FILES") != "" {
			return nil, fmt.Errorf("VALUES_FILES: only for a Helm chart, and %s holds plain manifests (no Chart.yaml)", repo.sourcePath)
		}
		if r.manifests, err = manifestFiles(repo); err != nil {
			return nil, err
		}
	}
	pinArgs, err := g.pinOptions(repo, r)
	if err != nil {
		return nil, err
	}
	if flavour == cmpHelm {
		// The release name and the chart after --, so that no value of
		// the Application is ever read as a flag of digestpin
		// template's (a release name "--seed-file=x" would choose the
		// seed, "--log-file=x" write a file of the sidecar's).
		r.args = append(append(r.args, pinArgs...), "--", h.release, ".")
	} else {
		r.args = pinArgs
	}
	ok = true
	return r, nil
}

// helmSettings reads the Application's parameters (ARGOCD_APP_PARAMETERS,
// checked by readArgocdParameters) over the defaults: the release is the
// Application's name without the "NAMESPACE_" Argo CD puts before it for
// Applications outside its own namespace, the namespace the destination's,
// the Kubernetes version and API versions the destination cluster's.
// Parameters on anything but a Helm chart are an error.
func (g *cmpGenerate) helmSettings(repo *cmpRepo, flavour cmpFlavour, app string) (*helmSettings, error) {
	h := &helmSettings{
		release:     app,
		namespace:   g.env("ARGOCD_APP_NAMESPACE"),
		kubeVersion: g.env("KUBE_VERSION"),
		apiVersions: g.env("KUBE_API_VERSIONS"),
	}
	if _, rest, ok := strings.Cut(app, "_"); ok {
		h.release = rest
	}
	if h.namespace == "" {
		h.namespace = "default"
	}
	params, err := readArgocdParameters(g.lookup)
	if err != nil {
		return nil, err
	}
	for _, p := range params {
		if flavour != cmpHelm {
			return nil, fmt.Errorf("parameter %s: only for a Helm chart, and %s is a %s (no Chart.yaml)", p.Name, repo.sourcePath, flavour)
		}
		if err := h.set(p); err != nil {
			return nil, err
		}
	}
	if len(h.apiVersionsP) > 0 {
		h.apiVersions = strings.Join(h.apiVersionsP, ",")
	}
	return h, nil
}

// set applies one parameter value.
func (h *helmSettings) set(p argocdValue) error {
	var err error
	switch p.Name {
	case "release-name":
		h.release = p.Value
	case "namespace":
		h.namespace = p.Value
	case "values-files":
		h.valuesFiles = append(h.valuesFiles, p.Value)
	case "values":
		h.inline = &p.Value
	case "set", "set-string":
		if err = setKey(p.Name, p.Key); err == nil {
			h.sets = append(h.sets, "--"+p.Name+"="+p.Key+"="+setValue(p.Value))
		}
	case "set-file":
		if err = setKey(p.Name, p.Key); err == nil {
			h.setFiles = append(h.setFiles, [2]string{p.Key, p.Value})
		}
	case "set-from-env":
		if err = setKey(p.Name, p.Key); err == nil {
			err = envEntryName(p.Key, p.Value)
		}
		if err == nil {
			h.fromEnv = append(h.fromEnv, [2]string{p.Key, p.Value})
		}
	case "ignore-missing-value-files":
		h.ignoreMissing, err = cmpBool(p.Name, p.Value)
	case "skip-crds":
		h.skipCRDs, err = cmpBool(p.Name, p.Value)
	case "skip-tests":
		h.skipTests, err = cmpBool(p.Name, p.Value)
	case "skip-schema-validation":
		h.skipSchema, err = cmpBool(p.Name, p.Value)
	case "kube-version":
		h.kubeVersion = p.Value
	case "api-versions":
		h.apiVersionsP = append(h.apiVersionsP, p.Value)
	default:
		// argocdParameters and this switch disagree.
		err = fmt.Errorf("parameter %s: not handled by digestpin argocd generate", p.Name)
	}
	return err
}

// pluginEnvName is the name of an entry of spec.source.plugin.env that
// set-from-env may read: a variable name, which Argo CD gives the plugin
// as ARGOCD_ENV_NAME.
var pluginEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envEntryName checks the env entry name that set-from-env maps key to.
func envEntryName(key, name string) error {
	if !pluginEnvName.MatchString(name) {
		return fmt.Errorf("set-from-env %s: \"%s\" is not the name of a plugin env entry (letters, digits and _, not first a digit)", key, name)
	}
	return nil
}

// fromEnvSets returns the --set-string words of the set-from-env entries
// whose plugin env entry is set and not empty, in key order: the tag (or
// image) that Argo CD Image Updater wrote into spec.source.plugin.env
// (manifestTargets.plugin; the env-var names are the ImageUpdater's
// choice), read as the Application's own value. Only ARGOCD_ENV_ names
// are read: an Application reaches no variable of the sidecar's this way.
// An entry not written yet is left out, so the chart's values apply.
func (g *cmpGenerate) fromEnvSets(h *helmSettings) []string {
	var out []string
	for _, kv := range h.fromEnv {
		if v := g.env("ARGOCD_ENV_" + kv[1]); v != "" {
			out = append(out, "--set-string="+kv[0]+"="+setValue(v))
		}
	}
	return out
}

// cmpBool reads the value of a true/false parameter or option.
func cmpBool(name, v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s=%s: want true or false", name, v)
}

// setKey checks the key of a --set, --set-string or --set-file parameter:
// Helm reads KEY=VALUE[,KEY=VALUE]..., so a comma or an = in a key would
// start another assignment (for --set-file, the reading of any file of
// the sidecar); Helm has no escape for them in a key.
func setKey(name, key string) error {
	if strings.ContainsAny(key, ",=") {
		return fmt.Errorf("%s key \"%s\": a comma or = in the key (Helm would read another assignment)", name, key)
	}
	return nil
}

// setValue escapes the commas of a --set value as Argo CD's Helm does, so
// that "a,b" is one string and not two assignments; a value in braces is
// a Helm list ({a,b}) and stays as it is.
func setValue(v string) string {
	if len(v) >= 2 && v[0] == '{' && v[len(v)-1] == '}' {
		return v
	}
	var b strings.Builder
	var prev byte
	for i := range len(v) {
		if v[i] == ',' && prev != '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
		prev = v[i]
	}
	return b.String()
}

// noList checks that abs, the path Helm gets for name (what it is, for the
// message), is one path: Helm splits --values and the file of --set-file
// at a comma, and would read what follows it, a file outside the
// repository, too.
func noList(what, abs, name string) error {
	if strings.ContainsAny(abs, ",\n\r\"") {
		return fmt.Errorf("%s %s: a comma, quote or line break in the path (Helm would read it as several files)", what, name)
	}
	return nil
}

// trimBlanks trims the blanks ([:space:]) around a name of VALUES_FILES.
func trimBlanks(s string) string { return strings.Trim(s, " \t\n\v\f\r") }

// helmArgs returns digestpin template's arguments before the pinning
// options: every value in a --flag=VALUE word, every path the absolute
// path of a file inside the repository; the inline values go to a file in
// r's private folder, never to a command line (they may hold secrets, and
// Helm's errors quote its command line).
func (g *cmpGenerate) helmArgs(repo *cmpRepo, h *helmSettings, r *cmpRender) ([]string, error) {
	seed, err := g.seedFile()
	if err != nil {
		return nil, err
	}
	args := []string{"template", "--seed-file=" + seed, "--namespace=" + h.namespace}
	// Render for the destination cluster, as Argo CD's built-in Helm does.
	if h.kubeVersion != "" {
		args = append(args, "--kube-version="+h.kubeVersion)
	}
	if h.apiVersions != "" {
		args = append(args, "--api-versions="+h.apiVersions)
	}
	files := slices.Concat(strings.Split(g.env("ARGOCD_ENV_VALUES_FILES"), ","), h.valuesFiles)
	for _, f := range files {
		if f = trimBlanks(f); f == "" {
			continue
		}
		if h.ignoreMissing && !repo.exists(f) {
			fmt.Fprintf(g.stderr, "%svalues file %s: no such file, ignored (ignore-missing-value-files)\n", cmpPrefix, f)
			continue
		}
		_, abs, err := repo.file("values file", f)
		if err != nil {
			return nil, err
		}
		if err := noList("values file", abs, f); err != nil {
			return nil, err
		}
		args = append(args, "--values="+abs)
	}
	// Inline values come after the files, as in Argo CD.
	if h.inline != nil {
		if r.tmp, err = os.MkdirTemp(g.tmpDir, "digestpin-cmp-"); err != nil {
			return nil, fmt.Errorf("creating a private folder for the values parameter: %w", err)
		}
		p := filepath.Join(r.tmp, "values-parameter.yaml")
		if err := os.WriteFile(p, []byte(*h.inline), 0o600); err != nil {
			return nil, fmt.Errorf("writing the values parameter to %s: %w", p, err)
		}
		args = append(args, "--values="+p)
	}
	args = append(args, h.sets...)
	// After set and set-string: a tag handed over in the env wins over
	// the Application's own default for the key.
	args = append(args, g.fromEnvSets(h)...)
	for _, kv := range h.setFiles {
		what := "set-file " + kv[0]
		_, abs, err := repo.file(what, kv[1])
		if err != nil {
			return nil, err
		}
		if err := noList(what, abs, kv[1]); err != nil {
			return nil, err
		}
		args = append(args, "--set-file="+kv[0]+"="+abs)
	}
	if !h.skipCRDs {
		args = append(args, "--include-crds")
	}
	if h.skipTests {
		args = append(args, "--skip-tests")
	}
	if h.skipSchema {
		args = append(args, "--skip-schema-validation")
	}
	return args, nil
}

// seedFile returns the seed the sidecar renders this Application's chart
// with: the file DIGESTPIN_SEED_FILE of the sidecar's env (the key seed of
// the Secret digestpin-seed), or with DIGESTPIN_CMP_SEED_PER_PROJECT=true
// the key project.PROJECT beside it. The seed is never the Application's.
// No seed, no render: the error names the Secret and key to create.
func (g *cmpGenerate) seedFile() (string, error) {
	file := g.env("DIGESTPIN_SEED_FILE")
	if !strings.HasPrefix(file, "/") {
		return "", fmt.Errorf("the sidecar's DIGESTPIN_SEED_FILE is \"%s\": want the absolute path of the key seed of the mounted Secret digestpin-seed (repo-server-patch.yaml)", file)
	}
	dir, key := file[:strings.LastIndex(file, "/")], file[strings.LastIndex(file, "/")+1:]
	perProject := false
	if v := g.env("DIGESTPIN_CMP_SEED_PER_PROJECT"); v != "" {
		var err error
		if perProject, err = cmpBool("DIGESTPIN_CMP_SEED_PER_PROJECT", v); err != nil {
			return "", fmt.Errorf("the sidecar's %w", err)
		}
	}
	project := ""
	if perProject {
		project = g.env("ARGOCD_APP_PROJECT_NAME")
		if !argocdProjectName.MatchString(project) {
			return "", fmt.Errorf("ARGOCD_APP_PROJECT_NAME \"%s\": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it", project)
		}
		key = "project." + project
		file = dir + "/" + key
	}
	if _, err := os.Stat(file); err != nil {
		if project != "" {
			return "", fmt.Errorf("no seed for the project %s at %s: add the key %s to the Secret digestpin-seed (SECURITY.md: The seed); nothing rendered", project, file, key)
		}
		return "", fmt.Errorf("no seed at %s: create the Secret digestpin-seed: kubectl -n argocd create secret generic digestpin-seed --from-file=%s=<(digestpin seed) (SECURITY.md: The seed); nothing rendered", file, key)
	}
	if !g.readable(file) {
		return "", fmt.Errorf("seed file %s: the sidecar's user %d cannot read it: give the repo server's pod securityContext.fsGroup: 999 (repo-server-patch.yaml)", file, g.uid())
	}
	return file, nil
}

// manifestFiles returns the plain manifests of the source folder: its
// *.yaml, *.yml and *.json files (not recursive, not hidden), sorted by
// name across the three patterns as Argo CD reads them, each checked as a
// file the Application names, as paths relative to the repository.
func manifestFiles(repo *cmpRepo) ([]string, error) {
	dir := repo.src
	if dir == "" {
		dir = "."
	}
	entries, err := fs.ReadDir(repo.root.FS(), dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", repo.sourcePath, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		if ext := filepath.Ext(n); ext == ".yaml" || ext == ".yml" || ext == ".json" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no Chart.yaml, no kustomization and no *.yaml, *.yml or *.json file: nothing to render", repo.sourcePath)
	}
	slices.Sort(names)
	rels := make([]string, 0, len(names))
	for _, n := range names {
		rel, _, err := repo.file("manifest", n)
		if err != nil {
			return nil, err
		}
		rels = append(rels, rel)
	}
	return rels, nil
}

// pinOptions returns digestpin's flags for the Application's lock file
// and adds the variables of its other options to r.env.
func (g *cmpGenerate) pinOptions(repo *cmpRepo, r *cmpRender) ([]string, error) {
	var args []string
	if lock := g.env("ARGOCD_ENV_DIGESTPIN_LOCK"); lock != "" {
		if _, _, err := repo.file("lock file", lock); err != nil {
			return nil, err
		}
		args = append(args, "--lock="+lock)
		frozen := true
		if v := g.env("ARGOCD_ENV_DIGESTPIN_FROZEN"); v != "" {
			var err error
			if frozen, err = cmpBool("DIGESTPIN_FROZEN", v); err != nil {
				return nil, err
			}
		}
		if frozen {
			args = append(args, "--frozen")
		}
	}
	if config := g.env("ARGOCD_ENV_DIGESTPIN_CONFIG"); config != "" {
		if _, _, err := repo.file("configuration file", config); err != nil {
			return nil, err
		}
		r.env = append(r.env, "DIGESTPIN_CONFIG="+config)
	}
	for _, name := range cmpOptions {
		if v := g.env("ARGOCD_ENV_" + name); v != "" {
			r.env = append(r.env, name+"="+v)
		}
	}
	return args, nil
}

// render runs r: digestpin template for a chart; for a kustomization or a
// plain folder, the manifests (kustomize build's, or the files joined)
// through digestpin. stdout gets digestpin's output only; a failure of
// kustomize fails the generation before digestpin runs.
func (g *cmpGenerate) render(ctx context.Context, repo *cmpRepo, r *cmpRender) error {
	var in io.Reader
	switch r.flavour {
	case cmpKustomization:
		var out bytes.Buffer
		if err := g.command(ctx, &out, nil, nil, g.kustomize, "build", "."); err != nil {
			return err
		}
		in = &out
	case cmpDirectory:
		var out bytes.Buffer
		for _, rel := range r.manifests {
			b, err := readfile.RegularIn(repo.root, rel, cmpMaxFileSize)
			if err != nil {
				return cmpFail("reading a manifest: %v", err)
			}
			out.Write(b)
			// A file without a final newline must not run into the
			// separator.
			if len(b) > 0 && b[len(b)-1] != '\n' {
				out.WriteByte('\n')
			}
			out.WriteString("---\n")
		}
		in = &out
	}
	return g.command(ctx, g.stdout, in, r.env, g.digestpin, r.args...)
}

// command runs name with args, an argument list (never a shell), in the
// source folder, with the environment g.environ plus env, stdin in (nil
// for none) and stdout out; its stderr is the generation's. A command that
// fails is a *toolExit with its status; a signal or the end of ctx stops
// it with SIGTERM.
func (g *cmpGenerate) command(ctx context.Context, out io.Writer, in io.Reader, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = g.cwd
	cmd.Env = append(slices.Clone(g.environ), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, g.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = g.waitDelay
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &toolExit{code}
	case errors.Is(err, exec.ErrNotFound):
		return cmpFail("%s is not on the sidecar's PATH (%s): run the sidecar on Argo CD's image, which has it, or on the image built from scripts/argocd/Dockerfile", name, g.lookupPath())
	}
	return cmpFail("running %s: %v", name, err)
}

// lookupPath returns PATH, for a message.
func (g *cmpGenerate) lookupPath() string { return g.env("PATH") }
