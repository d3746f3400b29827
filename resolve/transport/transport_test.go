package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/resolution"
)

func TestPlainHTTPOnlyToLoopbackAndInsecure(t *testing.T) {
	t.Parallel()
	ok := roundTripFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: http.StatusOK}, nil })
	g := &plainHTTPGuard{next: ok, insecure: map[string]bool{"registry.example:5000": true}}
	got := map[string]bool{}
	for _, u := range []string{
		"http://127.0.0.1:5000/v2/",
		"http://localhost:5000/v2/",
		"http://[::1]:5000/v2/",
		"http://registry.example:5000/v2/",
		"http://registry.example/v2/",
		"http://10.1.2.3:5000/v2/",
		"http://printer.local/v2/",
		"https://10.1.2.3:5000/v2/",
	} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.RoundTrip(req)
		got[u] = err == nil
	}
	want := map[string]bool{
		"http://127.0.0.1:5000/v2/":        true,
		"http://localhost:5000/v2/":        true,
		"http://[::1]:5000/v2/":            true,
		"http://registry.example:5000/v2/": true,
		"http://registry.example/v2/":      false,
		"http://10.1.2.3:5000/v2/":         false,
		"http://printer.local/v2/":         false,
		"https://10.1.2.3:5000/v2/":        true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
	// The refusal names the option that allows it, as the caller names it.
	ctx := resolution.WithOptionNames(t.Context(), func(o string) string { return map[string]string{"WithInsecureRegistries": "--insecure-registry"}[o] })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://10.1.2.3:5000/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.RoundTrip(req)
	if want := "plain HTTP to 10.1.2.3:5000 refused: it is not loopback; name it with --insecure-registry to allow it"; err == nil || err.Error() != want {
		t.Errorf("RoundTrip(%s) = %v, want %q", req.URL, err, want)
	}
}

func TestCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&HungError{host: "registry.example", timeout: 30e9}, "no answer from registry.example within 30s"},
		{&HungError{host: "registry.example", timeout: 30e9, earlier: true}, "skipped: registry.example gave no answer within 30s earlier in this run"},
		{errors.New("line one\nline two\t\tend"), "line one line two end"},
	} {
		if got := Cause(t.Context(), tc.err, nil); got != tc.want {
			t.Errorf("Cause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestBodyCapAllowsTheLimit checks that an answer of exactly
// MaxResponseBody bytes is read whole.
func TestBodyCapAllowsTheLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{
		{size: MaxResponseBody},
		{size: MaxResponseBody + 1, wantErr: true},
	} {
		body := strings.Repeat("x", tc.size)
		c := &bodyCap{max: MaxResponseBody, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, ContentLength: -1, Body: readCloser{strings.NewReader(body)}, Request: req}, nil
		})}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://registry.example/v2/", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		b, err := io.ReadAll(resp.Body)
		if (err != nil) != tc.wantErr {
			t.Errorf("reading %d bytes: error %v, want error %v", tc.size, err, tc.wantErr)
		}
		if !tc.wantErr && len(b) != tc.size {
			t.Errorf("read %d bytes, want %d", len(b), tc.size)
		}
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
