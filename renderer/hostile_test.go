package renderer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dref "github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/resolution"
)

// hostileBound is how long any of the small hostile inputs below may take
// to render. Each needs milliseconds; the bound only catches work that
// grows exponentially (it hung before the fixes), with room for -race on
// a busy machine.
const hostileBound = time.Minute

// renderWithin renders in with r and fails the test if that takes longer
// than hostileBound.
func renderWithin(t *testing.T, r *Renderer, in string) (Result, error) {
	t.Helper()
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Render(context.Background(), []byte(in))
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(hostileBound):
		t.Fatalf("Render() still running after %s", hostileBound)
		return Result{}, nil
	}
}

// laughs returns n levels of YAML anchors, each a flow sequence of nine
// aliases of the one before ("billion laughs"), as mapping entries at the
// given indentation: expanded, level n would hold 9^n strings.
func laughs(indent string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n", indent)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%sl%d: &l%d [%s]\n", indent, i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), ", "))
	}
	return b.String()
}

// pod is a Pod with one container whose image is IMAGE.
const pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    image: IMAGE\n"

// TestHostileInputRefused renders broken or hostile documents, each of
// which must be refused with a one-line error that names the document and
// the line, and no output. (renderer_test.go's TestRenderErrors covers an
// image that is a number, a mapping or "", an uppercase repository, an
// invalid digest and a sequence document.)
func TestHostileInputRefused(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct {
		desc, in string
		want     []string // substrings of the error
	}{
		{
			desc: "a scalar document",
			in:   "---\n# Source: c/templates/a.yaml\njust an image string\n",
			want: []string{"document 1 (c/templates/a.yaml), line 3", "want a Kubernetes object (a mapping), found a scalar"},
		},
		{
			desc: "a sequence document after another",
			in:   "apiVersion: v1\nkind: ConfigMap\n---\n- image: registry.example/app:1\n",
			want: []string{"document 2, line 4", "found a sequence"},
		},
		{
			desc: "image is null",
			in:   strings.Replace(pod, "IMAGE", "null", 1),
			want: []string{"document 1, line 8", `Pod/p container "app"`, "image is empty"},
		},
		{
			desc: "image has no value",
			in:   strings.Replace(pod, " IMAGE", "", 1),
			want: []string{"document 1, line 8", "image is empty"},
		},
		{
			desc: "image is a boolean",
			in:   strings.Replace(pod, "IMAGE", "true", 1),
			want: []string{"line 8", "image is bool true"},
		},
		{
			desc: "image is a sequence",
			in:   strings.Replace(pod, "IMAGE", "[registry.example/app, '1']", 1),
			want: []string{"line 8", "image is a sequence"},
		},
		{
			desc: "image with a custom tag",
			in:   strings.Replace(pod, "IMAGE", "!digest registry.example/app:1", 1),
			want: []string{"line 8", "image is !digest registry.example/app:1"},
		},
		{
			desc: "image with spaces",
			in:   strings.Replace(pod, "IMAGE", `"registry.example/app :1"`, 1),
			want: []string{"line 8", `parsing image "registry.example/app :1"`},
		},
		{
			// Found by FuzzImageField (testdata/fuzz/FuzzImageField/b644e8ab7690a7ae):
			// the parser's error repeated the line break raw.
			desc: "image with a line break",
			in:   strings.Replace(pod, "IMAGE", `"0\n"`, 1),
			want: []string{"line 8", `image "0\n" holds a control character`},
		},
		{
			desc: "image with a custom tag and a line break",
			in:   strings.Replace(pod, "IMAGE", `!x "a\r\n"`, 1),
			want: []string{"line 8", `image is !x "a\r\n"`},
		},
		{
			desc: "a Source comment with a terminal escape",
			in:   "# Source: c/\x1b[31mred.yaml\n- image: x\n",
			want: []string{"document 1 (c/?[31mred.yaml), line 1: malformed YAML: control character U+001B is not allowed"},
		},
		{
			desc: "image with an uppercase repository",
			in:   strings.Replace(pod, "IMAGE", "registry.example/Team/App:1", 1),
			want: []string{"line 8", `parsing image "registry.example/Team/App:1"`},
		},
		{
			desc: "image with a digest of the wrong length",
			in:   strings.Replace(pod, "IMAGE", "registry.example/app@sha256:"+strings.Repeat("a", 63), 1),
			want: []string{"line 8", "parsing image"},
		},
		{
			desc: "image with a digest of an unknown algorithm",
			in:   strings.Replace(pod, "IMAGE", "registry.example/app@md5:"+strings.Repeat("a", 32), 1),
			want: []string{"line 8", "parsing image"},
		},
		{
			desc: "bytes that are not UTF-8",
			in:   "apiVersion: v1\nkind: ConfigMap\n---\n" + strings.Replace(pod, "name: p", "name: p\xff", 1),
			want: []string{"document 2, line 7", "malformed YAML: byte 0xff is not UTF-8"},
		},
		{
			desc: "a UTF-16 stream",
			in:   "\xff\xfea\x00p\x00i\x00",
			want: []string{"document 1, line 1", "the stream is UTF-16"},
		},
		{
			desc: "nesting 20000 levels deep",
			in:   strings.Replace(pod, "IMAGE", "registry.example/app:1", 1) + "x: " + deep + "\n",
			want: []string{"document 1, line 9", "exceeded max depth"},
		},
		{
			desc: "merge keys that expand exponentially",
			in: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nx:\n  m0: &m0 {a: 1, b: 2}\n" + func() string {
				var b strings.Builder
				for i := 1; i <= 40; i++ {
					fmt.Fprintf(&b, "  m%d: &m%d {<<: [*m%d, *m%d, *m%d]}\n", i, i, i-1, i-1, i-1)
				}
				return b.String()
			}() + "spec:\n  containers:\n  - <<: *m40\n    name: app\n    image: registry.example/app:1\n",
			want: []string{"document 1, line", "merge keys (<<) expand to more than"},
		},
		{
			desc: "a checksum that would land in metadata shared through an anchor",
			in:   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata: &m\n      labels: {app: d}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
			want: []string{"document 1, line 7", "Deployment/d: cannot write the checksum/images annotation", "metadata has an anchor (&m)"},
		},
		{
			desc: "a checksum that would land in metadata from a merge key",
			in:   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nx: &base\n  metadata:\n    labels: {app: d}\nspec:\n  template:\n    <<: *base\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
			want: []string{"document 1, line 6", "metadata comes from a merge key"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			wantRefused(t, &Renderer{Resolver: newFixed()}, tc.in, tc.want)
		})
	}
}

