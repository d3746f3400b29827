package helmaction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/cli/values"
	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/detgen"
)

// The charts under testdata/charts/gen-* reproduce, with the same Helm
// functions, the shapes of public charts whose generated secrets used to
// follow the order the chart ran in: a sibling file included for a
// checksum before a generator helper; one helper called in a range over a
// map of services and over lists of users; a shared password helper called
// for several keys; generator calls in tpl values. Each is rendered with
// Helm 4's engine as digestpin template does, and changed as a user would
// change it; every generated value must stay with its call.

// genSeed is the fixed seed of these renders.
var genSeed = func() (s detgen.Seed) {
	for i := range s {
		s[i] = byte(0xa0 + i)
	}
	return s
}()

// genRendered is one render: every generated value by where it is
// ("Secret/name:key", "ConfigMap/name:key", "annotation Kind/name:key"),
// and the Generator's records.
type genRendered struct {
	values map[string]string
	gen    *detgen.Generator
}

// genChart copies testdata/charts/NAME into a temporary folder and applies
// edits (file → function of its text), so that a test can change the
// chart as a user would.
func genChart(t *testing.T, name string, edits map[string]func(string) string) string {
	t.Helper()
	src := filepath.Join("testdata", "charts", name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit, ok := edits[filepath.ToSlash(rel)]; ok {
			b = []byte(edit(string(b)))
			delete(edits, filepath.ToSlash(rel))
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel, edit := range edits {
		if err := os.WriteFile(filepath.Join(dst, rel), []byte(edit("")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// genRender renders the chart folder dir as digestpin template does, with
// --set-json values setJSON.
func genRender(t *testing.T, dir string, setJSON ...string) genRendered {
	t.Helper()
	out, g, err := genRenderErr(dir, setJSON...)
	if err != nil {
		t.Fatalf("rendering %s %v: %v", filepath.Base(dir), setJSON, err)
	}
	return genRendered{values: genValues(t, out), gen: g}
}

func genRenderErr(dir string, setJSON ...string) ([]byte, *detgen.Generator, error) {
	g := detgen.New(genSeed, detgen.Release{Name: "r", Namespace: "ns"}, func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) })
	o := Options{Source: Source{
		ReleaseName: "r",
		Chart:       dir,
		Values:      values.Options{JSONValues: setJSON},
		Funcs:       g.Funcs(),
		Rewrite:     detgen.Rewrite,
	}}
	out, err := Template(context.Background(), o)
	return out, g, err
}

// genValues collects the data, stringData and annotations of every
// document.
func genValues(t *testing.T, out []byte) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var obj struct {
			Kind     string
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
			Data       map[string]string
			StringData map[string]string `json:"stringData"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("reading the output: %v\n%s", err, doc)
		}
		id := obj.Kind + "/" + obj.Metadata.Name
		for k, v := range obj.Data {
			vals[id+":"+k] = v
		}
		for k, v := range obj.StringData {
			vals[id+":"+k] = v
		}
		for k, v := range obj.Metadata.Annotations {
			vals["annotation "+id+":"+k] = v
		}
	}
	return vals
}

// distinct fails when two of the values named share one value.
func distinct(t *testing.T, vals map[string]string, keys ...string) {
	t.Helper()
	seen := map[string]string{}
	for _, k := range keys {
		v, ok := vals[k]
		if !ok || v == "" {
			t.Errorf("no value %s in %v", k, slices.Sorted(maps.Keys(vals)))
			continue
		}
		if other, ok := seen[v]; ok {
			t.Errorf("%s and %s share the value %q", k, other, v)
		}
		seen[v] = k
	}
}

// stayed fails when a value of base other than those in changed is not
// the same in got, and when a value of got that base does not name is one
// of base's values: a change may give new values, never move one.
func stayed(t *testing.T, base, got map[string]string, changed ...string) {
	t.Helper()
	kept := 0
	for k, v := range base {
		g, ok := got[k]
		switch {
		case slices.Contains(changed, k) || !ok:
		case g != v:
			t.Errorf("%s = %q, was %q", k, g, v)
		default:
			kept++
		}
	}
	if kept < 2 {
		t.Errorf("only %d values are left to compare", kept)
	}
	for k, v := range got {
		if _, ok := base[k]; ok && !slices.Contains(changed, k) {
			continue
		}
		for bk, bv := range base {
			if bv == v && bk != k && len(v) >= 8 {
				t.Errorf("%s took %s's value %q", k, bk, v)
			}
		}
	}
}

func TestGenChecksumIncludeKeepsIdentity(t *testing.T) {
	t.Parallel()
	base := genRender(t, genChart(t, "gen-checksum", nil))
	distinct(t, base.values, "Secret/r-app-a:password", "Secret/r-app-b:password", "ConfigMap/r-config:session-key")
	distinct(t, base.values, "Secret/r-app-a:tls.key", "Secret/r-app-b:tls.key", "Secret/r-webhook-tls:tls.key")
	distinct(t, base.values, "Secret/r-app-a:tls.crt", "Secret/r-app-b:tls.crt", "Secret/r-webhook-tls:tls.crt")

	// The include shows the values the file renders: the checksum is
	// that of the ConfigMap as rendered, and the CA read through an
	// include is the one in the Secret.
	cm, err := os.ReadFile("testdata/charts/gen-checksum/templates/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("{{ .Release.Name }}", "r", "{{ randAlphaNum 16 }}", base.values["ConfigMap/r-config:session-key"]).Replace(string(cm))
	sum := sha256.Sum256([]byte(text))
	for _, app := range []string{"app-a", "app-b"} {
		if got := base.values["annotation Secret/r-"+app+":checksum/config"]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s's checksum/config = %s, want the rendered ConfigMap's %x", app, got, sum)
		}
	}
	if ca, bundle := base.values["Secret/r-webhook-tls:ca.crt"], base.values["ConfigMap/r-webhook:caBundle"]; ca == "" || ca != bundle {
		t.Errorf("caBundle read through an include = %.40q, want the Secret's ca.crt %.40q", bundle, ca)
	}
	// One genCA, run twice (by Helm and by the include), is one
	// certificate.
	n := 0
	for _, c := range base.gen.Certificates() {
		if c.CommonName == "webhook-ca" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("webhook-ca recorded %d times, want once: %+v", n, base.gen.Certificates())
	}

	// Moving the checksum line below the calls changes no value.
	moved := genRender(t, genChart(t, "gen-checksum", map[string]func(string) string{
		"templates/app-a.yaml": func(s string) string {
			// metadata, with the checksum, after stringData and data.
			l := strings.Split(s, "\n")
			return strings.Join(slices.Concat(l[:2], l[6:10], l[2:6], []string{""}), "\n")
		},
	}))
	stayed(t, base.values, moved.values)
}

func TestGenPrincipalsKeepTheirSecrets(t *testing.T) {
	t.Parallel()
	dir := genChart(t, "gen-principals", nil)
	base := genRender(t, dir)
	all := slices.Sorted(maps.Keys(base.values))
	distinct(t, base.values, all...)
	if len(all) != 9 {
		t.Fatalf("base render has %d values, want 9: %v", len(all), all)
	}
	if o := base.gen.Ordered(); len(o) != 0 {
		t.Errorf("Ordered() = %+v, want none: every value has a key", o)
	}
	for _, tc := range []struct {
		desc    string
		set     []string
		changed []string
	}{
		{"a service added first", []string{`services={"aaa":{},"grafana":{},"jupyter":{}}`}, nil},
		{"a service removed", []string{`services={"jupyter":{}}`}, nil},
		{"the cookie secret given", []string{`cookieSecret="given"`}, []string{"Secret/r-hub:cookieSecret"}},
		{"a service's token given", []string{`services={"grafana":{"apiToken":"given"},"jupyter":{}}`}, []string{"Secret/r-hub:services.grafana.apiToken"}},
		{"the first user removed", []string{`users=["bob","carol"]`}, nil},
		{"users reordered and one added", []string{`users=["zed","carol","alice","bob"]`}, nil},
		{"an account removed", []string{`accounts=[{"name":"ci","role":"deploy"}]`}, nil},
		{"an account's other field changed", []string{`accounts=[{"name":"ops","role":"viewer"},{"name":"ci","role":"deploy"}]`}, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := genRender(t, dir, tc.set...)
			stayed(t, base.values, got.values, tc.changed...)
		})
	}

	// Entries that have no name: their values follow their position,
	// and a warning says so.
	t.Run("unnamed entries", func(t *testing.T) {
		t.Parallel()
		got := genRender(t, dir, `accounts=[{"role":"admin"}]`)
		o := got.gen.Ordered()
		if len(o) != 1 || o[0].Template != "gen-principals/templates/users-secret.yaml" || o[0].Line != 9 {
			t.Errorf("Ordered() = %+v, want the range over accounts (users-secret.yaml line 9)", o)
		}
	})
}

func TestGenSharedPasswordHelper(t *testing.T) {
	t.Parallel()
	keys := []string{"Secret/r-db:root-password", "Secret/r-db:password", "Secret/r-db:replication-password"}
	base := genRender(t, genChart(t, "gen-passwords", nil))
	distinct(t, base.values, keys...)

	given := genRender(t, genChart(t, "gen-passwords", nil), `auth={"password":"given"}`)
	stayed(t, base.values, given.values, "Secret/r-db:password")

	added := genRender(t, genChart(t, "gen-passwords", map[string]func(string) string{
		"templates/secret.yaml": func(s string) string {
			return strings.Replace(s, "\ndata:\n", "\ndata:\n  admin-password: {{ include \"gen.secrets.passwords.manage\" (dict \"key\" \"adminPassword\" \"context\" $) }}\n", 1)
		},
	}))
	stayed(t, base.values, added.values)
	distinct(t, added.values, append(keys, "Secret/r-db:admin-password")...)
}

func TestGenTplValues(t *testing.T) {
	t.Parallel()
	dir := genChart(t, "gen-tpl", nil)
	base := genRender(t, dir)
	distinct(t, base.values, "Secret/r-tpl:api", "Secret/r-tpl:web")
	x, y, ok := strings.Cut(strings.TrimSuffix(base.values["Secret/r-tpl:tokens"], ";"), ";")
	if !ok || strings.TrimPrefix(x, "x=") == strings.TrimPrefix(y, "y=") {
		t.Errorf("tokens = %q, want two different values", base.values["Secret/r-tpl:tokens"])
	}
	got := genRender(t, dir, `templated={"aaa":"{{ randAlphaNum 12 }}","api":"{{ randAlphaNum 12 }}","web":"{{ randAlphaNum 12 }}"}`)
	stayed(t, base.values, got.values)
}

// TestGenInternalsNotChartLanguage: a chart or a tpl value that names a
// located function fails as it fails under Helm, which has no such
// function.
func TestGenInternalsNotChartLanguage(t *testing.T) {
	t.Parallel()
	forged := `{{ _dp_uuidv4 "v2|1|00||x" }}`
	for _, tc := range []struct {
		desc string
		dir  string
		set  []string
	}{
		{"template", genChart(t, "gen-tpl", map[string]func(string) string{"templates/forged.yaml": func(string) string { return "a: " + forged + "\n" }}), nil},
		{"tpl value", genChart(t, "gen-tpl", nil), []string{fmt.Sprintf("tokens=%q", forged)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := genRenderErr(tc.dir, tc.set...)
			if err == nil || !strings.Contains(err.Error(), `function "_dp_uuidv4" not defined`) {
				t.Errorf("render = %v, want function \"_dp_uuidv4\" not defined", err)
			}
			// Helm's own engine, without digestpin's functions.
			_, herr := Template(context.Background(), Options{Source: Source{ReleaseName: "r", Chart: tc.dir, Values: values.Options{JSONValues: tc.set}}})
			if herr == nil || !strings.Contains(herr.Error(), `function "_dp_uuidv4" not defined`) {
				t.Errorf("Helm's render = %v, want function \"_dp_uuidv4\" not defined", herr)
			}
		})
	}
}
