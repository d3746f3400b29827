// Package testgit serves git repositories over smart HTTP on loopback for
// tests: the real git http-backend behind net/http/cgi, so that the
// clients under test (Argo CD's repo server, Flux's source-controller) clone
// and fetch as they would from any git host. Each repository has a work
// tree to commit in, whose commits are pushed to the served one.
package testgit

import (
	"bytes"
	"context"
	"net/http/cgi" //nolint:gosec // git http-backend for tests, on a Go far past 1.6.3
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Env makes commits independent of the developer's git settings: no
// global or system configuration, a fixed author and committer.
var Env = []string{
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=ci", "GIT_AUTHOR_EMAIL=ci@example.com",
	"GIT_COMMITTER_NAME=ci", "GIT_COMMITTER_EMAIL=ci@example.com",
}

// Server serves the bare repositories under a folder.
type Server struct {
	// URL is the server's base URL: http://127.0.0.1:port.
	URL  string
	root string
}

// Start serves the bare repositories under root (made if missing) until
// the test ends.
func Start(t testing.TB, root string) *Server {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, root: root}
}

// Repo is a repository on the server and a work tree to commit in.
type Repo struct {
	URL  string // the repository's clone URL
	Bare string // the served repository's folder, for a local clone (file://)
	Work string // a work tree, whose origin is Bare
}

// Repo creates the bare repository name.git, on branch main, and a work
// tree for it.
func (s *Server) Repo(t testing.TB, name string) *Repo {
	t.Helper()
	bare := filepath.Join(s.root, name+".git")
	if err := os.MkdirAll(bare, 0o750); err != nil {
		t.Fatal(err)
	}
	Git(t, bare, "init", "--quiet", "--bare", "--initial-branch=main")
	work := t.TempDir()
	Git(t, work, "init", "--quiet", "--initial-branch=main")
	Git(t, work, "remote", "add", "origin", bare)
	return &Repo{URL: s.URL + "/" + name + ".git", Bare: bare, Work: work}
}

// Commit writes files into r's work tree (path → content; "" removes the
// file), commits them on main, pushes, and returns the commit.
func (r *Repo) Commit(t testing.TB, msg string, files map[string]string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(r.Work, p)
		if content == "" {
			_ = os.Remove(full)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil { //nolint:gosec // a repository's files
			t.Fatal(err)
		}
	}
	Git(t, r.Work, "add", "-A")
	Git(t, r.Work, "commit", "--quiet", "--allow-empty", "-m", msg)
	Git(t, r.Work, "push", "--quiet", "origin", "HEAD:main")
	return Git(t, r.Work, "rev-parse", "HEAD")
}

// Git runs git with args in dir, with Env, and returns its output without
// the trailing newline; an error fails the test with git's stderr.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}
