package resolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/internal/redact"
	"github.com/digestpin/digestpin/resolve/credentials"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// resolveError is a reference that could not be resolved. Its message is
// one line that names the image, each registry or mirror tried and what it
// answered (the HTTP status, or the network cause), and how often it was
// asked. It unwraps to the failure of each try, so errors.As finds a
// *transport.Error and its StatusCode.
type resolveError struct {
	msg  string
	errs []error
	// mirror says, per entry of errs, whether a mirror failed it.
	mirror []bool
}

func (e *resolveError) Error() string   { return e.msg }
func (e *resolveError) Unwrap() []error { return e.errs }

// tryFailure is a try with what the trace saw, before it is formatted.
type tryFailure struct {
	c   candidate
	err error
	tr  *regtransport.Trace
}

// newError formats the failures of ref as one line, masking credentials.
func newError(ctx context.Context, ref name.Reference, fails []tryFailure, red *redact.Redactor) *resolveError {
	e := &resolveError{}
	var parts []string
	for _, f := range fails {
		e.errs = append(e.errs, f.err)
		e.mirror = append(e.mirror, f.c.mirror)
		s := f.c.ref.String()
		if f.c.repoOnly {
			s = f.c.ref.Context().String()
		}
		if f.c.mirror {
			s += " (mirror)"
		}
		s += ": " + describe(ctx, f.err, red)
		if sum := f.tr.Summary(); sum != "" {
			s += " (" + sum + ")"
		}
		// A refusal says whether credentials went with it, and whose.
		if refused(f.err) && f.c.sess != nil {
			if note := f.c.sess.credentialNote(); note != "" {
				s += "; " + note
			}
		}
		parts = append(parts, s)
	}
	msg := strings.Join(parts, "; then ")
	if len(fails) == 0 {
		msg = ref.String() + ": nothing tried"
	}
	e.msg = red.Redact(oneline.Of(msg, 0))
	return e
}

// describe says in a few words what went wrong in one try: the step and
// the HTTP status with the registry's own message, or the network cause.
// Text that is cut is masked by red first (nil masks nothing), so that a
// cut never leaves a part of a credential unmasked. An option that would
// help is named as ctx names it (resolution.OptionName).
func describe(ctx context.Context, err error, red *redact.Redactor) string {
	// A TLS failure first: the ping of a loopback registry also tries
	// plain HTTP, whose answer (400) would hide the cause.
	if c := regtransport.TLSCause(ctx, err, red); c != "" {
		return c
	}
	var te *transport.Error
	if errors.As(err, &te) {
		s := fmt.Sprintf("%d %s", te.StatusCode, http.StatusText(te.StatusCode))
		if d := registrySays(te, red); d != "" {
			s += " (" + d + ")"
		}
		if step := stepOf(te.Request); step != "" {
			s = step + ": " + s
		}
		return s
	}
	var pe *platformError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	// A cause that says why a request got no answer goes before the
	// first network error: a ping of a plain HTTP registry tries HTTPS
	// first, and that failure ("server gave HTTP response to HTTPS
	// client") would hide why plain HTTP failed. The ping's errors are
	// one value that errors.As searches in full.
	var he *regtransport.HungError
	var re *regtransport.RedirectError
	var ce credentialError
	switch {
	case errors.As(err, &ce):
		return ce.Error()
	case errors.As(err, &he):
		return withStep(err, he.Error())
	case errors.As(err, &re):
		return withStep(err, re.Error())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded before an answer"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		step := ""
		if u, perr := url.Parse(ue.URL); perr == nil {
			step = stepOf(&http.Request{Method: strings.ToUpper(ue.Op), URL: u})
		}
		if step != "" {
			return step + ": " + regtransport.Cause(ctx, ue.Err, red)
		}
		return regtransport.Cause(ctx, ue.Err, red)
	}
	return regtransport.Cause(ctx, err, red)
}

// withStep prefixes cause with the request of err that failed, when err
// names one.
func withStep(err error, cause string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			if step := stepOf(&http.Request{Method: strings.ToUpper(ue.Op), URL: u}); step != "" {
				return step + ": " + cause
			}
		}
	}
	return cause
}

