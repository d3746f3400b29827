package helmcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/internal/imageref"
)

// argocdApplications is Argo CD's Application resource.
var argocdApplications = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// argocdRefreshAnnotation asks Argo CD's application controller for a
// refresh; the value hard also skips the repo server's manifest cache, so
// that the plugin renders (and resolves) again.
const argocdRefreshAnnotation = "argocd.argoproj.io/refresh"

// argocdRefreshPatch is the merge patch that asks for a hard refresh: it
// sets the annotation and nothing else.
const argocdRefreshPatch = `{"metadata":{"annotations":{"` + argocdRefreshAnnotation + `":"hard"}}}`

// refreshOptions are the flags of digestpin argocd refresh.
type refreshOptions struct {
	kubeconfig string
	context    string
	namespace  string
	selector   string
	dryRun     bool
	timeout    time.Duration
	// moved finds what moved itself (runMoved), resolving the images
	// with the pinning flags, pin, bound on pinFS.
	moved  bool
	plugin string
	pin    *cli.Options
	pinFS  *pflag.FlagSet
}

// refreshRenames are the pinning flags that digestpin argocd refresh
// leaves out: it reads and writes no stream, its --timeout bounds the
// whole run, resolutions included, and it resolves the tags the
// Applications run (a tag policy chose them already), with no lock file.
// What decides a digest stays: the registries' flags, the cache, the
// waiting periods, the verification, the configuration file.
var refreshRenames = map[string]string{
	"filename": "", "version": "", "timeout": "", "log-file": "", "progress": "", "tty-errors": "",
	"mode": "", "checksum-annotation": "", "pod-spec-path": "", "image-path": "", "checksum-path": "",
	"on-error": "", "strict": "",
	"lock": "", "write-lock": "", "frozen": "", "check": "", "report": "", "diff-against": "", "summary": "", "summary-text": "",
	"tag-policy": "", "tag-allow": "", "tag-ignore": "", "max-tags": "", "keel-annotations": "",
}

// resolvingFlags binds the pinning flags that decide a digest
// (refreshRenames leaves out the others) onto a flag set of their own,
// added to fs: the flags of the commands that resolve tags without a
// stream of their own (argocd refresh --moved, flux pin).
func resolvingFlags(fs *pflag.FlagSet) (*cli.Options, *pflag.FlagSet) {
	o := cli.NewOptions()
	pinFS := pflag.NewFlagSet("pinning", pflag.ContinueOnError)
	pinFS.SortFlags = false
	cli.BindPinning(o, pinFS, refreshRenames)
	fs.AddFlagSet(pinFS)
	return o, pinFS
}

// flags are the flags of digestpin argocd refresh, bound onto o;
// docs/reference.md is written from them.
func (o *refreshOptions) flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("digestpin argocd refresh", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file, as kubectl's (default: KUBECONFIG, else ~/.kube/config; in a pod, its service account)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "only the Applications of this namespace (default: every namespace)")
	fs.StringVarP(&o.selector, "selector", "l", "", "only the Applications whose labels match this `SELECTOR` (as kubectl's -l: app.kubernetes.io/part-of=shop,tier!=test)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list the Applications that would be refreshed, refresh none")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "bound on the whole run")
	fs.BoolVar(&o.moved, "moved", false, "name no IMAGE: resolve the tag of every image that the Applications rendering through the digestpin plugin run (each tag once, through the cache, mirrors, credentials and waiting periods of the flags below, as a render would), and refresh those whose running digest the registry has moved past")
	fs.StringVar(&o.plugin, "plugin", "digestpin", "with --moved: the Config Management Plugin's `NAME`, as Applications name it in spec.source.plugin.name")
	o.pin, o.pinFS = resolvingFlags(fs)
	return fs
}

func runArgocdRefresh(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o refreshOptions
	fs := o.flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stderr, cli.ArgocdUsage+fs.FlagUsages())
			return err
		}
		return &cli.UsageError{Err: fmt.Errorf("%w (see digestpin argocd refresh --help)", err)}
	}
	if o.moved {
		return runMoved(ctx, &o, fs.Args(), stdout, stderr)
	}
	var pinning []string
	o.pinFS.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			pinning = append(pinning, "--"+f.Name)
		}
	})
	switch {
	case fs.NArg() == 0:
		return &cli.UsageError{Err: errors.New("digestpin argocd refresh: name the pushed images (IMAGE...), or find what moved with --moved")}
	case len(pinning) > 0:
		return &cli.UsageError{Err: fmt.Errorf("digestpin argocd refresh: %s resolves images, which only --moved does: IMAGE... refreshes the Applications that run them without asking a registry", strings.Join(pinning, ", "))}
	case o.plugin != "digestpin":
		return &cli.UsageError{Err: errors.New("digestpin argocd refresh: --plugin goes with --moved: IMAGE... refreshes every Application that runs them")}
	}
	pushed, err := parsePushed(fs.Args())
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	client, apps, where, err := o.applications(ctx)
	if err != nil {
		return err
	}
	matches := matchApplications(apps, pushed)
	if len(matches) == 0 {
		fmt.Fprintf(stdout, "no Application %s runs %s: nothing to refresh\n", where, strings.Join(fs.Args(), ", "))
		return nil
	}
	var errs []error
	for _, m := range matches {
		if o.dryRun {
			fmt.Fprintf(stdout, "would refresh %s/%s (runs %s)\n", m.namespace, m.name, strings.Join(m.images, ", "))
			continue
		}
		_, err := client.Resource(argocdApplications).Namespace(m.namespace).Patch(ctx, m.name, types.MergePatchType, []byte(argocdRefreshPatch), metav1.PatchOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("refreshing Application %s/%s: %w", m.namespace, m.name, apiError(err)))
			continue
		}
		fmt.Fprintf(stdout, "refreshed %s/%s (runs %s)\n", m.namespace, m.name, strings.Join(m.images, ", "))
	}
	if len(errs) > 0 {
		return joinLines(errs)
	}
	return nil
}

