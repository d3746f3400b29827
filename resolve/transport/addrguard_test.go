package transport

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// TestAddrGuardCheck checks the rule on its own: a host other than the
// registry's may be on a network other than the internet only when the
// registry is on one of that class too.
func TestAddrGuardCheck(t *testing.T) {
	t.Parallel()
	g := &addrGuard{classify: ClassOf, lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, err := netip.ParseAddr(host); err == nil {
			return []netip.Addr{a}, nil
		}
		m := map[string][]string{
			"public.example":   {"203.0.113.7"},
			"private.example":  {"10.0.0.5"},
			"loopback.example": {"127.0.0.1", "::1"},
			"mixed.example":    {"203.0.113.8", "169.254.169.254"},
		}
		var out []netip.Addr
		for _, s := range m[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if out == nil {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}}
	for _, tc := range []struct {
		registry, host string
		addrs          []string
		ok             bool
	}{
		{"public.example", "auth.example", []string{"203.0.113.9"}, true},
		{"public.example", "localhost", []string{"127.0.0.1"}, false},
		{"public.example", "metadata", []string{"169.254.169.254"}, false},
		{"public.example", "zero", []string{"0.0.0.0"}, false},
		{"public.example", "intranet", []string{"10.1.2.3"}, false},
		{"public.example", "v6-private", []string{"fd00:ec2::254"}, false},
		{"public.example", "mapped", []string{"::ffff:127.0.0.1"}, false},
		// Any one address of the host is enough to refuse it.
		{"public.example", "two-faced", []string{"203.0.113.9", "127.0.0.1"}, false},
		{"private.example:5000", "auth.intranet", []string{"10.9.9.9"}, true},
		{"private.example:5000", "localhost", []string{"127.0.0.1"}, false},
		{"loopback.example:5000", "localhost", []string{"127.0.0.1"}, true},
		{"127.0.0.1:5000", "localhost", []string{"::1"}, true},
		{"mixed.example", "metadata", []string{"169.254.169.254"}, true},
		// The registry's own host name is the user's choice.
		{"localhost:5000", "localhost", []string{"127.0.0.1"}, true},
	} {
		var addrs []netip.Addr
		for _, a := range tc.addrs {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		err := g.check(context.Background(), tc.registry, tc.host, addrs)
		if (err == nil) != tc.ok {
			t.Errorf("check(registry %s, %s at %v) = %v, want ok %t", tc.registry, tc.host, tc.addrs, err, tc.ok)
		}
	}
}

// TestAddrGuardLeavesProxiesAlone dials through the guard for a request
// whose connection goes to a proxy on loopback: the proxy reaches the
// host, under its own policy, so the guard does not refuse the proxy's
// address, while a direct connection to the same host is refused.
func TestAddrGuardLeavesProxiesAlone(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	g := &addrGuard{lookup: LookupHost, classify: func(a netip.Addr) AddrClass {
		if a == netip.MustParseAddr("203.0.113.7") {
			return ClassPublic
		}
		return ClassOf(a)
	}}
	d := &net.Dialer{}
	dial := g.wrapDial(d.DialContext)
	ctx := WithRegistry(context.Background(), "203.0.113.7")
	// Direct: the request is for the loopback address itself.
	direct := context.WithValue(ctx, dialTargetKey{}, l.Addr().String())
	if c, err := dial(direct, "tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Errorf("direct dial of %s for a public registry succeeded, want it refused", l.Addr())
	}
	// Through a proxy: the request is for another host.
	proxied := context.WithValue(ctx, dialTargetKey{}, "auth.example:443")
	c, err := dial(proxied, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial of the proxy %s: %v", l.Addr(), err)
	}
	c.Close()
}
