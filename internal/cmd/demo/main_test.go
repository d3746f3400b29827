package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: shop\n  namespace: shop\n"
	web     = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: web:1@sha256:1111\n"
	report  = "# Source: shop/templates/report.yaml\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: report\n  namespace: shop\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: report\n              image: report:1@sha256:1111\n"
	global  = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n"
)

// stream joins documents as Helm writes them.
func stream(docs ...string) []byte { return []byte("---\n" + strings.Join(docs, "---\n")) }

// moved is doc with its image moved to another digest.
func moved(doc string) string { return strings.ReplaceAll(doc, "sha256:1111", "sha256:2222") }

func TestChangedDocuments(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		before, after []byte
		want          string
	}{
		{
			desc: "nothing changed", before: stream(service, web, report, global), after: stream(service, web, report, global),
			want: "0 of 4 documents changed",
		},
		{
			desc: "one", before: stream(service, web, report), after: stream(service, moved(web), report),
			want: "1 of 3 documents changed: Deployment/shop/web",
		},
		{
			desc: "two, in stream order", before: stream(service, web, report, global), after: stream(service, moved(web), moved(report), global),
			want: "2 of 4 documents changed: Deployment/shop/web, CronJob/shop/report",
		},
		{
			desc: "no namespace", before: stream(global), after: stream(strings.ReplaceAll(global, "reader", "reader\n  labels:\n    a: b")),
			want: "1 of 1 document changed: ClusterRole/reader",
		},
		{
			desc: "empty documents and comments left out", before: stream(service, "# Source: empty.yaml\n", web), after: stream(service, "", moved(web)),
			want: "1 of 2 documents changed: Deployment/shop/web",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := changedDocuments(tc.before, tc.after)
			if err != nil || got != tc.want {
				t.Errorf("changedDocuments() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestChangedDocumentsErrors(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		before, after []byte
		want          string
	}{
		{desc: "a document more", before: stream(service), after: stream(service, web), want: "the outputs have 1 and 2 documents"},
		{desc: "malformed", before: stream(service), after: []byte("a: [\n"), want: "reading the second output: document 1:"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := changedDocuments(tc.before, tc.after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("changedDocuments() = %q, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
}

// TestDemo runs the demo as make demo does, with the binary that make
// test builds (DIGESTPIN_TEST_BIN).
func TestDemo(t *testing.T) {
	bin := os.Getenv("DIGESTPIN_TEST_BIN")
	if _, err := os.Stat(bin); bin == "" || err != nil {
		msg := "DIGESTPIN_TEST_BIN does not name a digestpin binary; run the tests with `make test`, which builds it"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	example := filepath.Join("..", "..", "..", "testdata", "example.yaml")
	var stdout, stderr bytes.Buffer
	if err := demo([]string{"--", bin, example}, &stdout, &stderr); err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"# second run: byte-identical output: true\n",
		"# pushed a new image as registry.example/shop/migrate:dev: 1 of 3 documents changed: Deployment/shop-web\n",
		"#   1 image moved, 3 unchanged (against the earlier output)\n#   registry.example/shop/migrate:dev ",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("demo's messages lack %q:\n%s", want, stderr.String())
		}
	}
	if moved := regexp.MustCompile(`(?m)^#   registry\.example/shop/migrate:dev [0-9a-f]{12} → [0-9a-f]{12}: Deployment/shop-web$`); !moved.MatchString(stderr.String()) {
		t.Errorf("demo's summary lacks the moved image, old → new:\n%s", stderr.String())
	}
	// The output is the pinned example, with the example's registry name.
	pinned := regexp.MustCompile(`image: "?registry\.example/shop/[a-z]+:[a-z0-9.]+@sha256:[0-9a-f]{64}"?\n`)
	if got := len(pinned.FindAllString(stdout.String(), -1)); got != 4 {
		t.Errorf("demo's output pins %d images, want 4:\n%s", got, stdout.String())
	}
}
