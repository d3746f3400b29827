package resolve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// staticKeychain gives the same credentials for every registry.
type staticKeychain struct{ user, password string }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return authn.FromConfig(authn.AuthConfig{Username: k.user, Password: k.password}), nil
}

// TestEchoedCredentialAtEveryOffset resolves against a registry that
// echoes the request's Authorization header after padding of every length
// from 0 to 200, in a plain text body and in a registry error message. The
// message is cut to a bounded length: the credential must be masked before
// the cut, or the cut leaves a part of it unmasked.
func TestEchoedCredentialAtEveryOffset(t *testing.T) {
	t.Parallel()
	const user, password = "echo-user", "SENTINEL-p4ssw0rd-XYZZY"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	reg := testregistry.New(t)
	reg.Handle(testregistry.BasicAuth(user, password))
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		_, tag, ok := strings.Cut(r.URL.Path, "/manifests/")
		if !ok {
			return false
		}
		if r.Method == http.MethodHead {
			// No digest on HEAD: the resolver GETs the manifest and
			// reads the error body.
			w.WriteHeader(http.StatusMethodNotAllowed)
			return true
		}
		form, n, _ := strings.Cut(tag, "-")
		pad, _ := strconv.Atoi(n)
		echo := strings.Repeat("x", pad) + "Authorization: " + r.Header.Get("Authorization")
		if form == "json" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "DENIED", "message": echo}}})
			return true
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, echo)
		return true
	})
	lb := &logBuffer{}
	r, err := New(WithKeychain(staticKeychain{user, password}), WithLogf(lb.logf))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []string
	var wg sync.WaitGroup
	for _, form := range []string{"raw", "json"} {
		for pad := 0; pad <= 200; pad++ {
			ref := reg.Ref(fmt.Sprintf("app:%s-%d", form, pad))
			wg.Go(func() {
				_, err := r.Resolve(context.Background(), parseRef(t, ref))
				if err == nil {
					t.Errorf("Resolve(%s) = nil error, want 403", ref)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				msgs = append(msgs, err.Error())
			})
		}
	}
	wg.Wait()
	masked := 0
	for _, msg := range append(msgs, lb.String()) {
		// Any 6 characters of the credential would be a part of it.
		for _, secret := range []string{password, basic} {
			for i := 0; i+6 <= len(secret); i++ {
				if strings.Contains(msg, secret[i:i+6]) {
					t.Fatalf("a part of a credential (%q) shows in %q", secret[i:i+6], msg)
				}
			}
		}
		if strings.Contains(msg, "[REDACTED]") {
			masked++
		}
	}
	// The echo reached the messages (masked): the test can fail.
	if masked == 0 {
		t.Errorf("no [REDACTED] in any message: the echo never reached them, so the test proves nothing")
	}
}
