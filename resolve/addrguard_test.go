package resolve

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// TestRealmOnAnotherNetworkIsRefused has a registry name its token realm
// by a host name that resolves to loopback. When the registry is itself
// on loopback, that is its own network and the realm is asked; when the
// registry is on the internet (played by classing its loopback address
// as public), the realm is refused before any connection, and the
// credentials go nowhere.
func TestRealmOnAnotherNetworkIsRefused(t *testing.T) {
	t.Parallel()
	const user, password = "frank", "SENTINEL-realm-pw"
	for _, tc := range []struct {
		desc           string
		registryPublic bool
		wantErr        string
	}{
		{desc: "registry on loopback, realm on loopback"},
		{desc: "registry on the internet, realm on loopback", registryPublic: true, wantErr: "a loopback address, and registry 127.0.0.1:"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			// The realm is "realm.test", on 127.0.0.2: another host than
			// the registry's, on loopback.
			ts := testregistry.NewTokenServerOn(t, "127.0.0.2:0", "realm.test", user, password)
			want := reg.PushImage(t, "app:1")
			reg.Handle(ts.Guard())
			realmPort := ts.Server.URL[strings.LastIndex(ts.Server.URL, ":")+1:]
			lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
				if host == "realm.test" {
					return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
				}
				return regtransport.LookupHost(ctx, host)
			}
			classify := func(a netip.Addr) regtransport.AddrClass {
				if tc.registryPublic && a == netip.MustParseAddr("127.0.0.1") {
					return regtransport.ClassPublic
				}
				return regtransport.ClassOf(a)
			}
			r, _ := newTestResolver(t,
				WithKeychain(staticKeychain{user, password}),
				WithInsecureRegistries("realm.test:"+realmPort),
				// The default dialler knows no "realm.test": the guard
				// dials the address it checked, never the name.
				withAddrHooks(lookup, classify))
			got, err := resolveString(t, r, reg.Ref("app:1"))
			if tc.wantErr == "" {
				if err != nil || got != want.String() {
					t.Fatalf("Resolve = %s, %v, want %s", got, err, want)
				}
				return
			}
			wantErr(t, err, reg.Ref("app:1"), "token request to realm.test:"+realmPort+": refused to connect to realm.test: it resolves to 127.0.0.2", tc.wantErr)
			if n := ts.Exchanges(); n != 0 {
				t.Errorf("token requests = %d, want 0: the credentials reached the realm", n)
			}
		})
	}
}
