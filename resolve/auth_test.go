package resolve

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/logs"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve/credentials"
)

// writeDockerConfig points DOCKER_CONFIG (and HOME) at a new folder whose
// config.json holds auths for host. The test must not be parallel.
func writeDockerConfig(t *testing.T, host, user, password string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", dir)
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestBasicAuthFromDockerConfig(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		password string
		wantErr  []string
	}{
		{desc: "right credentials", password: "s3cret"},
		{desc: "wrong credentials", password: "wrong", wantErr: []string{"HEAD manifest: 401 Unauthorized"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			want := reg.PushImage(t, "private/app:1")
			reg.ResetCounts()
			reg.Handle(testregistry.BasicAuth("alice", "s3cret"))
			writeDockerConfig(t, reg.Host(), "alice", tc.password)
			r, _ := newTestResolver(t, WithKeychain(authn.DefaultKeychain))
			got, err := resolveString(t, r, reg.Ref("private/app:1"))
			if tc.wantErr != nil {
				wantErr(t, err, append(tc.wantErr, reg.Ref("private/app:1"))...)
				if strings.Contains(err.Error(), tc.password) {
					t.Errorf("error %q shows the password", err)
				}
			} else if err != nil || got != want.String() {
				t.Errorf("Resolve = %s, %v, want %s", got, err, want)
			}
			// 401 is final: one HEAD, no retry, no GET.
			if diff := cmp.Diff([]int{1, 1, 0}, []int{reg.Count("GET ping"), reg.Count("HEAD manifests"), reg.Count("GET manifests")}); diff != "" {
				t.Errorf("ping, HEAD, GET (-want +got):\n%s", diff)
			}
		})
	}
}

// holdPing makes the registry's first ping wait until release is closed,
// so that a test can line up every resolution before the token exchange.
func holdPing(release <-chan struct{}) testregistry.Handler {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v2/" {
			once.Do(func() { <-release })
		}
		return false
	}
}

// pendingRepos returns how many repositories wait on reg's session.
func pendingRepos(r *Resolver) int {
	n := 0
	r.sessions.Range(func(_, v any) bool {
		s := v.(*session)
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
		return true
	})
	return n
}

func TestBearerOneTokenExchangePerRegistry(t *testing.T) {
	reg := testregistry.New(t)
	ts := testregistry.NewTokenServer(t, "bob", "hunter22")
	repos := []string{"team/a", "team/b", "team/c", "team/d", "team/e"}
	want := map[string]string{}
	for _, repo := range repos {
		want[reg.Ref(repo+":1")] = reg.PushImage(t, repo+":1").String()
	}
	later := reg.PushImage(t, "team/later:1")
	again := reg.PushImage(t, "team/a:2")
	reg.ResetCounts()
	release := make(chan struct{})
	reg.Handle(holdPing(release))
	reg.Handle(ts.Guard())
	// The registry's credentials are what its token server gets.
	writeDockerConfig(t, reg.Host(), "bob", "hunter22")
	r, _ := newTestResolver(t, WithKeychain(authn.DefaultKeychain), WithJobs(2))

	// First, every reference at once, as the renderer asks: their
	// repositories are announced before the first ping returns.
	wait := resolveAsync(t, r, want, 1)
	for deadline := time.Now().Add(5 * time.Second); pendingRepos(r) < len(repos); {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d repositories announced", pendingRepos(r), len(repos))
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if diff := cmp.Diff(want, wait()); diff != "" {
		t.Errorf("digests (-want +got):\n%s", diff)
	}
	var scopes []string
	for _, repo := range repos {
		scopes = append(scopes, "repository:"+repo+":pull")
	}
	if diff := cmp.Diff([][]string{scopes}, ts.Scopes()); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 5, 0}, []int{reg.Count("GET ping"), reg.Count("HEAD manifests"), reg.Count("GET manifests")}); diff != "" {
		t.Errorf("ping, HEAD, GET (-want +got):\n%s", diff)
	}

	// Then a new tag of a known repository reuses its token, and a new
	// repository gets one token of its own.
	for ref, d := range map[string]string{reg.Ref("team/a:2"): again.String(), reg.Ref("team/later:1"): later.String()} {
		if h, err := resolveString(t, r, ref); err != nil || h != d {
			t.Errorf("Resolve(%s) = %s, %v, want %s", ref, h, err, d)
		}
	}
	if diff := cmp.Diff([][]string{scopes, {"repository:team/later:pull"}}, ts.Scopes()); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}
	if n := reg.Count("GET ping"); n != 1 {
		t.Errorf("pings = %d, want 1", n)
	}
}

func TestBearerWrongCredentials(t *testing.T) {
	reg := testregistry.New(t)
	ts := testregistry.NewTokenServer(t, "bob", "hunter22")
	reg.PushImage(t, "team/a:1")
	reg.PushImage(t, "team/b:1")
	reg.Handle(ts.Guard())
	port := ts.Server.URL[strings.LastIndex(ts.Server.URL, ":")+1:]
	writeDockerConfig(t, reg.Host(), "bob", "wrong-password")
	r, _ := newTestResolver(t, WithKeychain(authn.DefaultKeychain))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, repo := range []string{"team/a:1", "team/b:1"} {
		wg.Go(func() { _, errs[i] = resolveString(t, r, reg.Ref(repo)) })
	}
	wg.Wait()
	for i, repo := range []string{"team/a:1", "team/b:1"} {
		wantErr(t, errs[i], reg.Ref(repo), "token request to localhost:"+port+": 401 Unauthorized (UNAUTHORIZED: bad credentials)")
	}
	// 401 from the token server is final; the two references may share
	// one request, or ask once each (and twice for a refused scope set).
	if n := ts.Exchanges(); n < 1 || n > 4 {
		t.Errorf("token requests = %d, want 1 to 4", n)
	}
}

