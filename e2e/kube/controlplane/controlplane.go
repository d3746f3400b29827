//go:build linux

package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Binaries are the control plane's binaries, in the folder DIGESTPIN_TEST_KUBE names.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// controllers are the controllers kube-controller-manager runs: those that
// make ReplicaSets and ControllerRevisions, those that make the Jobs of a
// CronJob and the Pods of a Job (which stay Pending: no kubelet), and the
// one that gives each namespace its default ServiceAccount (readiness
// waits for it).
const controllers = "deployment,replicaset,statefulset,daemonset,job,cronjob,serviceaccount"

// Config says how to start a control plane. The zero value of a
// field means its default.
type Config struct {
	Bin string // the folder with Binaries
	Dir string // where its files go: certificates, kubeconfig, etcd data, logs

	// Ports on 127.0.0.1; 0 picks a free one.
	EtcdPort, EtcdPeerPort, APIPort int
	EtcdDataDir                     string   // default Dir/etcd
	APIServerArgs                   []string // added to kube-apiserver's flags

	// Started is told each process it starts, for tests of the harness.
	Started func(name string, pid int)
	// Timeout bounds the whole start (default 90 s).
	Timeout time.Duration
}

// Cluster is a running control plane. Stop ends it.
type Cluster struct {
	Dir        string
	Server     string       // https://127.0.0.1:port
	Kubeconfig string       // a kubeconfig with Token, for kubectl and clients
	Kubectl    string       // the kubectl binary of Binaries
	Token      string       // a static token of a user in system:masters
	Client     *http.Client // trusts the cluster's CA
	Version    string       // what kube-apiserver reports, e.g. v1.37.2
	Startup    time.Duration
	procs      []*Proc // in start order
}

// Proc is one process the harness started (Start, or Run for a test's
// own servers), in a process group of its own. Stop ends it.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
}

// Start starts etcd, kube-apiserver and kube-controller-manager on
// loopback and waits until they are ready. On any failure it stops what it
// started and returns one line naming what failed: a missing binary, a
// port in use, a process that exited before it was ready (with the line of
// its log that says why), or one that did not become ready in time.
//
// Ports it picks itself (those left 0) are free when picked, but another
// process on the machine can take one before etcd or kube-apiserver binds
// it: when a process it started says "address already in use", Start
// tries again with new ports, up to three times in all.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	picked := cfg.EtcdPort == 0 && cfg.EtcdPeerPort == 0 && cfg.APIPort == 0 && cfg.EtcdDataDir == ""
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, cfg)
		if err == nil || !picked || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
		// etcd may have begun its data folder.
		if rerr := os.RemoveAll(filepath.Join(cfg.Dir, "etcd")); rerr != nil {
			return nil, fmt.Errorf("%w (and removing etcd's data to try again: %w)", err, rerr)
		}
	}
}

