package transport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// mapStore is a PingStore in memory, as one process's cache folder.
type mapStore struct {
	mu sync.Mutex
	m  map[string]PingAnswer
}

func (s *mapStore) LoadPing(_ context.Context, scheme, host string) (PingAnswer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[scheme+"://"+host]
	return a, ok
}

func (s *mapStore) StorePing(_ context.Context, scheme, host string, a PingAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[scheme+"://"+host] = a
}

func TestPingStore(t *testing.T) {
	t.Parallel()
	const challenge = `Bearer realm="https://auth.example/token",service="registry.example"`
	for _, tc := range []struct {
		desc   string
		status int
		want   ggcr.Challenge
	}{
		{desc: "no auth", status: http.StatusOK, want: ggcr.Challenge{Insecure: true}},
		{desc: "bearer", status: http.StatusUnauthorized, want: ggcr.Challenge{Scheme: "bearer", Parameters: map[string]string{"realm": "https://auth.example/token", "service": "registry.example"}, Insecure: true}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			// A registry on plain HTTP: go-containerregistry pings
			// HTTPS first, then HTTP.
			var pings atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				pings.Add(1)
				if tc.status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", challenge)
				}
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			reg, err := name.NewRegistry(strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			store := &mapStore{m: map[string]PingAnswer{}}
			for run := range 2 {
				rt, err := New(Options{Pings: store})
				if err != nil {
					t.Fatal(err)
				}
				before := pings.Load()
				got, err := ggcr.Ping(t.Context(), reg, rt)
				if err != nil {
					t.Fatalf("run %d: Ping: %v", run, err)
				}
				if diff := cmp.Diff(&tc.want, got); diff != "" {
					t.Errorf("run %d: challenge (-want +got):\n%s", run, diff)
				}
				// The first run pings; the second reads the store,
				// and does not try HTTPS.
				if n, want := pings.Load()-before, int32(1-run); n != want {
					t.Errorf("run %d: %d pings, want %d", run, n, want)
				}
			}
			if _, ok := store.LoadPing(t.Context(), "https", reg.RegistryStr()); ok {
				t.Error("an HTTPS answer kept for a registry on plain HTTP")
			}
		})
	}
}

func TestPingStoreKeepsOnlyAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	store := &mapStore{m: map[string]PingAnswer{}}
	rt, err := New(Options{Pings: store, Retry: RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	if len(store.m) != 0 {
		t.Errorf("store holds %v after a 503, want nothing", store.m)
	}
}
