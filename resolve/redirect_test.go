package resolve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// TestRedirectLoopIsBounded resolves against a registry whose manifest
// requests redirect to themselves: the resolver follows at most
// transport.MaxRedirects hops per request, says so, and does not multiply them
// with retries or a GET after the HEAD.
func TestRedirectLoopIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		path  string // what is redirected to itself
		exact bool   // the whole path, not a part
	}{
		{desc: "manifest", path: "/manifests/"},
		{desc: "ping", path: "/v2/", exact: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			reg.PushImage(t, "app:1")
			reg.ResetCounts()
			reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.Contains(r.URL.Path, tc.path) || (tc.exact && r.URL.Path != tc.path) {
					return false
				}
				http.Redirect(w, r, r.URL.String(), http.StatusFound)
				return true
			})
			r, _ := newTestResolver(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := r.Resolve(ctx, parseRef(t, reg.Ref("app:1")))
			wantErr(t, err, reg.Ref("app:1"), "too many redirects (10) from "+reg.Host())
			// The request and the redirects up to the 10th, which is not
			// followed; for a manifest, the ping before them.
			t.Logf("%d requests: HEAD %d, ping %d", reg.Total(), reg.Count("HEAD manifests"), reg.Count("GET ping"))
			if n := reg.Total(); n > regtransport.MaxRedirects+1 {
				t.Errorf("requests = %d, want at most %d", n, regtransport.MaxRedirects+1)
			}
		})
	}
}

// TestSlowPlainHTTPRegistryGivesTheTimeout resolves against a plain HTTP
// registry, named insecure, whose ping never answers. The ping tries
// HTTPS first, which fails at once ("server gave HTTP response to HTTPS
// client"); the cause to report is that of plain HTTP: the timeout.
func TestSlowPlainHTTPRegistryGivesTheTimeout(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v2/" {
			return false
		}
		<-r.Context().Done()
		return true
	})
	r, _ := newTestResolver(t, WithInsecureRegistries(reg.Host()), WithRequestTimeout(300*time.Millisecond))
	_, err := resolveString(t, r, reg.Ref("app:1"))
	wantErr(t, err, reg.Ref("app:1"), "ping "+reg.Host()+": no answer from "+reg.Host()+" within 300ms")
	if err != nil && strings.Contains(err.Error(), "HTTPS client") {
		t.Errorf("error = %q, want the timeout, not the HTTPS attempt", err)
	}
}
