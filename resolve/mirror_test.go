package resolve

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

func TestParseMirror(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to string
		wantReg  string
		want     string // mirror as host/prefix
		wantErr  string
	}{
		{from: "docker.io", to: "mirror.example", wantReg: "index.docker.io", want: "mirror.example"},
		{from: "index.docker.io", to: "mirror.example:5000/hub/", wantReg: "index.docker.io", want: "mirror.example:5000/hub"},
		{from: "ghcr.io", to: "harbor.example/ghcr-proxy/deep", wantReg: "ghcr.io", want: "harbor.example/ghcr-proxy/deep"},
		{from: "registry.example:5000", to: "127.0.0.1:5001", wantReg: "registry.example:5000", want: "127.0.0.1:5001"},
		{from: "docker.io", to: "", wantErr: "both non-empty"},
		{from: "docker.io", to: "https://mirror.example", wantErr: "without a scheme"},
		{from: "docker.io/library", to: "mirror.example", wantErr: "is not a registry host"},
		{from: "docker.io", to: "mirror.example/UPPER", wantErr: "TO path"},
		{from: "docker.io", to: "bad host", wantErr: "TO host"},
	} {
		reg, m, err := parseMirror(tc.from, tc.to)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseMirror(%q, %q) error = %v, want one containing %q", tc.from, tc.to, err, tc.wantErr)
			}
			continue
		}
		if err != nil || reg != tc.wantReg || m.String() != tc.want {
			t.Errorf("parseMirror(%q, %q) = %q, %q, %v, want %q, %q", tc.from, tc.to, reg, m, err, tc.wantReg, tc.want)
		}
	}
}

func TestMirrorRefKeepsDockerHubLibrary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ref, to, want string
	}{
		{"nginx:1.27", "mirror.example", "mirror.example/library/nginx:1.27"},
		{"docker.io/nginx", "mirror.example/hub", "mirror.example/hub/library/nginx:latest"},
		{"bitnami/redis:7", "mirror.example/hub", "mirror.example/hub/bitnami/redis:7"},
		{"ghcr.io/org/app:v1", "harbor.example/ghcr", "harbor.example/ghcr/org/app:v1"},
	} {
		_, m, err := parseMirror("docker.io", tc.to)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ref(parseRef(t, tc.ref), false)
		if err != nil || got.String() != tc.want {
			t.Errorf("mirror %s ref(%s) = %v, %v, want %s", tc.to, tc.ref, got, err, tc.want)
		}
	}
}

func TestMirrors(t *testing.T) {
	t.Parallel()
	// The origin and two mirrors hold different images under the same
	// tag, so the digest says who answered.
	type setup struct {
		origin, first, second *testregistry.Registry
		digests               map[string]string // who → digest
	}
	newSetup := func(t *testing.T, firstHas, secondHas bool) *setup {
		s := &setup{origin: testregistry.New(t), first: testregistry.New(t), second: testregistry.New(t), digests: map[string]string{}}
		s.digests["origin"] = s.origin.PushImage(t, "team/app:1").String()
		if firstHas {
			s.digests["first"] = s.first.PushImage(t, "cache/team/app:1").String()
		}
		if secondHas {
			s.digests["second"] = s.second.PushImage(t, "team/app:1").String()
		}
		for _, r := range []*testregistry.Registry{s.origin, s.first, s.second} {
			r.ResetCounts()
		}
		return s
	}
	for _, tc := range []struct {
		desc       string
		firstHas   bool
		secondHas  bool
		firstFails int // status of every manifest request to the first mirror
		mirrorOnly bool
		want       string // who answers
		wantErr    []string
		wantAsked  []int // manifest requests: origin, first, second
	}{
		{desc: "first mirror has it", firstHas: true, secondHas: true, want: "first", wantAsked: []int{0, 1, 0}},
		{desc: "second mirror after a miss", secondHas: true, want: "second", wantAsked: []int{0, 1, 1}},
		{desc: "origin after two misses", want: "origin", wantAsked: []int{1, 1, 1}},
		{desc: "origin after a failing mirror", firstHas: true, firstFails: http.StatusBadGateway, want: "origin", wantAsked: []int{1, regtransport.DefaultAttempts, 1}},
		{
			desc: "mirror-only never asks the origin", mirrorOnly: true,
			wantErr:   []string{"/cache/team/app:1 (mirror): HEAD manifest: 404 Not Found; then ", "/team/app:1 (mirror): HEAD manifest: 404 Not Found"},
			wantAsked: []int{0, 1, 1},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, tc.firstHas, tc.secondHas)
			if tc.firstFails != 0 {
				s.first.Handle(failFirst(100, status(tc.firstFails)))
			}
			r, _ := newTestResolver(t,
				WithMirror(s.origin.Host(), s.first.Host()+"/cache"),
				WithMirror(s.origin.Host(), s.second.Host()),
				WithMirrorOnly(tc.mirrorOnly))
			got, err := resolveString(t, r, s.origin.Ref("team/app:1"))
			asked := []int{s.origin.Manifests(), s.first.Manifests(), s.second.Manifests()}
			if diff := cmp.Diff(tc.wantAsked, asked); diff != "" {
				t.Errorf("manifest requests to origin, first, second (-want +got):\n%s", diff)
			}
			if tc.wantErr != nil {
				wantErr(t, err, append(tc.wantErr, s.first.Host(), s.second.Host())...)
				if strings.Contains(err.Error(), s.origin.Host()) {
					t.Errorf("error %q names the origin, which was not asked", err)
				}
				return
			}
			if err != nil || got != s.digests[tc.want] {
				t.Errorf("Resolve = %s, %v, want the %s's %s", got, err, tc.want, s.digests[tc.want])
			}
			// The answer says which mirror gave it (the second call is
			// the first's answer, asking nobody).
			res, err := r.Resolve(context.Background(), parseRef(t, s.origin.Ref("team/app:1")))
			wantMirror := map[string]string{"first": s.first.Host(), "second": s.second.Host()}[tc.want]
			if err != nil || res.Mirror != wantMirror {
				t.Errorf("Resolve = %+v, %v; want Mirror %q", res, err, wantMirror)
			}
		})
	}
}

