package steady

import (
	"bytes"
	"strings"
	"testing"
)

func TestKeep(t *testing.T) {
	cm := func(v string) string {
		return "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: " + v + ", w: fixed}\n"
	}
	pod := func(image, sum, seed string) string {
		return "# Source: c/pod.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {checksum/images: " + sum + ", example.com/images: " + sum + "}\nspec:\n  containers:\n  - name: a\n    image: " + image + "\n    args: [--seed=" + seed + "]\n  volumes:\n  - name: v\n    image: {reference: " + image + "}\n"
	}
	for _, tc := range []struct {
		desc          string
		input, second string // two renders of now, for the volatile fields; "" for none
		previous      string
		output        string
		opts          Options
		wantKept      bool
		wantReason    string
	}{
		{desc: "first render", previous: "", output: cm("x"), wantReason: "no previous output"},
		{desc: "the same bytes", previous: cm("x"), output: cm("x"), wantKept: true},
		{
			desc:     "formatting and comments only, without a second render",
			previous: "---\n# Source: c/cm.yaml\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: x # random\n  w: 'fixed'\n",
			output:   cm("x"), wantKept: true,
		},
		{desc: "a difference without a second render", previous: cm("x"), output: cm("y"), wantReason: "ConfigMap/a: data.v changed"},
		{desc: "a volatile field", input: cm("1"), second: cm("2"), previous: cm("3"), output: cm("1"), wantKept: true},
		{
			desc:  "a generated value inside a string: the rest of the string is real",
			input: cm(`"pw=Xk2p title=shop"`), second: cm(`"pw=b7Yw title=shop"`),
			previous: cm(`"pw=Qq1z title=shop"`), output: cm(`"pw=Xk2p title=shop2"`),
			wantReason: "ConfigMap/a: data.v changed where two renders of the same input agree",
		},
		{
			desc:  "a generated value inside a string: a line gone beside it is real",
			input: cm(`"pw=Xk2p\ntitle=shop"`), second: cm(`"pw=b7Yw\ntitle=shop"`),
			previous: cm(`"pw=Qq1z\nport=80\ntitle=shop"`), output: cm(`"pw=Xk2p\ntitle=shop"`),
			wantReason: "ConfigMap/a: data.v changed where two renders of the same input agree",
		},
		{
			desc:  "a generated value inside a string, nothing else changed",
			input: cm(`"pw=Xk2p title=shop"`), second: cm(`"pw=b7Yw title=shop"`),
			previous: cm(`"pw=Qq1z title=shop"`), output: cm(`"pw=Xk2p title=shop"`), wantKept: true,
		},
		{
			desc:  "a generated value inside a string, the previous one made otherwise",
			input: cm(`"pw=Xk2p title=shop"`), second: cm(`"pw=b7Yw title=shop"`),
			previous: cm(`"pw=Qq1z title=web"`), output: cm(`"pw=Xk2p title=shop"`),
			wantReason: "ConfigMap/a: data.v changed where two renders of the same input agree",
		},
		{
			desc:  "a field that was equal in the two renders of now",
			input: cm("1"), second: cm("1"), previous: cm("x"), output: cm("y"), wantReason: "data.v changed",
		},
		{
			desc:  "a volatile field of another document",
			input: cm("1"), second: cm("2"),
			previous:   cm("3") + "---\n# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: x}\n",
			output:     cm("1") + "---\n# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\ndata: {v: y}\n",
			wantReason: "ConfigMap/b: data.v changed",
		},
		{
			desc:  "a value that changed shape covers no field under it",
			input: "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: none\n", second: cm("2"),
			previous: cm("x"), output: cm("y"), wantReason: "ConfigMap/a: data.v changed",
		},
		{
			desc:  "a value that changed shape, as it did between the renders",
			input: "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: none\n", second: cm("2"),
			previous: cm("2"), output: "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: none\n", wantKept: true,
		},
		{
			desc:  "a volatile field under a value that changed shape",
			input: cm("1"), second: cm("2"),
			previous: cm("x"), output: "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: a}\ndata: none\n", wantReason: "data changed",
		},
		{
			desc:  "a volatile container field",
			input: pod("nginx", "s", "1"), second: pod("nginx", "s", "2"),
			previous: pod("nginx", "s", "3"), output: pod("nginx", "s", "4"), wantKept: true,
		},
		{
			desc:  "a volatile image is still real",
			input: pod("nginx:1", "s", "1"), second: pod("nginx:2", "s", "1"),
			previous: pod("nginx:0", "s", "1"), output: pod("nginx:1", "s", "1"),
			wantReason: "Pod/p: image field spec.containers[name=a].image changed",
		},
		{
			desc:  "a volatile checksum annotation is still real",
			input: pod("nginx", "s1", "1"), second: pod("nginx", "s2", "1"),
			previous: pod("nginx", "s0", "1"), output: pod("nginx", "s1", "1"),
			wantReason: `Pod/p: image field metadata.annotations["checksum/images"] changed`,
		},
		{
			desc:  "another checksum annotation is named in the options",
			input: pod("nginx", "s1", "1"), second: pod("nginx", "s2", "1"),
			previous: pod("nginx", "s0", "1"), output: pod("nginx", "s1", "1"),
			opts:       Options{ChecksumAnnotation: "example.com/images"},
			wantReason: `Pod/p: image field metadata.annotations["example.com/images"] changed`,
		},
		{
			desc:       "an image volume",
			previous:   pod("nginx", "s", "1"),
			output:     strings.Replace(pod("nginx", "s", "1"), "image: {reference: nginx}", "image: {reference: nginx:2}", 1),
			wantReason: "Pod/p: image field spec.volumes[name=v].image.reference changed",
		},
		{
			desc:       "an image that is not a string",
			previous:   pod("nginx", "s", "1"),
			output:     strings.Replace(pod("nginx", "s", "1"), "image: nginx\n", "image: {x: 1}\n", 1),
			wantReason: "Pod/p: image field spec.containers[name=a].image changed",
		},
		{
			desc:     "documents in another order of sources",
			previous: "# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\n---\n" + cm("x"),
			output:   cm("x") + "---\n# Source: c/b.yaml\nkind: ConfigMap\nmetadata: {name: b}\n",
			wantKept: true,
		},
		{
			desc:     "CRLF line ends",
			previous: strings.ReplaceAll(cm("x"), "\n", "\r\n"),
			output:   cm("x"), wantKept: true,
		},
		{
			desc:     "empty documents are no objects",
			previous: cm("x"),
			output:   "---\n---\n# Source: c/empty.yaml\n---\n" + cm("x") + "---\n",
			wantKept: true,
		},
		{
			desc:       "a document that moved to another template",
			previous:   cm("x"),
			output:     strings.Replace(cm("x"), "c/cm.yaml", "c/other.yaml", 1),
			wantReason: "document 1 (c/other.yaml) is new",
		},
		{
			desc:  "named items in another order",
			input: "kind: ConfigMap\nmetadata: {name: a}\nenv: [{name: A, value: r1}, {name: B}]\n", second: "kind: ConfigMap\nmetadata: {name: a}\nenv: [{name: A, value: r2}, {name: B}]\n",
			previous:   "kind: ConfigMap\nmetadata: {name: a}\nenv: [{name: A, value: r0}, {name: B}]\n",
			output:     "kind: ConfigMap\nmetadata: {name: a}\nenv: [{name: B}, {name: A, value: r3}]\n",
			wantReason: "ConfigMap/a: env changed",
		},
		{
			desc:     "a repeated key means its last value",
			previous: "kind: ConfigMap\nmetadata: {name: a}\ndata:\n  v: old\n  v: same\n",
			output:   "kind: ConfigMap\nmetadata: {name: a}\ndata: {v: same}\n",
			wantKept: true,
		},
		{
			desc:  "a list of generated length: a later item is real",
			input: cm("[--seed=A, --x=1, --y=1]"), second: cm("[--x=1, --y=1]"),
			previous: cm("[--seed=B, --x=1, --y=1]"), output: cm("[--seed=C, --x=2, --y=1]"),
			wantReason: "ConfigMap/a: data.v[0] changed",
		},
		{
			desc:  "list items that shift between renders: each item is real",
			input: cm("[abc=1, user=2]"), second: cm("[user=2, xyz=1]"),
			previous: cm("[qqq=1, user=2]"), output: cm("[user=3, zzz=1]"),
			wantReason: "ConfigMap/a: data.v[0] changed",
		},
		{
			desc:  "list items at the same places: the others are volatile",
			input: cm("[--seed=A, --x=1]"), second: cm("[--seed=B, --x=1]"),
			previous: cm("[--seed=C, --x=1]"), output: cm("[--seed=D, --x=1]"), wantKept: true,
		},
		{
			desc:  "named items in another order between renders: their values are real",
			input: cm("[{name: A, value: r1}, {name: B, value: '1'}]"), second: cm("[{name: B, value: '1'}, {name: A, value: r2}]"),
			previous: cm("[{name: A, value: r0}, {name: B, value: '1'}]"), output: cm("[{name: A, value: r3}, {name: B, value: '2'}]"),
			wantReason: "ConfigMap/a: data.v[name=B].value changed",
		},
		{
			desc:  "a key in one render only: the values under it are real",
			input: cm("{a: 1, extra: {b: 1}}"), second: cm("{a: 1}"),
			previous: cm("{a: 1, extra: {b: 1}}"), output: cm("{a: 1, extra: {b: 2}}"),
			wantReason: "ConfigMap/a: data.v.extra.b changed",
		},
		{
			desc:  "a key in one render only: its value is real",
			input: cm("{a: 1, extra: {b: 1}}"), second: cm("{a: 1}"),
			previous: cm("{a: 1}"), output: cm("{a: 1, extra: {b: 2}}"),
			wantReason: "ConfigMap/a: data.v.extra changed",
		},
		{
			desc:  "a key in one render only: it comes and goes",
			input: cm("{a: 1, extra: {b: 1}}"), second: cm("{a: 1}"),
			previous: cm("{a: 1}"), output: cm("{a: 1, extra: {b: 1}}"), wantKept: true,
		},
		{
			desc:  "a volatile number that is gone",
			input: cm("{a: 1, num: 1}"), second: cm("{a: 1, num: 2}"),
			previous: cm("{a: 1, num: 3}"), output: cm("{a: 1}"),
			wantReason: "ConfigMap/a: data.v.num changed",
		},
		{
			desc:  "a volatile number that became a mapping",
			input: cm("{num: 1}"), second: cm("{num: 2}"),
			previous: cm("{num: 3}"), output: cm("{num: {x: 1}}"),
			wantReason: "ConfigMap/a: data.v.num changed",
		},
		{
			desc:  "a value in one render and null in the other: another value is real",
			input: cm("{t: shop}"), second: cm("{t: null}"),
			previous: cm("{t: web}"), output: cm("{t: shop}"),
			wantReason: "ConfigMap/a: data.v.t changed",
		},
		{
			desc:  "a value in one render and null in the other: null again",
			input: cm("{t: shop}"), second: cm("{t: null}"),
			previous: cm("{t: null}"), output: cm("{t: shop}"), wantKept: true,
		},
		{
			desc:  "a volatile number: a string there is real",
			input: cm("{num: 1}"), second: cm("{num: 2}"),
			previous: cm("{num: web}"), output: cm("{num: 1}"),
			wantReason: "ConfigMap/a: data.v.num changed",
		},
		{
			desc:  "a volatile boolean",
			input: cm("{b: true}"), second: cm("{b: false}"),
			previous: cm("{b: false}"), output: cm("{b: true}"), wantKept: true,
		},
		{
			desc:  "a generated number of documents: the documents are real",
			input: "# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: g-abc}\ndata: {v: r1}\n---\n" + cm("user"), second: cm("user"),
			previous: cm("old"), output: cm("new"),
			wantReason: "ConfigMap/a: data.v changed",
		},
		{
			desc:       "a generated number of documents, for Helm 4: the documents are real",
			input:      h4("# Source: c/cm.yaml\nkind: ConfigMap\nmetadata: {name: g-abc}\ndata: {v: r1}\n---\n" + cm("user")),
			second:     cm("user"),
			previous:   h4(cm("old")),
			output:     h4(cm("new")),
			wantReason: "ConfigMap/a: data.v changed",
		},
		{
			desc:       "a List item that changed",
			previous:   "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n  data: {v: x}\n",
			output:     "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n  data: {v: y}\n",
			wantReason: "List in document 1: items[0].data.v changed",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var v *Volatility
			if tc.input != "" {
				var err error
				if v, err = Diff([]byte(tc.input), []byte(tc.second), tc.opts); err != nil {
					t.Fatalf("Diff() = %v", err)
				}
			}
			previous, output := []byte(tc.previous), []byte(tc.output)
			got, err := Keep(previous, output, v, tc.opts)
			if err != nil {
				t.Fatalf("Keep() = %v", err)
			}
			want := output
			if tc.wantKept {
				want = previous
			}
			if got.Kept != tc.wantKept || !bytes.Equal(got.Output, want) || !strings.Contains(got.Reason, tc.wantReason) {
				t.Errorf("Keep() = kept %v (%s), want kept %v (%s); output differs from the one wanted: %v", got.Kept, got.Reason, tc.wantKept, tc.wantReason, !bytes.Equal(got.Output, want))
			}
		})
	}
}

