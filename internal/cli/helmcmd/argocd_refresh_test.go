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
		{[]string{"argocd", "refresh"}, "name the pushed images", 2},
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
