package resolve

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// TestMaliciousRegistry resolves against registries that answer in bad
// faith. Whatever they send, the resolver ends within its per-request
// timeout, holds at most transport.MaxResponseBody of any answer, and returns either
// a well-formed digest of what was served or a one-line error.
func TestMaliciousRegistry(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	// manifests answers manifest requests with fn; HEAD gets 405 unless
	// head is set, so that the resolver reads the GET answer.
	manifests := func(head bool, fn func(w http.ResponseWriter, r *http.Request)) testregistry.Handler {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			if r.Method == http.MethodHead && !head {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return true
			}
			fn(w, r)
			return true
		}
	}
	// endless writes chunks of b until the client goes away, pausing
	// between them.
	endless := func(b []byte, pause time.Duration) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.WriteHeader(http.StatusOK)
			for {
				if _, err := w.Write(b); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(pause):
				}
			}
		}
	}
	for _, tc := range []struct {
		desc    string
		handler testregistry.Handler
		// want is a substring of the error; "" means success with the
		// digest, or that of the image pushed.
		want, digest string
		// timeout bounds each request when it is not the default: the
		// size cap must trip first even on a busy machine under -race.
		timeout time.Duration
	}{
		{
			desc: "a malformed digest header: the GET answer is hashed instead",
			handler: func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodHead || !strings.Contains(r.URL.Path, "/manifests/") {
					return false
				}
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Header().Set("Content-Length", "100")
				w.Header().Set("Docker-Content-Digest", "sha256:../../etc/passwd\nkind: Secret")
				w.WriteHeader(http.StatusOK)
				return true
			},
		},
		{
			desc: "a digest header in upper case, on HEAD and GET",
			handler: manifests(true, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("A", 64))
				w.WriteHeader(http.StatusOK)
				fmt.Fprint(w, "{}")
			}),
			// HEAD's digest does not parse, so the GET answer is hashed:
			// the digest is that of what was served, not the header's.
			digest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
		},
		{
			desc: "a manifest that says it is huge",
			handler: manifests(false, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(1<<30))
				w.WriteHeader(http.StatusOK)
			}),
			want: "more than the 8388608 a registry answer may have",
		},
		{
			desc:    "a manifest that never ends",
			handler: manifests(false, endless([]byte(strings.Repeat("{", 64<<10)), 0)),
			want:    "goes on past 8388608 bytes",
			timeout: 20 * time.Second,
		},
		{
			desc:    "a manifest sent a byte at a time (slow loris)",
			handler: manifests(false, endless([]byte("{"), 50*time.Millisecond)),
			want:    "within 500ms",
		},
		{
			desc: "no answer at all",
			handler: manifests(true, func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			}),
			want: "within 500ms",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			want := reg.PushImage(t, "app:1")
			reg.Handle(tc.handler)
			perRequest := timeout
			if tc.timeout != 0 {
				perRequest = tc.timeout
			}
			r, _ := newTestResolver(t, WithRequestTimeout(perRequest))
			start := time.Now()
			if tc.digest != "" {
				want = v1.Hash{}
				if err := want.UnmarshalText([]byte(tc.digest)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := resolveString(t, r, reg.Ref("app:1"))
			// Each of at most transport.DefaultAttempts tries is bounded by the
			// timeout; the bound leaves room for a busy machine.
			if took := time.Since(start); took > 10*perRequest*regtransport.DefaultAttempts {
				t.Errorf("Resolve took %s", took)
			}
			switch {
			case tc.want == "" && (err != nil || got != want.String()):
				t.Errorf("Resolve = %s, %v, want %s", got, err, want)
			case tc.want != "" && err == nil:
				t.Errorf("Resolve = %s, want an error mentioning %q", got, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Resolve error = %q, want it to contain %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("Resolve error = %q, want one line", err)
			}
		})
	}
}
