package testregistry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// get asks the registry for path with a client that gives up after
// timeout, and returns the status (0 on an error) and the error.
func get(t *testing.T, r *Registry, method, path string, timeout time.Duration) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, r.Server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A new connection each time: a stopped registry closed the old ones.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// TestFaults checks each fault as a client meets it, that the test's own
// pushes are spared, and that a stopped registry refuses connections and
// comes back on the same port.
func TestFaults(t *testing.T) {
	t.Parallel()
	r := New(t)
	r.PushImage(t, "app:1")
	r.ResetCounts()
	manifest := "/v2/app/manifests/1"

	r.SetFault(Status(http.StatusTooManyRequests, "Retry-After", "1"))
	if code, err := get(t, r, http.MethodHead, manifest, 5*time.Second); code != http.StatusTooManyRequests || err != nil {
		t.Errorf("Status(429): %d, %v", code, err)
	}
	pushes := r.Pushes()
	r.PushImage(t, "app:1") // spared
	if n := r.Pushes(); n <= pushes || r.Total()-n != 1 {
		t.Errorf("after a push and a client's request: %d pushes of %d requests, want more pushes and one other request", n, r.Total())
	}
	r.SetFault(r.Hang())
	if _, err := get(t, r, http.MethodHead, manifest, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Hang: %v, want the client's deadline", err)
	}
	r.SetFault(r.HangAfterHeaders())
	if code, err := get(t, r, http.MethodHead, manifest, 5*time.Second); code != http.StatusOK || err != nil {
		t.Errorf("HangAfterHeaders, HEAD: %d, %v; want the answer", code, err)
	}
	if code, err := get(t, r, http.MethodGet, manifest, 300*time.Millisecond); code != http.StatusOK || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("HangAfterHeaders, GET: %d, %v; want 200, then the client's deadline reading the body", code, err)
	}
	r.SetFault(nil)
	if code, err := get(t, r, http.MethodGet, manifest, 5*time.Second); code != http.StatusOK || err != nil {
		t.Errorf("no fault: %d, %v", code, err)
	}

	host := r.Host()
	r.Stop()
	r.Stop()
	if _, err := get(t, r, http.MethodGet, "/v2/", 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("stopped: %v, want the connection refused", err)
	}
	r.Start(t)
	r.Start(t)
	if code, err := get(t, r, http.MethodGet, manifest, 5*time.Second); code != http.StatusOK || err != nil || r.Host() != host {
		t.Errorf("started again: %d, %v at %s, want 200 at %s", code, err, r.Host(), host)
	}
}
