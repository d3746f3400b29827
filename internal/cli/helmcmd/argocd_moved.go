package helmcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/pin"
)

// keptFormat is the renderer's warning about an image it keeps
// unresolved (renderer.Renderer.KeepUnresolved), which runMoved says in
// its own words; e2e/argocd's testRefreshMoved checks that it is not
// said twice.
const keptFormat = "keeping %s unpinned: %v"

// patchJobs bounds the refreshes asked of the API server at once.
const patchJobs = 8

// pluginApp is an Application that renders through the digestpin plugin,
// and the pinned images it runs.
type pluginApp struct {
	namespace, name string
	// images are its live images pinned by tag and digest, as
	// status.summary.images lists them, parsed.
	images []liveImage
}

// liveImage is an image an Application runs, pinned: the tag it follows
// and the digest it runs.
type liveImage struct {
	listed string // as status.summary.images lists it
	tagged string // repository:tag, what is resolved
	digest string
}

// movedImage is an image whose tag the registry has moved past the
// digest an Application runs.
type movedImage struct {
	tagged, from, to string
}

// runMoved is `digestpin argocd refresh --moved`: it lists the
// Applications that render through the plugin, resolves each distinct
// tag they run once, through a Pinner made of the pinning flags (cache,
// Redis, mirrors, credentials, waiting periods, verification: as a
// render would), and hard-refreshes exactly those that run a digest the
// registry has moved past. An image that cannot be resolved, or a refresh
// the API server refuses, is a line each; the others go on, and the run
// fails at the end.
func runMoved(ctx context.Context, o *refreshOptions, args []string, stdout, stderr io.Writer) error {
	log, err := o.pin.Preamble(ctx, o.pinFS, nil, "digestpin argocd refresh --help", nil, nil, stdout, stderr, nil)
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return &cli.UsageError{Err: fmt.Errorf("digestpin argocd refresh --moved finds what moved itself: name no IMAGE (got %s)", strings.Join(args, ", "))}
	}
	popts, err := o.pin.PinOptions(log)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	// Every image is checked: one that cannot be resolved is a line of
	// its own (below, not the renderer's warning about a stream that
	// is no one's), and its Applications are not refreshed.
	popts.Renderer.KeepUnresolved = true
	if warnf := popts.Renderer.Warnf; warnf != nil {
		popts.Renderer.Warnf = func(format string, args ...any) {
			if format != keptFormat {
				warnf(format, args...)
			}
		}
	}
	p, err := pin.New(popts)
	if err != nil {
		return &cli.UsageError{Err: o.pin.LibraryError(err)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	client, list, where, err := o.applications(ctx)
	if err != nil {
		return err
	}
	apps, locked, odd := pluginApplications(list, o.plugin)
	for _, s := range locked {
		log.Debugf("%s", s)
	}
	for _, s := range odd {
		log.Warnf("%s; the Application's other images are checked", s)
	}
	stream, tags := movedStream(apps)
	if len(tags) == 0 {
		fmt.Fprintf(stdout, "no Application %s that renders through the %s plugin runs an image pinned by tag and digest: nothing to check\n", where, o.plugin)
		return nil
	}
	res, err := p.Pin(ctx, stream)
	if err != nil {
		return fmt.Errorf("resolving the images of the Applications %s: %w", where, err)
	}
	defer res.Discard()
	now := map[string]string{} // repository:tag → digest the registry serves
	var errs []error
	for _, im := range res.Images {
		switch {
		case im.Digest != "":
			now[im.Written] = im.Digest
		case im.Err != nil:
			errs = append(errs, fmt.Errorf("%s: not checked, its Applications are not refreshed: %w", im.Written, flatErr(im.Err)))
		}
	}
	if err := res.Commit(); err != nil {
		errs = append(errs, err)
	}
	var refresh []pluginApp
	moves := map[string][]movedImage{}
	for _, a := range apps {
		// A tag moved when the Application runs no pod of the digest the
		// registry serves: its status lists the images of every live
		// resource, the ReplicaSets a rollout left behind too, so an
		// older digest beside the current one is history, not a move.
		moved := movesOf(a, now)
		if len(moved) > 0 {
			refresh = append(refresh, a)
			moves[a.namespace+"/"+a.name] = moved
		}
	}
	done := refreshAll(ctx, client, refresh, o.dryRun, moves, stdout, &errs)
	verb := "refreshed"
	if o.dryRun {
		verb = "would refresh"
	}
	fmt.Fprintf(stdout, "%d Application(s) %s render through %s, %d distinct tag(s) checked, %d moved: %s %d\n", len(apps), where, o.plugin, len(tags), len(moves), verb, done)
	if len(errs) > 0 {
		return joinLines(errs)
	}
	return nil
}

// refreshAll hard-refreshes apps (at most patchJobs at once), or lists
// them under dryRun, with a line each in name order; a refusal is added
// to errs. It returns how many were refreshed (or would be).
func refreshAll(ctx context.Context, client dynamic.Interface, apps []pluginApp, dryRun bool, moves map[string][]movedImage, stdout io.Writer, errs *[]error) int {
	lines := make([]string, len(apps))
	fails := make([]error, len(apps))
	var g errgroup.Group
	g.SetLimit(patchJobs)
	for i, a := range apps {
		what := describeMoves(moves[a.namespace+"/"+a.name])
		if dryRun {
			lines[i] = fmt.Sprintf("would refresh %s/%s: %s", a.namespace, a.name, what)
			continue
		}
		g.Go(func() error {
			_, err := client.Resource(argocdApplications).Namespace(a.namespace).Patch(ctx, a.name, types.MergePatchType, []byte(argocdRefreshPatch), metav1.PatchOptions{})
			if err != nil {
				fails[i] = fmt.Errorf("refreshing Application %s/%s (%s): %w", a.namespace, a.name, what, apiError(err))
				return nil
			}
			lines[i] = fmt.Sprintf("refreshed %s/%s: %s", a.namespace, a.name, what)
			return nil
		})
	}
	_ = g.Wait()
	n := 0
	for i := range apps {
		if lines[i] != "" {
			fmt.Fprintln(stdout, lines[i])
			n++
		}
		if fails[i] != nil {
			*errs = append(*errs, fails[i])
		}
	}
	return n
}

// movesOf returns the tags of a that the registry has moved past (now:
// repository:tag → the digest it serves), once each: those of which a
// runs no pod of the current digest.
func movesOf(a pluginApp, now map[string]string) []movedImage {
	runs := map[string]bool{}
	for _, im := range a.images {
		runs[im.tagged+"@"+im.digest] = true
	}
	var moved []movedImage
	seen := map[string]bool{}
	for _, im := range a.images {
		if d, ok := now[im.tagged]; ok && !runs[im.tagged+"@"+d] && !seen[im.tagged] {
			seen[im.tagged] = true
			moved = append(moved, movedImage{tagged: im.tagged, from: im.digest, to: d})
		}
	}
	return moved
}

// describeMoves says what moved: "registry.example/web:dev 0123456789ab →
// 456789abcdef, …".
func describeMoves(moved []movedImage) string {
	parts := make([]string, len(moved))
	for i, m := range moved {
		parts[i] = m.tagged + " " + pin.ShortDigest(m.from) + " → " + pin.ShortDigest(m.to)
	}
	return strings.Join(parts, ", ")
}

// pluginApplications returns the Applications that render through the
// plugin named plugin (spec.source.plugin.name, or that of one of
// spec.sources), sorted by namespace and name, with their live images
// pinned by tag and digest; a line for each one left to its lock file
// (a new commit rolls it, not a registry), for -v; and a line for each
// image of a status that does not parse, a warning.
func pluginApplications(list []unstructured.Unstructured, plugin string) (apps []pluginApp, locked, odd []string) {
	for _, a := range list {
		sources := []map[string]any{}
		if s, ok, _ := unstructured.NestedMap(a.Object, "spec", "source"); ok {
			sources = append(sources, s)
		}
		if ss, ok, _ := unstructured.NestedSlice(a.Object, "spec", "sources"); ok {
			for _, s := range ss {
				if m, ok := s.(map[string]any); ok {
					sources = append(sources, m)
				}
			}
		}
		ours, lockFile := false, false
		for _, s := range sources {
			name, _, _ := unstructured.NestedString(s, "plugin", "name")
			if name != plugin {
				continue
			}
			ours = true
			env, _, _ := unstructured.NestedSlice(s, "plugin", "env")
			for _, e := range env {
				if m, ok := e.(map[string]any); ok && m["name"] == "DIGESTPIN_LOCK" && m["value"] != "" {
					lockFile = true
				}
			}
		}
		id := a.GetNamespace() + "/" + a.GetName()
		switch {
		case !ours:
			continue
		case lockFile:
			locked = append(locked, fmt.Sprintf("%s: its lock file (DIGESTPIN_LOCK) decides its digests: a commit rolls it, not a registry", id))
			continue
		}
		field, _, _ := unstructured.NestedFieldNoCopy(a.Object, "status", "summary", "images")
		listed, _ := field.([]any)
		app := pluginApp{namespace: a.GetNamespace(), name: a.GetName()}
		for _, v := range listed {
			s, ok := v.(string)
			if !ok {
				odd = append(odd, fmt.Sprintf("%s: an image of status.summary.images is no string: %s", id, oneLineJSON(v)))
				continue
			}
			n, err := imageref.Parse(s)
			if err != nil {
				odd = append(odd, fmt.Sprintf("%s: image %q of status.summary.images: %v", id, s, err))
				continue
			}
			// Pinned by tag and digest, as digestpin pins: a tag alone
			// was left unpinned, a digest alone follows no tag.
			if n.Tag == "" || n.Digest == "" {
				continue
			}
			app.images = append(app.images, liveImage{listed: s, tagged: n.Repository + ":" + n.Tag, digest: n.Digest})
		}
		if len(app.images) > 0 {
			apps = append(apps, app)
		}
	}
	slices.SortFunc(apps, func(a, b pluginApp) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	return apps, locked, odd
}

// oneLineJSON is v as JSON, at most 80 bytes, for a message.
func oneLineJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// movedStream is the manifest stream that asks for every tag apps run
// once: a Pod per Application (its namespace and name), a container per
// image, written as the tag alone, so that the Pinner resolves each
// distinct tag once, as a render of all of them would. It returns the
// stream and the distinct tags.
func movedStream(apps []pluginApp) ([]byte, []string) {
	var b strings.Builder
	seen := map[string]bool{}
	var tags []string
	for _, a := range apps {
		var containers []map[string]string
		for i, im := range a.images {
			containers = append(containers, map[string]string{"name": fmt.Sprintf("c%d", i), "image": im.tagged})
			if !seen[im.tagged] {
				seen[im.tagged] = true
				tags = append(tags, im.tagged)
			}
		}
		// JSON is YAML: names and images need no quoting rules.
		doc, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]string{"namespace": a.namespace, "name": a.name},
			"spec":     map[string]any{"containers": containers},
		})
		b.WriteString("---\n")
		b.Write(doc)
		b.WriteByte('\n')
	}
	return []byte(b.String()), tags
}
