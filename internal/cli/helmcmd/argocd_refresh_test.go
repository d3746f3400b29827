package helmcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/digestpin/digestpin/internal/cli"
)

const refreshDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// application returns an Application as the API lists it, with the live
// images of its status.summary.
func application(ns, name string, images ...any) unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"namespace": ns, "name": name},
	}
	if images != nil {
		obj["status"] = map[string]any{"summary": map[string]any{"images": images}}
	}
	return unstructured.Unstructured{Object: obj}
}

// TestMatchApplications: an Application matches when one of its live
// images is a pushed image's repository and tag, pinned or not, in any
// spelling the kubelet reads as the same; nothing else matches.
func TestMatchApplications(t *testing.T) {
	t.Parallel()
	apps := []unstructured.Unstructured{
		application("argocd", "shop", "registry.example/shop/web:dev@"+refreshDigest, "registry.example/shop/api:1.0@"+refreshDigest),
		application("team-a", "web", "Registry.Example/shop/web:dev"), // unpinned, host in other case
		application("argocd", "other-tag", "registry.example/shop/web:1.0@"+refreshDigest),
		application("argocd", "other-repo", "registry.example/shop/web2:dev", "registry.example/shop:dev"),
		application("argocd", "digest-only", "registry.example/shop/web@"+refreshDigest), // --mode digest: no tag to match
		application("argocd", "nginx", "nginx"),
		application("argocd", "hub", "docker.io/library/redis:7@"+refreshDigest),
		application("argocd", "bad", "Not A Reference", 7, ""), // status from a broken controller
		application("argocd", "no-status"),
		application("argocd", "mixed", 7, map[string]any{"image": "x"}, "registry.example/shop/web:dev"),
	}
	for _, tc := range []struct {
		pushed []string
		want   []string
	}{
		{[]string{"registry.example/shop/web:dev"}, []string{"argocd/mixed", "argocd/shop", "team-a/web"}},
		{[]string{"registry.example/shop/web:dev@" + refreshDigest}, []string{"argocd/mixed", "argocd/shop", "team-a/web"}},
		{[]string{"registry.example/shop/api:1.0", "registry.example/shop/web:1.0"}, []string{"argocd/other-tag", "argocd/shop"}},
		{[]string{"nginx:latest"}, []string{"argocd/nginx"}},
		{[]string{"docker.io/library/nginx"}, []string{"argocd/nginx"}},
		{[]string{"index.docker.io/nginx:latest"}, []string{"argocd/nginx"}},
		{[]string{"redis:7"}, []string{"argocd/hub"}},
		{[]string{"redis:7.2"}, nil},
		{[]string{"registry.example/shop/web"}, nil}, // :latest
		{[]string{"other.example/shop/web:dev"}, nil},
	} {
		pushed, err := parsePushed(tc.pushed)
		if err != nil {
			t.Fatalf("parsePushed(%q): %v", tc.pushed, err)
		}
		var got []string
		for _, m := range matchApplications(apps, pushed) {
			got = append(got, m.namespace+"/"+m.name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("pushed %q: refreshes %q, want %q", tc.pushed, got, tc.want)
		}
	}
}

// TestMatchApplicationsImages: each match lists the images that matched,
// as the Application lists them.
func TestMatchApplicationsImages(t *testing.T) {
	t.Parallel()
	pushed, err := parsePushed([]string{"registry.example/shop/web:dev", "registry.example/shop/api:1.0"})
	if err != nil {
		t.Fatal(err)
	}
	m := matchApplications([]unstructured.Unstructured{
		application("argocd", "shop", "registry.example/shop/web:dev@"+refreshDigest, "registry.example/shop/db:1", "registry.example/shop/api:1.0"),
	}, pushed)
	want := []string{"registry.example/shop/web:dev@" + refreshDigest, "registry.example/shop/api:1.0"}
	if len(m) != 1 || !slices.Equal(m[0].images, want) {
		t.Errorf("matches = %+v, want one with images %q", m, want)
	}
}

// TestRefreshBadInput: a bad command line is a usage error (exit 2) of
// one line that says what is wrong, before any connection.
func TestRefreshBadInput(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"argocd"}, "usage: digestpin argocd refresh", 2},
		{[]string{"argocd", "sync"}, "usage: digestpin argocd refresh", 2},
		{[]string{"argocd", "refresh"}, "name the pushed images (IMAGE...), or find what moved with --moved", 2},
		{[]string{"argocd", "refresh", "--moved", "app:1"}, "digestpin argocd refresh --moved finds what moved itself: name no IMAGE (got app:1)", 2},
		{[]string{"argocd", "refresh", "--cache-ttl", "5m", "--mirror-only", "app:1"}, "digestpin argocd refresh: --mirror-only, --cache-ttl resolves images, which only --moved does", 2},
		{[]string{"argocd", "refresh", "--plugin", "x", "app:1"}, "--plugin goes with --moved", 2},
		{[]string{"argocd", "refresh", "--moved", "--min-age", "1h"}, "--min-age needs --cache-ttl", 2},
		{[]string{"argocd", "refresh", "--no-such-flag", "app:1"}, "unknown flag: --no-such-flag", 2},
		{[]string{"argocd", "refresh", "UPPER/App:1"}, `image "UPPER/App:1": invalid reference format`, 2},
		{[]string{"argocd", "refresh", "app:-bad"}, `image "app:-bad"`, 2},
		{[]string{"argocd", "refresh", "app@" + refreshDigest}, "a digest without a tag", 2},
		{[]string{"argocd", "refresh", "--kubeconfig", missing, "app:1"}, "reading the kubeconfig: stat " + missing, 2},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if code := cli.ExitCode(err); code != tc.code {
				t.Errorf("exit code %d, want %d (%v)", code, tc.code, err)
			}
			msg := stderr.String()
			if !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "digestpin: error: ") {
				t.Errorf("stderr = %q, want one line with %q", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestFlatError: a multi-line message becomes one line, and the error
// inside is still found.
func TestFlatError(t *testing.T) {
	t.Parallel()
	inner := errors.New("inner")
	err := flatErr(fmt.Errorf("first\n  second:\r\n%w", inner))
	if got := err.Error(); strings.ContainsAny(got, "\r\n") || !strings.Contains(got, "first") || !strings.Contains(got, "second") {
		t.Errorf("Error() = %q, want one line with both parts", got)
	}
	if !errors.Is(err, inner) {
		t.Error("errors.Is does not find the inner error")
	}
}

// pluginApplication returns an Application that renders through plugin
// (with env as NAME=VALUE), and runs images.
func pluginApplication(ns, name, plugin string, env []string, images ...any) unstructured.Unstructured {
	a := application(ns, name, images...)
	var e []any
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		e = append(e, map[string]any{"name": k, "value": v})
	}
	a.Object["spec"] = map[string]any{"source": map[string]any{"plugin": map[string]any{"name": plugin, "env": e}}}
	return a
}

// TestPluginApplications: --moved checks the Applications that render
// through the plugin, in any of their sources, by their images pinned by
// tag and digest; a lock file's Applications, the others' and images
// that are no pinned tag are left out, the odd ones said.
func TestPluginApplications(t *testing.T) {
	t.Parallel()
	web := "registry.example/shop/web:dev@" + refreshDigest
	multi := application("argocd", "multi", web)
	multi.Object["spec"] = map[string]any{"sources": []any{
		map[string]any{"repoURL": "https://charts.example", "chart": "x"},
		map[string]any{"plugin": map[string]any{"name": "digestpin"}},
	}}
	apps, locked, odd := pluginApplications([]unstructured.Unstructured{
		pluginApplication("argocd", "shop", "digestpin", nil, web, "registry.example/shop/db:16", "registry.example/shop/x@"+refreshDigest, "nginx:1.27@"+refreshDigest),
		pluginApplication("argocd", "locked", "digestpin", []string{"DIGESTPIN_LOCK=digests.lock"}, web),
		pluginApplication("argocd", "other-plugin", "kustomize-plus", nil, web),
		pluginApplication("argocd", "odd", "digestpin", nil, 7, "Not An Image", web),
		pluginApplication("argocd", "unpinned", "digestpin", nil, "registry.example/shop/web:dev"),
		application("argocd", "helm", web),
		multi,
	}, "digestpin")
	var got []string
	for _, a := range apps {
		var ims []string
		for _, im := range a.images {
			ims = append(ims, im.tagged)
		}
		got = append(got, a.namespace+"/"+a.name+": "+strings.Join(ims, " "))
	}
	want := []string{
		"argocd/multi: registry.example/shop/web:dev",
		"argocd/odd: registry.example/shop/web:dev",
		"argocd/shop: registry.example/shop/web:dev docker.io/library/nginx:1.27",
	}
	if !slices.Equal(got, want) {
		t.Errorf("apps = %q, want %q", got, want)
	}
	if want := []string{"argocd/locked: its lock file (DIGESTPIN_LOCK) decides its digests: a commit rolls it, not a registry"}; !slices.Equal(locked, want) {
		t.Errorf("locked = %q, want %q", locked, want)
	}
	skipped := odd
	wantSkipped := []string{
		"argocd/odd: an image of status.summary.images is no string: 7",
		`argocd/odd: image "Not An Image" of status.summary.images: invalid reference format`,
	}
	if len(skipped) != len(wantSkipped) {
		t.Fatalf("skipped = %q, want %q", skipped, wantSkipped)
	}
	for i := range skipped {
		if !strings.HasPrefix(skipped[i], wantSkipped[i]) {
			t.Errorf("skipped[%d] = %q, want %q", i, skipped[i], wantSkipped[i])
		}
	}

	// One Pod per Application, each distinct tag once.
	stream, tags := movedStream(apps)
	if want := []string{"registry.example/shop/web:dev", "docker.io/library/nginx:1.27"}; !slices.Equal(tags, want) {
		t.Errorf("tags = %q, want %q", tags, want)
	}
	if n := strings.Count(string(stream), `"kind":"Pod"`); n != 3 {
		t.Errorf("stream has %d Pods, want 3:\n%s", n, stream)
	}
}

// TestMovedKeepsHistory: an Application whose status lists the digest the
// registry serves beside an older one (the ReplicaSet a rollout left) has
// not moved; one that lists only older ones has, once per tag.
func TestMovedKeepsHistory(t *testing.T) {
	t.Parallel()
	old, cur := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	web := "registry.example/shop/web:dev"
	apps, _, _ := pluginApplications([]unstructured.Unstructured{
		pluginApplication("argocd", "rolled", "digestpin", nil, web+"@"+old, web+"@"+cur),
		pluginApplication("argocd", "behind", "digestpin", nil, web+"@"+old, web+"@sha256:"+strings.Repeat("c", 64)),
	}, "digestpin")
	got := map[string][]movedImage{}
	for _, a := range apps {
		got[a.name] = movesOf(a, map[string]string{web: cur})
	}
	if len(got["rolled"]) != 0 || len(got["behind"]) != 1 || got["behind"][0].to != cur {
		t.Errorf("moves = %+v, want none for rolled and one for behind", got)
	}
}