// hostileImage is the image of the hostile documents that are rendered.
const hostileImage = "registry.example/app:1"

// handledCase is a hostile document that is valid and must be rendered.
type handledCase struct {
	desc, in string
	// want are substrings of the output; pinned counts the pinned
	// image fields.
	want   []string
	pinned int
}

// hostileHandled are hostile documents that are valid and must be
// rendered (or passed through) without expanding anything: the output
// stays about the size of the input. TestHostileFixtures keeps each in
// testdata/hostile for the API server's dry runs in e2e/kube.
func hostileHandled() []handledCase {
	img := hostileImage
	pinned := img + "@" + dg(img)
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	return []handledCase{
		{
			desc:   "an alias bomb next to a pod spec",
			in:     strings.Replace(pod, "IMAGE", img, 1) + "bomb:\n" + laughs("  ", 12),
			want:   []string{"l12: &l12 [*l11, *l11,"},
			pinned: 1,
		},
		{
			desc:   "an alias bomb in a document the encoder writes",
			in:     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: app, image: " + img + "}]}\n" + laughs("", 12),
			want:   []string{"l12: &l12 [*l11, *l11,"},
			pinned: 1,
		},
		{
			// The API server, kubectl and Helm read the key as image.
			desc:   "an image key that is an alias of the string image",
			in:     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {k: &k image}\nspec:\n  containers:\n  - name: app\n    *k : " + img + "\n",
			want:   []string{"*k : " + pinned + "\n"},
			pinned: 1,
		},
		{
			desc:   "an alias bomb without an image field",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n" + laughs("  ", 12),
			want:   []string{"l12: &l12 [*l11, *l11,"},
			pinned: 0,
		},
		{
			desc: "Lists of aliases of Lists",
			in: "apiVersion: v1\nkind: List\nitems:\n- &p0 {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: app, image: " + img + "}]}}\n" +
				func() string {
					var b strings.Builder
					for i := 1; i <= 15; i++ {
						fmt.Fprintf(&b, "- &p%d {kind: List, items: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*p%d, ", i-1), 9), ", "))
					}
					return b.String()
				}(),
			want:   []string{"- &p15 {kind: List, items: [*p14, *p14,"},
			pinned: 1,
		},
		{
			desc:   "containers that are aliases of one container",
			in:     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - &c\n    name: app\n    image: " + img + "\n" + strings.Repeat("  - *c\n", 1000),
			want:   []string{"  - *c\n  - *c\n"},
			pinned: 1,
		},
		{
			desc:   "nesting 5000 levels deep",
			in:     strings.Replace(pod, "IMAGE", img, 1) + "x: " + deep + "\n",
			want:   []string{"x: " + deep + "\n"},
			pinned: 1,
		},
		{
			desc:   "nesting 5000 levels deep in a document the encoder writes",
			in:     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: app, image: " + img + "}]}\nx: " + deep + "\n",
			want:   []string{"x: [[[["},
			pinned: 1,
		},
		{
			desc:   "an image key spelt with escapes",
			in:     strings.Replace(strings.Replace(pod, "IMAGE", img, 1), "image:", `"\x69mage":`, 1),
			want:   []string{pinned},
			pinned: 1,
		},
	}
}

