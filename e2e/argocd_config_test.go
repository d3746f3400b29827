package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestArgoCDConfigFile passes an Application's DIGESTPIN_CONFIG, a file in
// its repository, to digestpin as --config: a valid file renders as
// without it (it declares kinds the chart does not have), a bad one fails
// the generation naming the file and line, and a path outside the
// repository is refused before digestpin runs.
func TestArgoCDConfigFile(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	src := argoApp(t, registryValues(reg))
	values := "VALUES_FILES=values-e2e.yaml"
	live := sc.generate(t, src, values)
	if live.err != nil {
		t.Fatalf("generate: %v\n%s", live.err, live.stderr)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, "digestpin.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("apiVersion: digestpin.dev/v1alpha1\nkind: Config\nimagePaths:\n- example.com/Runner=spec.runnerImage\n")
	got := sc.generate(t, src, values, "DIGESTPIN_CONFIG=digestpin.yaml")
	if got.err != nil {
		t.Fatalf("generate with a configuration file: %v\n%s", got.err, got.stderr)
	}
	if got.stdout != live.stdout {
		t.Errorf("a configuration file for other kinds changed the output:\n%s", cmp.Diff(live.stdout, got.stdout))
	}

	write("apiVersion: digestpin.dev/v1alpha1\nkind: Config\nimagepaths:\n- example.com/Runner=spec.runnerImage\n")
	for _, tc := range []struct {
		desc, path, want string
	}{
		{desc: "an unknown key", path: "digestpin.yaml", want: `digestpin: error: DIGESTPIN_CONFIG: digestpin.yaml, line 3: unknown key "imagepaths"`},
		{desc: "an absolute path", path: "/etc/hostname", want: "digestpin-cmp: configuration file /etc/hostname: want a path relative to the source folder"},
		{desc: "a path outside the repository", path: "../../digestpin.yaml", want: "digestpin-cmp: configuration file ../../digestpin.yaml: "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := sc.generate(t, src, values, "DIGESTPIN_CONFIG="+tc.path)
			if r.err == nil {
				t.Fatalf("generate succeeded, want a failure")
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tc.want)
			}
		})
	}
}
