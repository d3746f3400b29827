package renderer

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderEditsInPlace checks that a changed document keeps every byte
// but the ones that change: indentation, comments, quoting and key order.
func TestRenderEditsInPlace(t *testing.T) {
	t.Parallel()
	d := dg("registry.example/app:1")
	sum := Checksum([]string{"app=registry.example/app:1@" + d})
	for _, tc := range []struct{ desc, in, want string }{
		{
			desc: "four-space indentation, comments, an existing annotation",
			in: `apiVersion: apps/v1   # odd spacing stays
kind: Deployment
metadata:
    name: web
spec:
    template:
        metadata:
            annotations:
                checksum/config:    "abc"     # comment
            labels: {app: web}
        spec:
            containers:
                # the app
                -   name: app
                    image: "registry.example/app:1"   # pinned by digestpin
`,
			want: `apiVersion: apps/v1   # odd spacing stays
kind: Deployment
metadata:
    name: web
spec:
    template:
        metadata:
            annotations:
                checksum/config:    "abc"     # comment
                checksum/images: 'SUM'
            labels: {app: web}
        spec:
            containers:
                # the app
                -   name: app
                    image: "registry.example/app:1@DIGEST"   # pinned by digestpin
`,
		},
		{
			desc: "metadata without annotations",
			in:   "kind: Deployment\napiVersion: apps/v1\nspec:\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
			want: "kind: Deployment\napiVersion: apps/v1\nspec:\n  template:\n    metadata:\n      labels:\n        app: web\n      annotations:\n        checksum/images: 'SUM'\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1@DIGEST\n",
		},
		{
			desc: "no metadata",
			in:   "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: 'registry.example/app:1'\n",
			want: "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    metadata:\n      annotations:\n        checksum/images: 'SUM'\n    spec:\n      containers:\n      - name: app\n        image: 'registry.example/app:1@DIGEST'\n",
		},
		{
			desc: "a stale checksum is replaced, whatever its quoting",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    checksum/images: 0123\n  name: p\nspec:\n  containers:\n  - name: app\n    image: registry.example/app:1\n",
			want: "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    checksum/images: 'SUM'\n  name: p\nspec:\n  containers:\n  - name: app\n    image: registry.example/app:1@DIGEST\n",
		},
		{
			desc: "CRLF line endings",
			in:   "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  containers:\r\n  - name: app\r\n    image: registry.example/app:1\r\n",
			want: "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\n  annotations:\r\n    checksum/images: 'SUM'\r\nspec:\r\n  containers:\r\n  - name: app\r\n    image: registry.example/app:1@DIGEST\r\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			want := strings.NewReplacer("SUM", sum, "DIGEST", d).Replace(tc.want)
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
		})
	}
}
