//go:build linux

package flux

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/digestpin/digestpin/e2e/kube/controlplane"
	"github.com/digestpin/digestpin/internal/testfiles"
)

// sigstoreStack is a private Sigstore on loopback, the services a
// keyless signature needs, built from sigstore/go.mod (make
// sigstore-tools): Fulcio with its ephemeral CA, which puts the
// certificate transparency log's timestamp (TesseraCT, on POSIX storage)
// into each certificate; Rekor's transparency log on Trillian and
// PostgreSQL; and an OIDC issuer of the test's own, which Fulcio trusts as
// a CI system's. TrustedRoot is the trusted_root.json of it all, as an
// OCIRepository's spec.verify.trustedRootSecretRef and cosign
// --trusted-root read it.
type sigstoreStack struct {
	FulcioURL, RekorURL, Issuer string
	TrustedRoot                 []byte
	issuerKey                   *ecdsa.PrivateKey
	versions                    map[string]string
}

// sigstoreTools are the services' names, module paths and the binaries
// built from them (make sigstore-tools).
var sigstoreTools = []struct{ name, module, bin string }{
	{"Fulcio", "github.com/sigstore/fulcio", "fulcio"},
	{"Rekor", "github.com/sigstore/rekor", "rekor-server"},
	{"Trillian", "github.com/google/trillian", "trillian_log_server"},
	{"TesseraCT", "github.com/transparency-dev/tesseract", "posix"},
}

