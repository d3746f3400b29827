package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// writeConfig writes a configuration file of the given keys and returns
// its path.
func writeConfig(t *testing.T, keys string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "digestpin.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\n"+keys), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigTagPolicies: the configuration file's tagPolicies, tagAllow
// and tagIgnore choose tags as the flags do, and flags add to them: a
// flag's policy or filter for an image of the file replaces the file's.
func TestConfigTagPolicies(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushCreated(t, reg, "shop/web", epoch, issueTags...)
	api := pushCreated(t, reg, "shop/api", epoch, "1.4.9", "main-3", "main-12", "latest")
	reg.PushImage(t, "shop/web:1.4")
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"), reg.Ref("shop/api"))
	webRepo, apiRepo := reg.Ref("shop/web"), reg.Ref("shop/api")
	for _, tc := range []struct {
		desc, keys string
		args       []string
		want       []string // tag@digest lines of the output
	}{
		{
			desc: "the file's policies",
			keys: "tagPolicies:\n- " + webRepo + "=semver:~1.4\n- " + apiRepo + "=name:^main-\ntagAllow: ['" + apiRepo + "=-12$']\n",
			want: []string{webRepo + ":1.4.2@" + web["1.4.2"], apiRepo + ":main-12@" + api["main-12"]},
		},
		{
			desc: "a flag adds a policy",
			keys: "tagPolicies: ['" + webRepo + "=semver:~1.4']\n",
			args: []string{"--tag-policy", apiRepo + "=name:^main-"},
			want: []string{webRepo + ":1.4.2@" + web["1.4.2"], apiRepo + ":main-3@" + api["main-3"]},
		},
		{
			desc: "a flag replaces the file's strategy and keeps its filter",
			keys: "tagPolicies: ['" + webRepo + "=semver:~1.4']\ntagIgnore: ['" + webRepo + "=^2\\.0\\.0$']\n",
			args: []string{"--tag-policy", webRepo + "=semver:>=1.5"},
			// Without the file's filter, 2.0.0 would win.
			want: []string{webRepo + ":1.5.0@" + web["1.5.0"]},
		},
		{
			desc: "a flag filters the file's policy",
			keys: "tagPolicies: ['" + apiRepo + "=latest']\n",
			args: []string{"--tag-ignore", apiRepo + `=^\d`},
			want: []string{apiRepo + ":latest@" + api["latest"]},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			args := append([]string{"--config", writeConfig(t, tc.keys)}, tc.args...)
			r := mustRun(t, in, args...)
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, "image: "+w+"\n") {
					t.Errorf("output lacks image %s:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestConfigTagPolicyErrors: a bad entry of the file is a usage error
// naming the file, the line and the key, checked by the flags' parser.
func TestConfigTagPolicyErrors(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushCreated(t, reg, "shop/web", epoch, issueTags...)
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"))
	for _, tc := range []struct {
		desc, keys string
		args       []string
		want       string
	}{
		{desc: "no strategy", keys: "tagPolicies:\n- shop/web\n", want: `, line 4: tagPolicies: invalid "shop/web": want IMAGE=STRATEGY`},
		{desc: "unknown strategy", keys: "tagPolicies: [shop/web=newest]\n", want: `, line 3: tagPolicies: invalid "shop/web=newest": parsing tag policy "newest": unknown strategy "newest"`},
		{desc: "a tag in the image", keys: "tagPolicies: ['shop/web:1=latest']\n", want: "want a repository without a tag or digest"},
		{desc: "a bad filter", keys: "tagPolicies: [shop/web=latest]\ntagAllow:\n- shop/web=[z-a]\n", want: `, line 5: tagAllow: invalid "shop/web=[z-a]": parsing regular expression "[z-a]"`},
		{desc: "a filter without policy", keys: "tagIgnore: [shop/api=x]\n", want: `, line 3: tagIgnore: invalid "shop/api=x": shop/api has no tag policy`},
		{desc: "a number", keys: "tagPolicies: [1]\n", want: `, line 3: tagPolicies: want a string, found int 1`},
		{desc: "a flag's error names the flag", keys: "tagPolicies: [shop/web=latest]\n", args: []string{"--tag-policy", "shop/web"}, want: `invalid --tag-policy "shop/web": want IMAGE=STRATEGY`},
		{desc: "annotate mode", keys: "tagPolicies: [shop/web=latest]\n", args: []string{"--mode", "annotate"}, want: ": tagPolicies excludes the annotate mode"},
		{desc: "annotate mode, with a flag's policy", keys: "tagPolicies: [shop/web=latest]\n", args: []string{"--mode", "annotate", "--tag-policy", "shop/api=latest"}, want: "--tag-policy excludes the annotate mode"},
		{desc: "max tags", keys: "tagPolicies: [shop/web=latest]\n", args: []string{"--max-tags", "0"}, want: `invalid --max-tags "0": want at least 1`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := writeConfig(t, tc.keys)
			r := runPin(t, in, append([]string{"--config", path}, tc.args...)...)
			if r.err == nil || ExitCode(r.err) != 2 {
				t.Fatalf("digestpin = %v (exit %d), want exit 2", r.err, ExitCode(r.err))
			}
			want := tc.want
			if strings.HasPrefix(want, ", line") || strings.HasPrefix(want, ": tagPolicies") {
				want = "--config: " + path + want
			}
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("stderr has several lines, want one:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on an error", r.stdout)
			}
		})
	}
}
