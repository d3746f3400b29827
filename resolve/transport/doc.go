// Package transport is the HTTP layer under the registry protocol of
// package resolve, as go-containerregistry's transport is under its
// remote: New builds one http.RoundTripper from a base transport that
// checks where connections go (a token realm or a redirect to a
// loopback, private or link-local address is refused unless the
// registry is on one), verifies TLS (with extra CA bundles, skipped only
// for hosts named insecure), refuses plain HTTP except to loopback and
// those hosts, caps every answer, retries transient failures with
// backoff and jitter (honouring Retry-After) under a per-request
// timeout, pings each registry once (or not at all, when a PingStore
// keeps its answer from an earlier run), and stops at the 10th redirect.
//
// A request says which registry it is made for with WithRegistry, and
// collects its attempts in a Trace (WithTrace) for its error message;
// Cause and TLSCause say what went wrong in a few words. HungError is a
// registry that ran into the request timeout: the transport asks it no
// more.
//
// The layer knows nothing of credentials: it neither looks them up nor
// imports a keychain; it only shows the Redactor each Authorization
// header it sends, so that no message shows one.
package transport