// start is one attempt of Start.
func start(ctx context.Context, cfg Config) (*Cluster, error) {
	begin := time.Now()
	if cfg.Timeout == 0 {
		cfg.Timeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	// First, everything that can fail without a process: the binaries,
	// the ports, the files.
	for _, b := range Binaries {
		p := filepath.Join(cfg.Bin, b)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("control plane binary %s is missing: no executable %s (make kube-tools builds it)", b, p)
		}
	}
	ports := []struct {
		what string
		p    *int
	}{{"etcd client", &cfg.EtcdPort}, {"etcd peer", &cfg.EtcdPeerPort}, {"kube-apiserver", &cfg.APIPort}}
	for _, port := range ports {
		if *port.p == 0 {
			p, err := FreePort()
			if err != nil {
				return nil, fmt.Errorf("finding a free port on 127.0.0.1 for %s: %w", port.what, err)
			}
			*port.p = p
		}
		if err := portFree(*port.p); err != nil {
			return nil, fmt.Errorf("%s port 127.0.0.1:%d is in use: %w", port.what, *port.p, err)
		}
	}
	c := &Cluster{Dir: cfg.Dir, Kubectl: filepath.Join(cfg.Bin, "kubectl")}
	if err := c.writeFiles(cfg.APIPort); err != nil {
		return nil, err
	}
	if cfg.EtcdDataDir == "" {
		cfg.EtcdDataDir = filepath.Join(cfg.Dir, "etcd")
	}

	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()

	// Next, etcd, on plain HTTP: it listens on loopback only, and only
	// kube-apiserver talks to it.
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdPeerPort)
	etcd, err := c.start(cfg, "etcd",
		"--name=default",
		"--data-dir="+cfg.EtcdDataDir,
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync", // a throw-away store: no fsync, far faster tests
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, etcd, http.DefaultClient, etcdURL+"/health", nil); err != nil {
		return nil, err
	}

	// Then the API server: TLS with the local CA, the static token, RBAC
	// (the token's user is in system:masters). The service range is only
	// what Services get their addresses from; nothing here ever dials one.
	c.Server = fmt.Sprintf("https://127.0.0.1:%d", cfg.APIPort)
	api, err := c.start(cfg, "kube-apiserver", append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cfg.APIPort),
		"--tls-cert-file=" + c.File("apiserver.crt"),
		"--tls-private-key-file=" + c.File("apiserver.key"),
		"--token-auth-file=" + c.File("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + c.Server,
		"--service-account-key-file=" + c.File("sa.pub"),
		"--service-account-signing-key-file=" + c.File("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}, cfg.APIServerArgs...)...)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, api, c.Client, c.Server+"/readyz", nil); err != nil {
		return nil, err
	}
	var version struct{ GitVersion string }
	if err := c.GetJSON(ctx, "/version", &version); err != nil {
		return nil, fmt.Errorf("kube-apiserver: reading /version: %w", err)
	}
	c.Version = version.GitVersion

	// Last, the controllers. kube-controller-manager serves nothing here
	// (--secure-port=0); it is ready when its serviceaccount controller has
	// given the default namespace its ServiceAccount.
	kcm, err := c.start(cfg, "kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		"--controllers="+controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, kcm, c.Client, c.Server+"/api/v1/namespaces/default/serviceaccounts/default", c.Authorize); err != nil {
		return nil, err
	}
	c.Startup = time.Since(begin)
	ok = true
	return c, nil
}

// File returns the path of one of the cluster's files.
func (c *Cluster) File(name string) string { return filepath.Join(c.Dir, name) }

