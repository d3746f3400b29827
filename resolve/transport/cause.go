package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/internal/redact"
	"github.com/digestpin/digestpin/resolution"
)

// Cause names the network failure in err in a few words, without URLs:
// a timeout, a refused or reset connection, DNS, a certificate that
// failed verification. Text from elsewhere is masked by red (nil masks
// nothing) and made one line. An option that would help is named as ctx
// names it (resolution.OptionName).
func Cause(ctx context.Context, err error, red *redact.Redactor) string {
	var he *HungError
	if errors.As(err, &he) {
		return he.Error()
	}
	if c := TLSCause(ctx, err, red); c != "" {
		return c
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded before an answer"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "DNS: " + dns.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout: " + innermost(err).Error()
	}
	// Strip URLs that wrappers put in front: keep the innermost message
	// that is not an *url.Error.
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return oneline.Cut(red, err.Error(), 2*oneline.MaxDetail)
}

// TLSCause describes a certificate that failed verification, or "". An
// option that would help is named as ctx names it.
func TLSCause(ctx context.Context, err error, red *redact.Redactor) string {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return fmt.Sprintf("TLS: certificate signed by an unknown authority (add its CA with %s, or name the host with %s)", resolution.OptionName(ctx, "WithCAFiles"), resolution.OptionName(ctx, "WithInsecureRegistries"))
	}
	var hn x509.HostnameError
	if errors.As(err, &hn) {
		return "TLS: " + hn.Error()
	}
	var ci x509.CertificateInvalidError
	if errors.As(err, &ci) {
		return "TLS: " + ci.Error()
	}
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return "TLS: " + oneline.Cut(red, ve.Error(), oneline.MaxDetail)
	}
	return ""
}

// IsTLSError reports whether err is a certificate that failed
// verification: a set-up to fix, or someone in between, never a registry
// that is merely down.
func IsTLSError(err error) bool {
	var (
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
		ve *tls.CertificateVerificationError
	)
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &ve)
}

// innermost unwraps err as far as it goes.
func innermost(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