// startSigstore starts the services as processes of c, in dir; they stop
// with it.
func startSigstore(t *testing.T, c *controlplane.Cluster, dir string) *sigstoreStack {
	t.Helper()
	bin := tool(t, "DIGESTPIN_TEST_SIGSTORE")
	begin := time.Now()
	s := &sigstoreStack{versions: map[string]string{}}
	for _, tl := range sigstoreTools {
		s.versions[tl.bin] = moduleIn(t, "sigstore", tl.module).Version
	}
	s.startIssuer(t)
	pgURI := startPostgres(t, c, filepath.Join(dir, "postgres"), moduleIn(t, "sigstore", "github.com/google/trillian").Dir)

	// Trillian: the log server Rekor talks to, and the signer that
	// sequences what it is given.
	trillian := func(name string) string {
		var rpc string
		c.StartOnFreePortsT(t, name, 2, func(ports []int) (*controlplane.Proc, string, error) {
			rpc = "127.0.0.1:" + strconv.Itoa(ports[0])
			args := []string{"--storage_system=postgresql", "--quota_system=postgresql", "--postgresql_uri=" + pgURI,
				"--rpc_endpoint=" + rpc, "--http_endpoint=127.0.0.1:" + strconv.Itoa(ports[1])}
			if name == "trillian_log_signer" {
				args = append(args, "--force_master", "--sequencer_interval=50ms", "--batch_size=100")
			}
			p, err := c.Run(name, filepath.Join(bin, name), nil, args...)
			return p, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1]), err
		})
		return rpc
	}
	logServer := trillian("trillian_log_server")
	trillian("trillian_log_signer")
	host, port, err := net.SplitHostPort(logServer)
	if err != nil {
		t.Fatal(err)
	}

	// Rekor, with a signing key made at start, creating its tree in
	// Trillian; no search index (it would need Redis).
	c.StartOnFreePortsT(t, "rekor-server", 1, func(ports []int) (*controlplane.Proc, string, error) {
		s.RekorURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := c.Run("rekor-server", filepath.Join(bin, "rekor-server"), nil, "serve",
			"--host=127.0.0.1", "--port="+strconv.Itoa(ports[0]),
			"--trillian_log_server.address="+host, "--trillian_log_server.port="+port,
			"--rekor_server.signer=memory", "--log_type=prod",
			"--enabled_api_endpoints=getLogInfo,getPublicKey,getLogProof,createLogEntry,getLogEntryByIndex,getLogEntryByUUID")
		return p, s.RekorURL + "/api/v1/log", err
	})

	// Fulcio, whose CA is made at start; the CT log's port is picked
	// first, since the log trusts Fulcio's root and Fulcio names the log.
	ctPort, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctURL := "http://127.0.0.1:" + strconv.Itoa(ctPort)
	config := filepath.Join(dir, "fulcio-config.json")
	writeJSON(t, config, map[string]any{"OIDCIssuers": map[string]any{
		s.Issuer: map[string]string{"IssuerURL": s.Issuer, "ClientID": "sigstore", "Type": "email"},
	}})
	c.StartOnFreePortsT(t, "fulcio", 3, func(ports []int) (*controlplane.Proc, string, error) {
		s.FulcioURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := c.Run("fulcio", filepath.Join(bin, "fulcio"), nil, "serve",
			"--ca=ephemeralca", "--ct-log-url="+ctURL, "--config-path="+config,
			"--host=127.0.0.1", "--port="+strconv.Itoa(ports[0]),
			"--grpc-host=127.0.0.1", "--grpc-port="+strconv.Itoa(ports[1]),
			"--metrics-port="+strconv.Itoa(ports[2]),
			"--legacy-unix-domain-socket="+filepath.Join(dir, "fulcio-legacy.sock"))
		return p, s.FulcioURL + "/api/v2/trustBundle", err
	})
	var bundle struct {
		Chains []struct{ Certificates []string }
	}
	getJSON(t, s.FulcioURL+"/api/v2/trustBundle", &bundle)
	if len(bundle.Chains) == 0 || len(bundle.Chains[0].Certificates) == 0 {
		t.Fatalf("Fulcio's trust bundle holds no chain: %+v", bundle)
	}
	var chain []*x509.Certificate
	var rootsPEM []byte
	for _, p := range bundle.Chains[0].Certificates {
		blk, _ := pem.Decode([]byte(p))
		if blk == nil {
			t.Fatalf("Fulcio's trust bundle: no PEM in %q", p)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, cert)
		rootsPEM = append(rootsPEM, p...)
	}
	roots := filepath.Join(dir, "fulcio-roots.pem")
	if err := os.WriteFile(roots, rootsPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	// TesseraCT, the CT log Fulcio submits its precertificates to.
	ctKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(ctKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "ctlog-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	ct, err := c.Run("tesseract", filepath.Join(bin, "posix"), nil,
		"--http_endpoint=127.0.0.1:"+strconv.Itoa(ctPort), "--origin=ctlog.digestpin.test",
		"--storage_dir="+filepath.Join(dir, "ctlog"), "--private_key="+keyFile, "--roots_pem_file="+roots,
		"--checkpoint_interval=200ms", "--batch_max_age=50ms")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx, ct, http.DefaultClient, ctURL+"/ct/v1/get-roots", nil); err != nil {
		t.Fatal(err)
	}

	// The trusted root: Fulcio's chain, the CT log's key, Rekor's key
	// (and URL, where source-controller finds Rekor).
	rekorPEM := getBody(t, s.RekorURL+"/api/v1/log/publicKey")
	blk, _ := pem.Decode(rekorPEM)
	if blk == nil {
		t.Fatalf("Rekor's public key is no PEM: %q", rekorPEM)
	}
	rekorKey, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	logOf := func(url string, key any) map[string]*root.TransparencyLog {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		id := sha256.Sum256(der)
		return map[string]*root.TransparencyLog{fmt.Sprintf("%x", id): {
			BaseURL: url, ID: id[:], ValidityPeriodStart: start,
			HashFunc: crypto.SHA256, PublicKey: key, SignatureHashFunc: crypto.SHA256,
		}}
	}
	ca := &root.FulcioCertificateAuthority{Root: chain[len(chain)-1], Intermediates: chain[:len(chain)-1], ValidityPeriodStart: start, URI: s.FulcioURL}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{ca},
		logOf(ctURL, &ctKey.PublicKey), nil, logOf(s.RekorURL, rekorKey))
	if err != nil {
		t.Fatal(err)
	}
	if s.TrustedRoot, err = tr.MarshalJSON(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Sigstore (fulcio %s, rekor %s, trillian %s, tesseract %s) ready in %.1f s",
		s.versions["fulcio"], s.versions["rekor-server"], s.versions["trillian_log_server"], s.versions["posix"], time.Since(begin).Seconds())
	return s
}