// registrySays returns the registry's own words from an error answer.
func registrySays(te *transport.Error, red *redact.Redactor) string {
	var ds []string
	for _, d := range te.Errors {
		s := string(d.Code)
		if d.Message != "" {
			s += ": " + d.Message
		}
		ds = append(ds, s)
	}
	if len(ds) > 0 {
		return oneline.Cut(red, strings.Join(ds, "; "), oneline.MaxDetail)
	}
	// An unstructured body (an HTML error page, say) follows the status
	// text in the error message.
	msg := te.Error()
	marker := fmt.Sprintf("%d %s: ", te.StatusCode, http.StatusText(te.StatusCode))
	if i := strings.Index(msg, marker); i >= 0 {
		return oneline.Cut(red, msg[i+len(marker):], oneline.MaxDetail)
	}
	return ""
}

// stepOf names the registry request that failed, e.g. "HEAD manifest".
func stepOf(req *http.Request) string {
	if req == nil || req.URL == nil {
		return ""
	}
	p := req.URL.Path
	switch {
	case p == "/v2/" || p == "/v2":
		return "ping " + req.URL.Host
	case strings.Contains(p, "/manifests/"):
		return req.Method + " manifest"
	case strings.Contains(p, "/blobs/uploads/"):
		return req.Method + " blob upload" // a push (Resolver.Push)
	case strings.Contains(p, "/blobs/"):
		return req.Method + " config blob"
	}
	return "token request to " + req.URL.Host
}

// platformError is an image that exists but not for the platform asked.
// It is an answer, not a failure: no other mirror is asked.
type platformError struct{ msg string }

func (e *platformError) Error() string { return e.msg }

// credentialNote says, for a registry that refused a request, whether
// credentials were sent and where they came from, or where none were
// found: `credentials sent: user "alice" from docker config FILE`, `no
// credentials sent: none for HOST in pull secret FILE`. Never a secret.
func (s *session) credentialNote() string {
	// The lookup is over when a registry answered; a lookup still in
	// flight (another caller's) says nothing.
	select {
	case s.creds <- struct{}{}:
	default:
		return ""
	}
	cfg := s.cfg
	<-s.creds
	if cfg == nil {
		return "" // the request failed before credentials were looked up
	}
	if *cfg == (authn.AuthConfig{}) {
		note := "no credentials sent: none for " + s.reg.RegistryStr()
		switch where := credentials.Describe(s.kc, s.reg, false); {
		case strings.HasPrefix(where, "no docker config"):
			note += " (" + where + ")"
		case where != "":
			note += " in " + where
		}
		return note
	}
	note := "credentials sent"
	switch {
	case cfg.IdentityToken != "" || cfg.Username == "<token>":
		note += ": an identity token"
	case cfg.RegistryToken != "":
		note += ": a registry token"
	case cfg.Username != "":
		note += fmt.Sprintf(": user %q", cfg.Username)
	}
	if where := credentials.Describe(s.kc, s.reg, true); where != "" {
		note += " from " + where
	}
	return note
}

// Unavailable reports whether err, the failure of a resolution, says
// nothing about the image: each registry and mirror asked gave no answer
// (a connection refused, reset or timed out, a registry that hangs, 408,
// 429 or 5xx after their retries), or, for a mirror, had no such image
// (404: a cache that lacks it). A refusal (401, 403), a registry's 404, a
// redirect refused, a certificate not trusted, a malformed answer or an
// image without the platform asked say something about the image or the
// set-up, and are not. A stale answer may stand in only for an
// unavailable registry (CachingResolver with StaleIfError). An error with
// a method Unavailable() bool (a failure shared by another process) says
// it itself.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	// A failure whose cause is gone (another process's, shared through
	// a cache) says what it was.
	var u interface{ Unavailable() bool }
	if errors.As(err, &u) {
		return u.Unavailable()
	}
	var re *resolveError
	if errors.As(err, &re) && len(re.errs) > 0 {
		for i, e := range re.errs {
			if !unavailable(e, re.mirror[i]) {
				return false
			}
		}
		return true
	}
	return unavailable(err, false)
}

// unavailable is Unavailable for the failure of one try; mirror says
// whether a mirror was asked.
func unavailable(err error, mirror bool) bool {
	var (
		te *transport.Error
		pe *platformError
		ce credentialError
		rd *regtransport.RedirectError
		he *regtransport.HungError
		ue *url.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &pe), errors.As(err, &ce), errors.As(err, &rd), regtransport.IsTLSError(err):
		return false
	case errors.As(err, &te):
		switch te.StatusCode {
		case http.StatusRequestTimeout, http.StatusTooManyRequests:
			return true
		case http.StatusNotFound:
			return mirror
		}
		return te.StatusCode >= 500
	case errors.As(err, &he), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &ue), errors.As(err, &ne):
		return true
	}
	return false
}
