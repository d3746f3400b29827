package testregistry

import (
	"encoding/pem"
	"net/http/httptest"
	"strings"
)

// TLS is a Registry that also serves HTTPS, with a self-signed
// certificate for 127.0.0.1. Both servers share one registry, one set of
// counters and one list of handlers: push over plain HTTP (PushImage,
// PushIndex), then resolve over HTTPS (TLSRef).
type TLS struct {
	*Registry
	// TLSServer is the HTTPS server.
	TLSServer *httptest.Server
}

// NewTLS starts a registry with an HTTPS front, both closed when the test
// ends.
func NewTLS(t TB) *TLS {
	t.Helper()
	reg := New(t)
	srv := httptest.NewUnstartedServer(reg.Server.Config.Handler)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &TLS{Registry: reg, TLSServer: srv}
}

// TLSHost returns the HTTPS server's "127.0.0.1:port".
func (r *TLS) TLSHost() string { return strings.TrimPrefix(r.TLSServer.URL, "https://") }

// TLSRef returns the full reference of repo (e.g. "app:1.0") on the HTTPS
// server.
func (r *TLS) TLSRef(repo string) string { return r.TLSHost() + "/" + repo }

// CertPEM returns the HTTPS server's certificate, PEM-encoded: the CA
// bundle that makes it trusted.
func (r *TLS) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.TLSServer.Certificate().Raw})
}
