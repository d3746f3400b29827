// Package testredis runs a real redis-server on loopback for tests and
// benchmarks: a free port, no persistence, a temporary folder, optionally
// a password and TLS, killed when the test ends. The redis-server binary
// comes from the PATH (Debian's redis-server package; scripts/test-deps.sh
// installs it) or from DIGESTPIN_TEST_REDIS.
package testredis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// TB is the part of testing.TB the server needs; a *testing.T may also
// skip (see Start).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Options shape a server.
type Options struct {
	// Password, when set, is required of every client (requirepass).
	Password string
	// TLS serves TLS only, with a certificate for 127.0.0.1 signed by a
	// CA of the server's own (see Server.CAFile).
	TLS bool
	// Args are more redis-server arguments, e.g. "--rename-command",
	// "AUTH", "" for a server that refuses AUTH as an unknown command.
	Args []string
}

// Server is a running redis-server.
type Server struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string
	// CAFile is the PEM file of the CA that signed the server's
	// certificate, with TLS; "" without.
	CAFile string

	opts Options
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// binary returns the redis-server to run. Without one, a test that can
// skip is skipped outside CI; in CI (CI set) it fails, because CI must run
// everything.
func binary(t TB) string {
	t.Helper()
	if p := os.Getenv("DIGESTPIN_TEST_REDIS"); p != "" {
		return p
	}
	p, err := exec.LookPath("redis-server")
	if err == nil {
		return p
	}
	msg := "redis-server is not installed; run scripts/test-deps.sh (make test does), or set DIGESTPIN_TEST_REDIS"
	if s, ok := t.(interface{ Skip(args ...any) }); ok && os.Getenv("CI") == "" {
		s.Skip(msg)
	}
	t.Fatalf("%s", msg)
	return ""
}

// Start starts a server that is killed when the test ends. It returns
// once the server answers PING.
func Start(t TB, o Options) *Server {
	t.Helper()
	bin := binary(t)
	dir, err := os.MkdirTemp("", "testredis-")
	if err != nil {
		t.Fatalf("creating redis folder: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &Server{opts: o, dir: dir}
	if o.TLS {
		s.CAFile = writeCert(t, dir)
	}
	// redis-server cannot pick a free port itself and say which: take
	// one the kernel just handed out, and try again should another
	// process take it first.
	var last error
	for range 5 {
		if last = s.start(bin, freePort(t)); last == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("starting redis-server: %v", last)
	return nil
}

// start runs the server on port and waits until it answers.
func (s *Server) start(bin string, port int) error {
	args := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")}
	if s.opts.TLS {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", filepath.Join(s.dir, "server.crt"), "--tls-key-file", filepath.Join(s.dir, "server.key"),
			"--tls-ca-cert-file", s.CAFile, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	args = append(args, s.opts.Args...)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.cmd = exec.Command(bin, args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	c := s.Client(0)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on port %d exited: %s", port, lastLines(string(log), 3))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d does not answer: %w", port, err)
		}
	}
}

// URL returns the server's URL for database db, without the password:
// redis://127.0.0.1:port/db, or rediss:// with TLS.
func (s *Server) URL(db int) string {
	scheme := "redis"
	if s.opts.TLS {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://%s/%d", scheme, s.Addr, db)
}

// Client returns a client of database db, for a test to look at or
// change what the server holds. The caller closes it.
func (s *Server) Client(db int) *redis.Client {
	o := &redis.Options{Addr: s.Addr, DB: db, Password: s.opts.Password, Protocol: 2, DisableIdentity: true}
	if s.opts.TLS {
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(s.CAFile)
		pool.AppendCertsFromPEM(b)
		o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return redis.NewClient(o)
}

// Kill kills the server (SIGKILL) and waits for it to exit. It may be
// called more than once.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Pause stops the server (SIGSTOP): it keeps its connections and answers
// nothing, as an overloaded server does, until Resume. The test's end
// resumes it before killing it.
func (s *Server) Pause(t TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pausing redis-server: %v", err)
	}
	t.Cleanup(s.Resume)
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCert writes a CA (ca.crt) and a certificate for 127.0.0.1 that it
// signed (server.crt, server.key) into dir and returns the CA's file.
func writeCert(t TB, dir string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating CA key: %v", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testredis CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("creating CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("parsing CA certificate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating server key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("creating server certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("encoding server key: %v", err)
	}
	files := map[string][]byte{
		"ca.crt":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"server.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"server.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatalf("writing %s: %v", n, err)
		}
	}
	return filepath.Join(dir, "ca.crt")
}

// lastLines returns the last n lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