func TestKeepErrors(t *testing.T) {
	ok := "kind: ConfigMap\nmetadata: {name: a}\n"
	for _, tc := range []struct {
		desc             string
		previous, output string
		want             string
	}{
		{desc: "bad previous output", previous: ok + "---\n# Source: c/x.yaml\nx: [\n", output: ok, want: "reading the previous output: document 2 (c/x.yaml): "},
		{desc: "bad previous output equal to the output", previous: "x: [\n", output: "x: [\n", want: "reading the previous output: document 1: "},
		{desc: "bad output", previous: ok, output: "x: {\n", want: "reading the output: document 1: "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Keep([]byte(tc.previous), []byte(tc.output), nil, Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Keep() = %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

// h4 writes the "# Source:" file of each document of s in FileAnnotation,
// as Helm 4 hands a post-renderer its documents; each document's metadata
// must be a flow mapping.
func h4(s string) string {
	docs := strings.Split(s, "---\n")
	for i, d := range docs {
		src, rest, ok := strings.Cut(d, "\n")
		file, found := strings.CutPrefix(src, "# Source: ")
		if !ok || !found {
			continue
		}
		docs[i] = strings.Replace(rest, "metadata: {", "metadata: {annotations: {"+FileAnnotation+": "+file+"}, ", 1)
	}
	return strings.Join(docs, "---\n")
}