// writeFiles writes the certificates, the token file and the kubeconfig.
func (c *Cluster) writeFiles(apiPort int) error {
	// A CA, the API server's certificate for loopback, and the service
	// account signing key, all made here for this run.
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "digestpin-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parsing the CA certificate: %w", err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the API server key: %w", err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("creating the API server certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the service account key: %w", err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return fmt.Errorf("encoding the API server key: %w", err)
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return fmt.Errorf("encoding the service account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding the service account public key: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("generating the token: %w", err)
	}
	c.Token = hex.EncodeToString(tok)
	c.Kubeconfig = c.File("kubeconfig")
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	files := map[string][]byte{
		"ca.crt":        pemBlock("CERTIFICATE", caDER),
		"apiserver.crt": pemBlock("CERTIFICATE", srvDER),
		"apiserver.key": pemBlock("EC PRIVATE KEY", srvKeyDER),
		"sa.key":        pemBlock("EC PRIVATE KEY", saKeyDER),
		"sa.pub":        pemBlock("PUBLIC KEY", saPubDER),
		// token,user,uid,"group"
		"tokens.csv": fmt.Appendf(nil, "%s,digestpin-test,digestpin-test,\"system:masters\"\n", c.Token),
		"kubeconfig": fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
  - name: test
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: test
    user:
      token: %s
contexts:
  - name: test
    context:
      cluster: test
      user: test
      namespace: default
current-context: test
`, server, c.File("ca.crt"), c.Token),
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.Dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(c.File(name), b, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c.Client = &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		Timeout:   5 * time.Second,
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// start starts one of the control plane's binaries.
func (c *Cluster) start(cfg Config, name string, args ...string) (*Proc, error) {
	p, err := c.Run(name, filepath.Join(cfg.Bin, name), nil, args...)
	if err == nil && cfg.Started != nil {
		cfg.Started(name, p.cmd.Process.Pid)
	}
	return p, err
}

// Run starts bin as one more process of the cluster, called name: in a
// process group of its own, in the folder Dir, with the environment env
// (nil: this process's), its output into File(name+".log"). Stop
// ends it with the control plane, the last started first. The kernel
// kills it if the test binary dies (Pdeathsig: a test timeout's panic runs
// no cleanup).
func (c *Cluster) Run(name, bin string, env []string, args ...string) (*Proc, error) {
	logPath := c.File(name + ".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: creating its log: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: starting: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// WaitReady polls url until it answers 200 (auth, when not nil, adds
// credentials to each request), p exits, or ctx ends; the error says which,
// with the line of p's log that says why.
func (c *Cluster) WaitReady(ctx context.Context, p *Proc, client *http.Client, url string, auth func(*http.Request)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if auth != nil {
			auth(req)
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			exit := "exit status 0"
			if p.err != nil {
				exit = p.err.Error()
			}
			return fmt.Errorf("%s exited before it was ready (%s): %s", p.name, exit, p.Why())
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready in time (%s answered %s): %s", p.name, url, last, p.Why())
		case <-tick.C:
		}
	}
}

// Log returns the path of p's log: what it wrote to stdout and stderr.
func (p *Proc) Log() string { return p.log }

// Done is closed when p has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// failure is a log line that says why a process failed.
var failure = regexp.MustCompile(`(?i)\b(error|fatal|failed|panic|in use)\b`)

// Why returns the line of p's log that best says why it failed: the last
// line that names an error, else the last line.
func (p *Proc) Why() string {
	f, err := os.Open(p.log)
	if err != nil {
		return "no log: " + err.Error()
	}
	defer f.Close()
	var lastErr, last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		last = line
		if failure.MatchString(line) {
			lastErr = line
		}
	}
	if lastErr != "" {
		last = lastErr
	}
	// etcd logs JSON: its message and error, without the stack trace.
	var entry struct{ Msg, Error string }
	if strings.HasPrefix(last, "{") && json.Unmarshal([]byte(last), &entry) == nil && entry.Msg != "" {
		last = entry.Msg
		if entry.Error != "" {
			last += ": " + entry.Error
		}
	}
	if len(last) > 400 {
		last = last[:400] + "…"
	}
	if last == "" {
		return "its log " + p.log + " is empty"
	}
	return last
}

// Stop ends every process it started, the last started first: SIGTERM to
// its process group, SIGKILL after 10 s. It is safe to call twice.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		// Anything the process left in its group goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	c.procs = nil
}

// Authorize adds the token to req.
func (c *Cluster) Authorize(req *http.Request) { req.Header.Set("Authorization", "Bearer "+c.Token) }

// GetJSON GETs path from the API server into v.
func (c *Cluster) GetJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return err
	}
	c.Authorize(req)
	resp, err := c.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// Request sends body to path on the API server and returns the status and
// the answer.
func (c *Cluster) Request(method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, c.Server+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	c.Authorize(req)
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree returns an error when port on 127.0.0.1 cannot be listened on.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		var se *os.SyscallError
		if errors.As(err, &se) {
			return se
		}
		return err
	}
	return l.Close()
}

// RunOnFreePorts starts a server of the test's own on n ports that were
// free a moment ago and waits until it is ready: start starts it on ports
// and returns it with the URL that answers 200 once it is (plain HTTP on
// loopback). Another process on the machine (another suite's control
// plane) can take a port between the pick and the server's bind: when the
// server exits saying "address already in use", it is started again on
// new ports, up to three times in all, as Start does for its own. It
// returns every process it started, the ready one last.
func (c *Cluster) RunOnFreePorts(ctx context.Context, n int, start func(ports []int) (*Proc, string, error)) ([]*Proc, error) {
	var procs []*Proc
	for attempt := 1; ; attempt++ {
		ports := make([]int, n)
		for i := range ports {
			p, err := FreePort()
			if err != nil {
				return procs, fmt.Errorf("picking a free port: %w", err)
			}
			ports[i] = p
		}
		p, url, err := start(ports)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = c.WaitReady(wctx, p, &http.Client{Timeout: 5 * time.Second}, url, nil)
		cancel()
		if err == nil {
			return procs, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return procs, err
		}
	}
}