// TestHostileInputHandled renders each of hostileHandled.
func TestHostileInputHandled(t *testing.T) {
	t.Parallel()
	pinned := hostileImage + "@" + dg(hostileImage)
	for _, tc := range hostileHandled() {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed()}
			res, err := renderWithin(t, r, tc.in)
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			out := string(res.Bytes())
			if len(out) > len(tc.in)+1024 {
				t.Errorf("Render() wrote %d bytes for %d: something was expanded", len(out), len(tc.in))
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %.80q", w)
				}
			}
			if got := strings.Count(out, pinned); got != tc.pinned {
				t.Errorf("output pins %d images, want %d", got, tc.pinned)
			}
			if tc.pinned == 0 && out != tc.in {
				t.Errorf("Render() changed a document without an image:\n%s", cmp.Diff(tc.in, out))
			}
			again, err := renderWithin(t, r, out)
			if err != nil {
				t.Fatalf("Render(output) = %v", err)
			}
			if diff := cmp.Diff(out, string(again.Bytes())); diff != "" {
				t.Errorf("Render() changed its own output (-want +got):\n%.2000s", diff)
			}
		})
	}
}

// badDigests is a Resolver that answers with whatever digest it holds.
type badDigests map[string]v1.Hash

func (b badDigests) Resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	return resolution.Resolution{Digest: b[ref.Name()], Source: resolution.Registry}, nil
}

// TestRenderRefusesBadDigests checks that a digest a resolver gives is
// checked before it is written into a manifest.
func TestRenderRefusesBadDigests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		h    v1.Hash
	}{
		{desc: "zero", h: v1.Hash{}},
		{desc: "short", h: v1.Hash{Algorithm: "sha256", Hex: "abc"}},
		{desc: "not hex", h: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("z", 64)}},
		{desc: "YAML in it", h: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64) + "\nkind: Secret"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: badDigests{"registry.example/app:1": tc.h}}
			res, err := r.Render(context.Background(), []byte(strings.Replace(pod, "IMAGE", "registry.example/app:1", 1)))
			if err == nil {
				t.Fatalf("Render() = nil error, output:\n%s", res.Bytes())
			}
			if want := "document 1, line 8"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "invalid digest") {
				t.Errorf("Render() error = %q, want it to name %q and an invalid digest", err, want)
			}
		})
	}
}

// FuzzImageField puts arbitrary text into an image field, written plain,
// single- and double-quoted and folded. Render must either refuse it with
// a one-line error naming the document and line, or pin a reference to
// the same repository in a stream that renders to itself again.
func FuzzImageField(f *testing.F) {
	for _, s := range []string{"registry.example/app:1", "nginx", "localhost:5000/a/b:c", "a:1@" + dg("z"), "Nginx:1", "a b", "", "1", "~", "'", `"`, "[x]", "a\nb", "#", "app:1 # c"} {
		f.Add(s, uint8(0))
	}
	// Cases of the image paths' and JSON hardening: escapes YAML has not,
	// the non-specific tag, a byte order mark, placeholders, a registry
	// with a quote, a huge number.
	for _, s := range []string{`registry.example\/app:1`, `\ud83d\ude00`, "!", "! x", "\ufeffnginx", "{{inputs.parameters.image}}", "$(params.image)", "re998tr0.exY20l'/run", "1e400"} {
		for style := range uint8(4) {
			f.Add(s, style)
		}
	}
	// References the kubelet refuses.
	for _, tc := range kubeletRefused {
		f.Add(strings.Trim(tc.image, `'"`), uint8(1))
	}
	f.Fuzz(func(t *testing.T, image string, style uint8) {
		var field string
		switch style % 4 {
		case 0:
			field = image
		case 1:
			field = "'" + strings.ReplaceAll(image, "'", "''") + "'"
		case 2:
			field = fmt.Sprintf("%q", image)
		case 3:
			field = ">-\n      " + strings.ReplaceAll(image, "\n", "\n      ")
		}
		in := "---\n# Source: c/templates/p.yaml\n" + strings.Replace(pod, "IMAGE", field, 1)
		r := &Renderer{Resolver: newFixed()}
		res, err := r.Render(context.Background(), []byte(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "document 1 (c/templates/p.yaml)") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Render(%q) error = %q, want one line naming the document", in, err)
			}
			return
		}
		again, err := r.Render(context.Background(), res.Bytes())
		if err != nil {
			t.Fatalf("Render(output) = %v\ninput:\n%q\noutput:\n%q", err, in, res.Bytes())
		}
		if !bytes.Equal(again.Bytes(), res.Bytes()) {
			t.Fatalf("Render is not idempotent\ninput:\n%q\nfirst:\n%q\nsecond:\n%q", in, res.Bytes(), again.Bytes())
		}
		if len(res.Images) > 1 {
			t.Fatalf("Render(%q) found %d images, want at most one", in, len(res.Images))
		}
		for _, img := range res.Images {
			ref, err := name.ParseReference(img.Written)
			if err != nil {
				t.Fatalf("Render(%q) wrote image %q, which does not parse: %v", in, img.Written, err)
			}
			// The kubelet's parser, the reference implementation of the
			// grammar, must take what was pinned and what it became.
			for _, s := range []string{img.Written, pinnedForm(img.Written, img.Digest, ModePin)} {
				if _, err := dref.ParseNormalizedNamed(s); err != nil {
					t.Fatalf("Render(%q) pinned %q, which the kubelet refuses: %v", in, s, err)
				}
			}
			if img.Reference != ref.Name() {
				t.Fatalf("Render(%q) reports %s for %s", in, img.Reference, ref.Name())
			}
		}
	})
}