func TestDockerHubThroughMirrorOnly(t *testing.T) {
	t.Parallel()
	mirror := testregistry.New(t)
	want := mirror.PushImage(t, "hub/library/nginx:1.27")
	mirror.ResetCounts()
	r, _ := newTestResolver(t, WithMirror("docker.io", mirror.Host()+"/hub"), WithMirrorOnly(true))
	// The name as the user spells it; Docker Hub is never asked.
	for _, ref := range []string{"nginx:1.27", "docker.io/library/nginx:1.27"} {
		got, err := resolveString(t, r, ref)
		if err != nil || got != want.String() {
			t.Errorf("Resolve(%s) = %s, %v, want %s", ref, got, err, want)
		}
	}
	if n := mirror.Count("HEAD manifests"); n != 1 {
		t.Errorf("HEAD manifests = %d, want 1 (one distinct reference)", n)
	}
}

// TestMirrorHostsMatchAsRegistriesDo checks that a mirror's FROM matches
// the images of its registry however either spells the host: in any case,
// with or without the default port 443, and Docker Hub by any of its
// names. Before, only the exact spelling matched, and the mirror was left
// out without a word.
func TestMirrorHostsMatchAsRegistriesDo(t *testing.T) {
	t.Parallel()
	mirror := testregistry.New(t)
	hub := mirror.PushImage(t, "hub/library/nginx:1.27")
	other := mirror.PushImage(t, "other/team/app:1")
	for _, tc := range []struct {
		from, prefix string
		refs         []string
		want         string
	}{
		{from: "DOCKER.IO", prefix: "hub", refs: []string{"nginx:1.27", "docker.io/library/nginx:1.27"}, want: hub.String()},
		{from: "registry-1.docker.io", prefix: "hub", refs: []string{"nginx:1.27", "index.docker.io/library/nginx:1.27"}, want: hub.String()},
		{from: "docker.io:443", prefix: "hub", refs: []string{"nginx:1.27", "registry-1.docker.io/library/nginx:1.27"}, want: hub.String()},
		{from: "Registry.Example:443", prefix: "other", refs: []string{"registry.example/team/app:1", "REGISTRY.example:443/team/app:1"}, want: other.String()},
		{from: "registry.example", prefix: "other", refs: []string{"Registry.EXAMPLE/team/app:1", "registry.example:443/team/app:1"}, want: other.String()},
	} {
		t.Run(tc.from, func(t *testing.T) {
			t.Parallel()
			// Mirror only: the registry itself is never asked, so an
			// image the mirror misses fails.
			r, _ := newTestResolver(t, WithMirror(tc.from, mirror.Host()+"/"+tc.prefix), WithMirrorOnly(true))
			for _, ref := range tc.refs {
				if got, err := resolveString(t, r, ref); err != nil || got != tc.want {
					t.Errorf("Resolve(%s) through mirror %s = %s, %v, want %s", ref, tc.from, got, err, tc.want)
				}
			}
			if got := r.Mirrors(); len(got) != 1 || got[0].From != tc.from {
				t.Errorf("Mirrors() = %v, want the one of %s", got, tc.from)
			}
		})
	}
}