func TestPullSecretKeychain(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	want := reg.PushImage(t, "private/app:1")
	reg.Handle(testregistry.BasicAuth("carol", "pa55word"))
	auth := base64.StdEncoding.EncodeToString([]byte("carol:pa55word"))
	file := filepath.Join(t.TempDir(), ".dockerconfigjson")
	secret := fmt.Sprintf(`{"auths": {"http://%s/v2/": {"auth": %q}}}`, reg.Host(), auth)
	if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := credentials.ReadPullSecret(file)
	if err != nil {
		t.Fatalf("ReadPullSecret: %v", err)
	}
	r, _ := newTestResolver(t, WithKeychain(authn.NewMultiKeychain(kc, anonymous)))
	if got, err := resolveString(t, r, reg.Ref("private/app:1")); err != nil || got != want.String() {
		t.Errorf("Resolve = %s, %v, want %s", got, err, want)
	}
}

// TestCredentialsNeverShow runs failing resolutions with a sentinel
// password, at every log level, against a registry that echoes the
// request's Authorization header in its error bodies, and looks for the
// password, the basic auth header and the bearer tokens everywhere.
func TestCredentialsNeverShow(t *testing.T) {
	const user, sentinel = "sentinel-user", "SENTINEL-p4ssw0rd-XYZZY"
	// The basic registry echoes the header back; so does the bearer one,
	// with the token.
	echo := func(code int) testregistry.Handler {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return true
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "you sent %q\nUser-Agent: %s", r.Header.Get("Authorization"), r.UserAgent())
			return true
		}
	}
	basic := testregistry.New(t)
	basic.PushImage(t, "app:1")
	basic.Handle(testregistry.BasicAuth(user, sentinel))
	basic.Handle(echo(http.StatusServiceUnavailable))
	basicWrong := testregistry.New(t)
	basicWrong.PushImage(t, "app:1")
	basicWrong.Handle(testregistry.BasicAuth(user, "another"))
	bearer := testregistry.New(t)
	ts := testregistry.NewTokenServer(t, user, sentinel)
	bearer.PushImage(t, "app:1")
	bearer.Handle(ts.Guard())
	bearer.Handle(echo(http.StatusForbidden))

	dir := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", dir)
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + sentinel))
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}, %q: {"auth": %q}, %q: {"auth": %q}}}`,
		basic.Host(), auth, basicWrong.Host(), auth, bearer.Host(), auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	var ggcr bytes.Buffer
	var ggcrMu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { ggcrMu.Lock(); defer ggcrMu.Unlock(); return ggcr.Write(p) })
	logs.Warn.SetOutput(w)
	logs.Progress.SetOutput(w)
	logs.Debug.SetOutput(w)
	t.Cleanup(func() {
		for _, l := range []*log.Logger{logs.Warn, logs.Progress, logs.Debug} {
			l.SetOutput(discard{})
		}
	})

	lb := &logBuffer{}
	r, err := New(WithLogf(lb.logf), withRetry(2, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ref := range []string{basic.Ref("app:1"), basicWrong.Ref("app:1"), bearer.Ref("app:1")} {
		_, err := r.Resolve(context.Background(), parseRef(t, ref))
		if err == nil {
			t.Fatalf("Resolve(%s) = nil error, want a failure", ref)
		}
		msgs = append(msgs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	ggcrMu.Lock()
	all := strings.Join(msgs, "\n") + "\n" + lb.String() + "\n" + ggcr.String()
	ggcrMu.Unlock()
	t.Logf("messages:\n%s", all)
	secrets := []string{sentinel, auth, "tok-"}
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("a credential (%.8s…) shows in the messages", s)
		}
	}
	// The echo did reach the messages, masked: the test can fail.
	if !strings.Contains(all, "[REDACTED]") {
		t.Errorf("no [REDACTED] in the messages: the echo did not reach them, so the test proves nothing")
	}
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "401 Unauthorized") }) {
		t.Errorf("no 401 among %q", msgs)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestBearerRefusedRepositoryFailsAlone resolves several repositories of
// one registry at once, many times over, through a token server that
// refuses every token request naming one of them. Only that repository
// may fail, whatever the order in which the resolutions reach the token
// server; wrong credentials (TestBearerWrongCredentials) still fail all.
func TestBearerRefusedRepositoryFailsAlone(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			ts := testregistry.NewTokenServer(t, "dave", "c0rrect-horse")
			repos := []string{"team/a", "team/b", "team/c", "team/secret", "team/d", "team/e"}
			want := map[string]string{}
			for _, repo := range repos {
				want[repo] = reg.PushImage(t, repo+":1").String()
			}
			want["team/secret"] = "DENIED"
			reg.Handle(ts.Guard())
			ts.Deny("team/secret", status)
			for i := range 50 {
				r, _ := newTestResolver(t, WithKeychain(staticKeychain{"dave", "c0rrect-horse"}))
				got := map[string]string{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				for _, repo := range repos {
					wg.Go(func() {
						h, err := resolveString(t, r, reg.Ref(repo+":1"))
						if err != nil {
							h = err.Error()
							if strings.Contains(h, "DENIED") {
								h = "DENIED"
							}
						}
						mu.Lock()
						defer mu.Unlock()
						got[repo] = h
					})
				}
				wg.Wait()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("run %d: resolutions (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}