// applications connects to the cluster and lists the Applications that
// --namespace and --selector choose; where says which, in words ("in the
// namespace argocd"), for messages.
func (o *refreshOptions) applications(ctx context.Context) (client dynamic.Interface, apps []unstructured.Unstructured, where string, err error) {
	c, err := o.client()
	if err != nil {
		return nil, nil, "", err
	}
	where = "in any namespace"
	if o.namespace != "" {
		where = "in the namespace " + o.namespace
	}
	if apps, err = listApplications(ctx, c, o.namespace, o.selector); err != nil {
		return nil, nil, "", fmt.Errorf("listing Argo CD Applications %s: %w", where, err)
	}
	return c, apps, where, nil
}

// listPage is how many Applications one list request asks for: a
// cluster with thousands of them is listed in pages, as kubectl does.
const listPage = 500

// listApplications lists the Applications of namespace ("" for all)
// whose labels match selector, page by page.
func listApplications(ctx context.Context, client dynamic.Interface, namespace, selector string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	for {
		list, err := client.Resource(argocdApplications).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, apiError(err)
		}
		out = append(out, list.Items...)
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// client returns a dynamic client configured as kubectl would be:
// --kubeconfig, else KUBECONFIG, else ~/.kube/config, else the pod's
// service account; --context, else the current context.
func (o refreshOptions) client() (*dynamic.DynamicClient, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, &cli.UsageError{Err: fmt.Errorf("reading the kubeconfig: %w", flatErr(err))}
	}
	cfg.UserAgent = "digestpin/" + cli.VersionString()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	return client, nil
}

// apiError returns an API error as one line: a refusal names the user,
// verb, resource and namespace (the API server's own message); a missing
// resource says that Argo CD's CRDs are not installed.
func apiError(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w (is Argo CD installed in this cluster? the resource applications.argoproj.io/v1alpha1 is not served)", flatErr(err))
	default:
		return flatErr(err)
	}
}

// flatErr returns err with its message on one line (oneLine), so that a
// message from a server or a file keeps to one line; errors.Is and As still
// see err.
func flatErr(err error) error { return &flatError{err} }

type flatError struct{ err error }

func (e *flatError) Error() string { return oneLine(e.err) }
func (e *flatError) Unwrap() error { return e.err }

// joinLines joins errors into one error of one line each.
func joinLines(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// pushedImage is an image named on the command line: what it names, and
// how it was written.
type pushedImage struct {
	arg  string
	name imageref.Name
}

// parsePushed parses the pushed images; one the kubelet would refuse, or
// a digest without a tag (nothing to match a tag with), is an error.
func parsePushed(args []string) ([]pushedImage, error) {
	var out []pushedImage
	for _, a := range args {
		n, err := imageref.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", a, err)
		}
		if n.Tag == "" {
			return nil, fmt.Errorf("image %q: a digest without a tag; name the tag that was pushed (REPOSITORY:TAG)", a)
		}
		out = append(out, pushedImage{arg: a, name: n})
	}
	return out, nil
}

// applicationMatch is an Application that runs a pushed image.
type applicationMatch struct {
	namespace, name string
	images          []string // its images that matched, as it lists them
}

// matchApplications returns the Applications whose status.summary.images
// include a pushed image's repository and tag (pinned or not), sorted by
// namespace and name.
func matchApplications(apps []unstructured.Unstructured, pushed []pushedImage) []applicationMatch {
	var out []applicationMatch
	for _, a := range apps {
		// Item by item: one that is not a string (a status written by
		// something else than the controller) hides none of the others.
		field, _, _ := unstructured.NestedFieldNoCopy(a.Object, "status", "summary", "images")
		images, _ := field.([]any)
		var hit []string
		for _, v := range images {
			if img, ok := v.(string); ok && runsPushed(img, pushed) {
				hit = append(hit, img)
			}
		}
		if len(hit) > 0 {
			out = append(out, applicationMatch{namespace: a.GetNamespace(), name: a.GetName(), images: hit})
		}
	}
	slices.SortFunc(out, func(a, b applicationMatch) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	return out
}

// runsPushed reports whether the live image img is one of the pushed
// images: the same repository and tag, whatever digest it is pinned to. An
// image pinned by digest alone (digestpin --mode digest) has no tag to
// match, and an image the kubelet would refuse runs nowhere.
func runsPushed(img string, pushed []pushedImage) bool {
	n, err := imageref.Parse(img)
	if err != nil || n.Tag == "" {
		return false
	}
	for _, p := range pushed {
		if p.name.Repository == n.Repository && p.name.Tag == n.Tag {
			return true
		}
	}
	return false
}