// startIssuer serves an OIDC issuer on loopback, as a CI system's: its
// discovery document and its key set, for the tokens Token signs.
func (s *sigstoreStack) startIssuer(t *testing.T) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s.issuerKey = key
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.Issuer = srv.URL
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": s.Issuer, "jwks_uri": s.Issuer + "/keys",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &key.PublicKey, KeyID: "ci", Algorithm: string(jose.ES256), Use: "sig"},
		}})
	})
}

// Token is an identity token of the issuer for email, for the audience
// sigstore, valid for ttl (a negative ttl: expired).
func (s *sigstoreStack) Token(t *testing.T, email string, ttl time.Duration) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: s.issuerKey},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "ci"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims, err := json.Marshal(map[string]any{
		"iss": s.Issuer, "sub": email, "aud": "sigstore", "email": email, "email_verified": true,
		"iat": now.Add(-time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startPostgres starts a PostgreSQL server of Debian's package for
// Trillian in dir, on a Unix socket only, with Trillian's schema (from the
// module at trillianDir) in the database trillian, and returns Trillian's
// URI of it. PostgreSQL refuses to run as root: as root, it runs as the
// package's user postgres, which owns dir.
func startPostgres(t *testing.T, c *controlplane.Cluster, dir, trillianDir string) string {
	t.Helper()
	pgBin := postgresBin(t)
	sock := filepath.Join(dir, "sock")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	// As root, initdb and postgres run as postgres through setpriv, which
	// execs them: the process the cluster stops is PostgreSQL itself.
	run := func(name string, args ...string) (string, []string) {
		return filepath.Join(pgBin, name), args
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs its user postgres (Debian's postgresql package): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		// The test's folders above dir are root's, mode 0700.
		for p := filepath.Dir(dir); p != "/" && p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o711); err != nil { //nolint:gosec // G302: traversable, not readable, for postgres
				t.Fatal(err)
			}
		}
		run = func(name string, args ...string) (string, []string) {
			return "setpriv", append([]string{"--reuid=postgres", "--regid=postgres", "--init-groups", "--", filepath.Join(pgBin, name)}, args...)
		}
	}
	data := filepath.Join(dir, "data")
	bin, args := run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	if res := testfiles.Run(nil, nil, bin, args...); res.Err != nil {
		t.Fatalf("initdb: %v\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
	bin, args = run("postgres", "-D", data, "-k", sock, "-c", "listen_addresses=", "-c", "fsync=off")
	if path, err := exec.LookPath(bin); err == nil {
		bin = path
	}
	if _, err := c.Run("postgres", bin, nil, args...); err != nil {
		t.Fatal(err)
	}
	psql := func(args ...string) testfiles.Result {
		return testfiles.Run(nil, nil, filepath.Join(pgBin, "psql"), append([]string{"-h", sock, "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-q"}, args...)...)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		res := psql("-c", "create database trillian")
		if res.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL did not start: %v: %s", res.Err, res.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res := psql("-d", "trillian", "-f", filepath.Join(trillianDir, "storage", "postgresql", "schema", "storage.sql")); res.Err != nil {
		t.Fatalf("loading Trillian's schema: %v: %s", res.Err, res.Stderr)
	}
	return "postgresql:///trillian?host=" + sock + "&user=postgres"
}

// postgresBin is the folder of Debian's PostgreSQL server binaries.
func postgresBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DIGESTPIN_TEST_POSTGRES"); p != "" {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(m) == 0 {
		t.Fatal("no PostgreSQL server in /usr/lib/postgresql/*/bin: run scripts/test-deps.sh (make test does), or set DIGESTPIN_TEST_POSTGRES to the folder of initdb and postgres")
	}
	return filepath.Dir(m[len(m)-1])
}

// getBody GETs url and returns the body of its 200 answer.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback service of the test
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return b
}

// getJSON GETs url and decodes its JSON into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(getBody(t, url), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// writeJSON writes v as JSON to path.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