// wantRefused renders in with r, within the test's time bound, and checks
// that it is refused with one line that holds every string of want, and
// no output.
func wantRefused(t *testing.T, r *Renderer, in string, want []string) {
	t.Helper()
	res, err := renderWithin(t, r, in)
	if err == nil {
		t.Fatalf("Render() = nil error, want one mentioning %q; output:\n%s", want, res.Bytes())
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Render() error = %q, want it to contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Render() error = %q, want one line", err)
	}
	if res.Bytes() != nil {
		t.Errorf("Render() returned output with an error: %q", res.Bytes())
	}
}

// TestQuotedYAML11Words checks that a YAML 1.1 boolean word, quoted, is a
// reference like any other: the API server reads the string too.
func TestQuotedYAML11Words(t *testing.T) {
	t.Parallel()
	for _, img := range []string{`"y"`, `'on'`, `!!str no`} {
		r := &Renderer{Resolver: newFixed()}
		res, err := r.Render(context.Background(), []byte(strings.Replace(pod, "IMAGE", img, 1)))
		if err != nil {
			t.Errorf("image %s: %v", img, err)
			continue
		}
		checkAsAPIServer(t, []byte(strings.Replace(pod, "IMAGE", img, 1)), res.Bytes())
	}
}

// kubeletRefused are references that go-containerregistry parses but the
// kubelet refuses (InvalidImageName), each with the part the error names.
var kubeletRefused = []struct{ image, want string }{
	{"...", `path component "..."`},
	{"'...:latest@" + dg("x") + "'", `path component "..."`},
	{"a..b", `path component "a..b"`},
	{"-foo", `path component "-foo"`},
	{"registry.example/foo//bar", "empty path component"},
	{"_foo", `path component "_foo"`},
	{"registry.example/app:-bad", `tag "-bad"`},
	{`"ho'st.example/app:1"`, `registry "ho'st.example"`},
}

// TestKubeletRefusedReferences renders references that the kubelet cannot
// pull: each is refused with its document, file, line and image before
// any resolver is asked, or with KeepUnresolved kept as written.
func TestKubeletRefusedReferences(t *testing.T) {
	t.Parallel()
	for _, tc := range kubeletRefused {
		t.Run(tc.image, func(t *testing.T) {
			in := "---\n# Source: c/templates/p.yaml\n" + strings.Replace(pod, "IMAGE", tc.image, 1)
			f := newFixed()
			wantRefused(t, &Renderer{Resolver: f}, in, []string{"document 1 (c/templates/p.yaml), line 10", `Pod/p container "app"`, "the kubelet refuses", tc.want})
			var warnings []string
			res, err := (&Renderer{Resolver: f, KeepUnresolved: true, Warnf: func(format string, args ...any) {
				warnings = append(warnings, fmt.Sprintf(format, args...))
			}}).Render(context.Background(), []byte(in))
			if err != nil || !strings.Contains(string(res.Bytes()), "image: "+tc.image+"\n") {
				t.Errorf("Render(KeepUnresolved) = %v, want the image kept as written; output:\n%s", err, res.Bytes())
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], tc.want) {
				t.Errorf("Render(KeepUnresolved) warned %q, want one warning naming %s", warnings, tc.want)
			}
			if len(f.calls) > 0 {
				t.Errorf("the resolver was asked about %v", f.calls)
			}
		})
	}
}
