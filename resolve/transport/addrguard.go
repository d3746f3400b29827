package transport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// AddrClass is the kind of network an address is on. Every class but
// public reaches something that a registry on the internet must not make
// digestpin send credentials to: the machine itself, its private network,
// or a cloud metadata service.
type AddrClass string

// The classes of address, from the one a registry is expected at to those
// no credential goes to unasked.
const (
	ClassPublic      AddrClass = "public"
	ClassLoopback    AddrClass = "loopback"
	ClassPrivate     AddrClass = "private"
	ClassLinkLocal   AddrClass = "link-local"
	ClassUnspecified AddrClass = "unspecified"
)

// ClassOf returns the class of a.
func ClassOf(a netip.Addr) AddrClass {
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return ClassUnspecified
	case a.IsLoopback():
		return ClassLoopback
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return ClassLinkLocal
	case a.IsPrivate():
		return ClassPrivate
	}
	return ClassPublic
}

// registryKey is the context key of the registry a request is made for.
type registryKey struct{}

// WithRegistry records in ctx that its requests are made for registry
// (host[:port]).
func WithRegistry(ctx context.Context, registry string) context.Context {
	return context.WithValue(ctx, registryKey{}, registry)
}

func registryFrom(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(registryKey{}).(string)
	return r, ok && r != ""
}

// addrGuard keeps a registry from sending digestpin, with its credentials,
// to another host on a network the registry itself is not on: a token
// realm (or a redirect) whose name resolves to a loopback, private,
// link-local or unspecified address is refused unless the registry has an
// address of that class too. go-containerregistry refuses such realms
// only when they are IP literals; a name ("localhost", or one that a
// hostile DNS answers with 127.0.0.1 or 169.254.169.254) went through.
//
// The check is made when connecting, on the addresses connected to: the
// host is looked up once, checked, and those very addresses are dialled,
// so a second DNS answer (DNS rebinding) is never used. Requests to the
// registry's own host name are not checked: the user named it.
type addrGuard struct {
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	classify func(netip.Addr) AddrClass
}

func newAddrGuard(o Options) *addrGuard {
	g := &addrGuard{lookup: LookupHost, classify: ClassOf}
	if o.Lookup != nil {
		g.lookup = o.Lookup
	}
	if o.Classify != nil {
		g.classify = o.Classify
	}
	return g
}

// LookupHost returns the addresses of host, which may be an IP literal.
func LookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a.WithZone("").Unmap()}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// addrError is a connection refused because of where it would go.
type addrError struct {
	host     string
	addr     netip.Addr
	class    AddrClass
	registry string
}

func (e *addrError) Error() string {
	return fmt.Sprintf("refused to connect to %s: it resolves to %s, a %s address, and registry %s is not on one", e.host, e.addr, e.class, e.registry)
}

// check returns an error when host (not the registry's own) resolves to
// an address of a class other than public that none of the registry's
// addresses has.
func (g *addrGuard) check(ctx context.Context, registry, host string, addrs []netip.Addr) error {
	regHost := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		regHost = h
	}
	if strings.EqualFold(strings.Trim(regHost, "[]"), strings.Trim(host, "[]")) {
		return nil
	}
	var have map[AddrClass]bool
	for _, a := range addrs {
		c := g.classify(a)
		if c == ClassPublic {
			continue
		}
		if have == nil {
			regAddrs, err := g.lookup(ctx, strings.Trim(regHost, "[]"))
			if err != nil {
				return fmt.Errorf("refused to connect to %s: looking up registry %s: %w", host, registry, err)
			}
			have = map[AddrClass]bool{}
			for _, ra := range regAddrs {
				have[g.classify(ra)] = true
			}
		}
		if !have[c] {
			return &addrError{host: host, addr: a, class: c, registry: registry}
		}
	}
	return nil
}

// wrapDial returns a dial function that checks and dials the addresses of
// the host itself, through dial.
func (g *addrGuard) wrapDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		registry, ok := registryFrom(ctx)
		host, port, err := net.SplitHostPort(address)
		if !ok || err != nil {
			return dial(ctx, network, address)
		}
		if target, ok := ctx.Value(dialTargetKey{}).(string); ok && !strings.EqualFold(target, address) {
			// A connection to a proxy (HTTPS_PROXY): the proxy, not
			// digestpin, looks up and reaches the host, under its own
			// policy; the proxy is the operator's.
			return dial(ctx, network, address)
		}
		addrs, err := g.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		if err := g.check(ctx, registry, host, addrs); err != nil {
			return nil, err
		}
		// Dial the addresses checked, not the name again.
		var first error
		for _, a := range addrs {
			c, err := dial(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
		}
		if first == nil {
			first = fmt.Errorf("no address for %s", host)
		}
		return nil, first
	}
}

// guardDial makes t dial through g when it is an *http.Transport, and
// reports whether it could; t is changed in place (it is a clone).
func (g *addrGuard) guardDial(t *http.Transport) {
	dial := t.DialContext
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	t.DialContext = g.wrapDial(dial)
}

// addrGuardTransport checks each request before it is sent, for a
// transport whose dialling the guard cannot wrap (one given with
// WithTransport that is not an *http.Transport). It looks the host up
// apart from the dial, so it does not stop DNS rebinding.
type addrGuardTransport struct {
	next http.RoundTripper
	g    *addrGuard
}

// RoundTrip implements http.RoundTripper.
func (t *addrGuardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if registry, ok := registryFrom(req.Context()); ok {
		host := req.URL.Hostname()
		addrs, err := t.g.lookup(req.Context(), host)
		if err != nil {
			return nil, err
		}
		if err := t.g.check(req.Context(), registry, host, addrs); err != nil {
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

// dialTargetKey is the context key of the host:port a request is for, so
// that the dialler tells a connection to it from one to a proxy.
type dialTargetKey struct{}

// dialTarget records each request's host:port in its context.
type dialTarget struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t *dialTarget) RoundTrip(req *http.Request) (*http.Response, error) {
	port := req.URL.Port()
	if port == "" {
		port = "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
	}
	target := net.JoinHostPort(req.URL.Hostname(), port)
	return t.next.RoundTrip(req.WithContext(context.WithValue(req.Context(), dialTargetKey{}, target)))
}
