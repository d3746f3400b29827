package resolve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// countingTransport counts the requests sent through it.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

// TestFailingRegistryIsAskedOnce resolves many references on a registry
// that fails as a whole, fewer at once than there are references. The
// registry's failure is remembered for the run: it costs the requests of
// one failure (with its retries), not one per batch of references, and
// every reference fails with the registry's own cause, none with the
// deadline.
func TestFailingRegistryIsAskedOnce(t *testing.T) {
	t.Parallel()
	const images, jobs = 320, 8
	for _, tc := range []struct {
		desc  string
		setup func(t *testing.T) (host string, opts []Option)
		want  string // in every error
		most  int    // requests at most
	}{
		{
			desc: "ping answers 503",
			setup: func(t *testing.T) (string, []Option) {
				reg := testregistry.New(t)
				reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
					w.WriteHeader(http.StatusServiceUnavailable)
					return true
				})
				return reg.Host(), nil
			},
			want: "503 Service Unavailable",
			most: 2 * regtransport.DefaultAttempts, // HTTPS and plain HTTP attempts of one ping
		},
		{
			desc: "connection refused",
			setup: func(t *testing.T) (string, []Option) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				host := l.Addr().String()
				l.Close()
				return host, nil
			},
			want: "connection refused",
			most: 2 * regtransport.DefaultAttempts,
		},
		{
			desc: "token server refuses the credentials",
			setup: func(t *testing.T) (string, []Option) {
				reg := testregistry.New(t)
				ts := testregistry.NewTokenServer(t, "erin", "right")
				reg.Handle(ts.Guard())
				return reg.Host(), []Option{WithKeychain(staticKeychain{"erin", "wrong"})}
			},
			want: "401 Unauthorized (UNAUTHORIZED: bad credentials)",
			// A ping (two schemes); a token request for the first
			// repositories, again for one (each with the HTTPS attempt
			// of its ping), and one without a scope. The other
			// resolutions wait for the first token request.
			most: 7,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			host, opts := tc.setup(t)
			ct := &countingTransport{next: http.DefaultTransport.(*http.Transport).Clone()}
			r, _ := newTestResolver(t, append(opts, WithJobs(jobs), WithTransport(ct))...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, images)
			start := time.Now()
			for i := range images {
				wg.Go(func() {
					_, errs[i] = r.Resolve(ctx, parseRef(t, fmt.Sprintf("%s/app%d:1", host, i)))
				})
			}
			wg.Wait()
			t.Logf("%d references: %d requests, %s", images, ct.n.Load(), time.Since(start).Round(time.Millisecond))
			for i, err := range errs {
				wantErr(t, err, fmt.Sprintf("%s/app%d:1", host, i), tc.want)
				if err != nil && strings.Contains(err.Error(), "deadline") {
					t.Fatalf("error = %q, want the registry's cause, not the deadline", err)
				}
			}
			if n := ct.n.Load(); n > int64(tc.most) {
				t.Errorf("requests = %d, want at most %d", n, tc.most)
			}
		})
	}
}
