package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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
			// The mirrors hold other images than the origin: its
			// answer is not compared with theirs (TestMirrorLag).
			r, _ := newTestResolver(t,
				WithMirror(s.origin.Host(), s.first.Host()+"/cache"),
				WithMirror(s.origin.Host(), s.second.Host()),
				WithMirrorOnly(tc.mirrorOnly), WithMirrorLag(MirrorLagOff))
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

// TestMirrorLag checks a mirror's answer against its source, asked at the
// same time: the same digest is the mirror's answer; another is an error
// naming both, or a warning; a source that cannot answer leaves the
// mirror's answer; a mirror that misses takes the source's, asked once.
func TestMirrorLag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc       string
		lag        MirrorLag
		same       bool // the mirror holds the origin's image, else another
		mirrorMiss bool // the mirror has no such tag
		originFail int  // status of every manifest request to the origin
		want       string
		wantMirror bool
		wantErr    []string
		wantWarn   []string
		wantLog    string
		wantAsked  []int // manifest requests: origin, mirror
	}{
		{desc: "same digest", same: true, want: "origin", wantMirror: true, wantAsked: []int{1, 1}},
		{desc: "mirror lags", wantErr: []string{"mirror ", "serves", "the mirror lags behind its source or holds another image (WithMirrorLag(warn) pins the mirror's digest anyway)"}, wantAsked: []int{1, 1}},
		{desc: "mirror lags, warn", lag: MirrorLagWarn, want: "mirror", wantMirror: true, wantWarn: []string{"pinning the mirror's digest (WithMirrorLag(warn))"}, wantAsked: []int{1, 1}},
		{desc: "mirror lags, off", lag: MirrorLagOff, want: "mirror", wantMirror: true, wantAsked: []int{0, 1}},
		{desc: "origin down", originFail: http.StatusServiceUnavailable, want: "mirror", wantMirror: true, wantLog: "is not compared with", wantAsked: []int{regtransport.DefaultAttempts, 1}},
		{desc: "origin has no such tag", originFail: http.StatusNotFound, want: "mirror", wantMirror: true, wantLog: "404 Not Found", wantAsked: []int{1, 1}},
		{desc: "mirror misses", mirrorMiss: true, want: "origin", wantAsked: []int{1, 1}},
		{desc: "both fail", mirrorMiss: true, originFail: http.StatusNotFound, wantErr: []string{"(mirror): HEAD manifest: 404 Not Found; then ", "/team/app:1: HEAD manifest: 404 Not Found"}, wantAsked: []int{1, 1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			origin, mirror := testregistry.New(t), testregistry.New(t)
			img, err := random.Image(64, 1)
			if err != nil {
				t.Fatal(err)
			}
			digests := map[string]string{"origin": origin.Push(t, "team/app:1", img).String()}
			switch {
			case tc.mirrorMiss:
			case tc.same:
				digests["mirror"] = mirror.Push(t, "team/app:1", img).String()
			default:
				digests["mirror"] = mirror.PushImage(t, "team/app:1").String()
			}
			origin.ResetCounts()
			mirror.ResetCounts()
			if tc.originFail != 0 {
				origin.Handle(failFirst(100, status(tc.originFail)))
			}
			var warns []string
			r, logs := newTestResolver(t, WithMirror(origin.Host(), mirror.Host()), WithMirrorLag(tc.lag),
				WithWarnf(func(format string, args ...any) { warns = append(warns, fmt.Sprintf(format, args...)) }))
			res, err := r.Resolve(context.Background(), parseRef(t, origin.Ref("team/app:1")))
			if diff := cmp.Diff(tc.wantAsked, []int{origin.Manifests(), mirror.Manifests()}); diff != "" {
				t.Errorf("manifest requests to origin, mirror (-want +got):\n%s", diff)
			}
			if tc.wantErr != nil {
				wantErr(t, err, tc.wantErr...)
				if tc.originFail == 0 {
					wantErr(t, err, origin.Ref("team/app:1")+" serves "+digests["origin"], mirror.Ref("team/app:1")+" serves "+digests["mirror"])
					var me *MirrorMismatchError
					if !errors.As(err, &me) || me.SourceDigest.String() != digests["origin"] {
						t.Errorf("error %v is no *MirrorMismatchError with the origin's digest", err)
					}
				}
				return
			}
			if err != nil || res.Digest.String() != digests[tc.want] || (res.Mirror != "") != tc.wantMirror {
				t.Errorf("Resolve = %+v, %v; want the %s's digest %s, from a mirror: %v", res, err, tc.want, digests[tc.want], tc.wantMirror)
			}
			if len(warns) != len(tc.wantWarn) {
				t.Errorf("warnings %q, want %d", warns, len(tc.wantWarn))
			}
			for i, w := range tc.wantWarn {
				if i < len(warns) && (!strings.Contains(warns[i], w) || !strings.Contains(warns[i], digests["origin"]) || !strings.Contains(warns[i], digests["mirror"])) {
					t.Errorf("warning %q does not name both digests and %q", warns[i], w)
				}
			}
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log does not contain %q:\n%s", tc.wantLog, logs)
			}
		})
	}
}

func TestParseMirrorLag(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"error", "warn", "off"} {
		if m, err := ParseMirrorLag(s); err != nil || m.String() != s {
			t.Errorf("ParseMirrorLag(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMirrorLag("Warn"); err == nil || !strings.Contains(err.Error(), `mirror lag "Warn": want error, warn, off`) {
		t.Errorf("ParseMirrorLag(Warn) error = %v", err)
	}
	if _, err := New(WithMirrorLag(MirrorLag(7))); err == nil {
		t.Error("New(WithMirrorLag(7)) succeeded")
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

// TestMirrorHoldsOnePlatform is a mirror that kept one platform's image
// of the registry's index (a cache filled by one node's pull): the error
// says which.
func TestMirrorHoldsOnePlatform(t *testing.T) {
	t.Parallel()
	origin, mirror := testregistry.New(t), testregistry.New(t)
	var idx v1.ImageIndex = empty.Index
	var amd v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		if arch == "amd64" {
			amd = img
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	if err := remote.WriteIndex(parseRef(t, origin.Ref("team/app:1")), idx); err != nil {
		t.Fatal(err)
	}
	mirror.Push(t, "team/app:1", amd)
	r, _ := newTestResolver(t, WithMirror(origin.Host(), mirror.Host()))
	_, err := r.Resolve(context.Background(), parseRef(t, origin.Ref("team/app:1")))
	wantErr(t, err, "the mirror holds only the linux/amd64 image of the registry's index (WithMirrorLag(warn) pins the mirror's digest anyway)")
}
