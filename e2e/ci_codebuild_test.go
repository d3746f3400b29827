//go:build unix

package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// buildspec is scripts/ci/codebuild/buildspec.yml: every key the example
// uses, and no other.
type buildspec struct {
	Version any `yaml:"version"`
	Env     struct {
		Shell               string            `yaml:"shell"`
		Variables           map[string]string `yaml:"variables"`
		SecretsManager      map[string]string `yaml:"secrets-manager"`
		GitCredentialHelper any               `yaml:"git-credential-helper"`
	} `yaml:"env"`
	Phases map[string]struct {
		Commands []string `yaml:"commands"`
	} `yaml:"phases"`
}

// codebuildPhases are CodeBuild's phases, in the order it runs them.
var codebuildPhases = []string{"install", "pre_build", "build", "post_build"}

// readBuildspec reads the example, and checks what the test relies on.
func readBuildspec(t *testing.T) buildspec {
	t.Helper()
	var b buildspec
	decodeStrict(t, filepath.Join(repoRoot(t), "scripts", "ci", "codebuild", "buildspec.yml"), &b)
	if b.Version != 0.2 || b.Env.Shell != "bash" {
		t.Fatalf("buildspec version %v, shell %q: want 0.2 (one shell for all commands) and bash", b.Version, b.Env.Shell)
	}
	for name := range b.Phases {
		if !strings.Contains(strings.Join(codebuildPhases, " "), name) {
			t.Fatalf("buildspec phase %q is not one of CodeBuild's", name)
		}
	}
	for k, v := range b.Env.Variables {
		// CodeBuild does not expand $NAME in variables.
		if strings.Contains(v, "$") {
			t.Fatalf("the buildspec's variable %s=%q refers to another variable", k, v)
		}
	}
	return b
}

// runCodeBuild runs the buildspec's commands as CodeBuild does with
// version 0.2: every phase's commands one after the other in one bash, in
// the source folder (a checkout of the commit, detached), stopping at the
// first that fails; the buildspec's variables, then CodeBuild's own for a
// webhook build of a push to main, the Secrets Manager values given, and
// vars, in the environment.
func runCodeBuild(t *testing.T, b buildspec, src, path string, secrets, vars map[string]string) (string, error) {
	t.Helper()
	env := append(ciGitEnv(src),
		"PATH="+path, "HOME="+t.TempDir(), "TMPDIR="+t.TempDir(), "CODEBUILD_CI=true",
		"CODEBUILD_SRC_DIR="+src, "CODEBUILD_BUILD_ID=shop:1", "CODEBUILD_WEBHOOK_HEAD_REF=refs/heads/main",
		"CODEBUILD_WEBHOOK_EVENT=PUSH")
	for k, v := range b.Env.Variables {
		env = append(env, k+"="+v)
	}
	for k := range b.Env.SecretsManager {
		v, ok := secrets[k]
		if !ok {
			t.Fatalf("the buildspec takes %s from Secrets Manager; the test gives no value", k)
		}
		env = append(env, k+"="+v)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	var commands []string
	for _, p := range codebuildPhases {
		commands = append(commands, b.Phases[p].Commands...)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", strings.Join(commands, "\n")+"\n")
	cmd.Dir = src
	cmd.Env = cleanEnv(env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestCodeBuildBuildspec runs the CodeBuild example against a release that
// make release built and a registry that wants credentials, both on
// loopback. The credentials come from a docker credential helper on PATH,
// as amazon-ecr-credential-helper gives them on CodeBuild (here a small
// helper of the test's that speaks the same protocol, for the loopback
// registry only): with it the lock file is recorded and pushed; without it
// the registry refuses, and the build fails naming the image.
func TestCodeBuildBuildspec(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	base := releaseServer(t, dir, version)
	spec := readBuildspec(t)
	if got := spec.Env.Variables["DIGESTPIN_CI_VERSION"]; got != version {
		t.Errorf("the buildspec installs digestpin %q by default, plugin.yaml says %q", got, version)
	}
	const user, token = "AWS", "ecr-token-not-printed"
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	// The build's digestpin must log in; the test's own pushes (new
	// images) need not.
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); !strings.HasPrefix(r.UserAgent(), "digestpin/") || ok && u == user && p == token {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="ecr"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return true
	})
	r := newCIRepo(t, reg)
	git(t, r.dir, "checkout", "-q", "--detach")

	// docker-credential-ecr-login's protocol: "get" with the registry on
	// stdin, a JSON answer on stdout.
	helpers := t.TempDir()
	mkfile(t, filepath.Join(helpers, "docker-credential-test-login"), `#!/bin/sh
[ "$1" = get ] || exit 1
read -r server
[ "$server" = "`+reg.Host()+`" ] || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL":"%s","Username":"`+user+`","Secret":"`+token+`"}\n' "$server"
`)
	if err := os.Chmod(filepath.Join(helpers, "docker-credential-test-login"), 0o755); err != nil {
		t.Fatal(err)
	}
	withHelper := helpers + ":" + ciPath(t)
	seed := seedText(t)
	secrets := map[string]string{"DIGESTPIN_CI_SEED": seed}
	with := func(extra ...string) map[string]string {
		m := map[string]string{
			"DIGESTPIN_CI_CHART": "web", "DIGESTPIN_CI_RELEASE": "shop", "DIGESTPIN_CI_NAMESPACE": "prod",
			"DIGESTPIN_CI_VALUES": "web/values-e2e.yaml", "DIGESTPIN_CI_RELEASES_URL": base + "/v" + version,
			"DIGESTPIN_CI_PUSH_URL": r.origin, "DIGESTPIN_CI_CRED_HELPERS": reg.Host() + "=test-login",
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	path := withHelper
	runCICases(t, r, reg, digests, []ciCase{
		{
			desc: "first update", vars: with(), commit: true,
			output: []string{"installed digestpin " + version, "web/digests.lock updated", "pushed to branch main"},
			absent: []string{strings.TrimSpace(seed), token, "throwaway"},
		},
		{desc: "update, nothing changed", vars: with(), output: []string{"web/digests.lock unchanged", "nothing to commit"}},
		{
			desc: "check after a push", vars: with("DIGESTPIN_CI_MODE", "check"), push: "shop/web:1.4", fail: true,
			output: []string{reg.Ref("shop/web:1.4") + ": moved from", "does not match the registry"},
		},
		{desc: "update after the push", vars: with(), commit: true, output: []string{"web/digests.lock updated"}},
		{
			desc: "the helper for another registry", vars: with("DIGESTPIN_CI_CRED_HELPERS", "123456789012.dkr.ecr.eu-west-1.amazonaws.com=test-login"), fail: true,
			output: []string{reg.Ref("shop/web:1.4"), "401", "was left as it was"}, absent: []string{token},
		},
		{
			desc: "a credHelpers entry that is not REGISTRY=HELPER", vars: with("DIGESTPIN_CI_CRED_HELPERS", `x","credsStore":"evil`), fail: true,
			output: []string{"DIGESTPIN_CI_CRED_HELPERS entry"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "wrong checksum", vars: with("DIGESTPIN_CI_RELEASES_URL", base+"/bad"), fail: true,
			output: []string{"refusing to install it"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "no release", vars: with("DIGESTPIN_CI_RELEASES_URL", base+"/v0.0.0"), fail: true,
			output: []string{"cannot download " + base + "/v0.0.0/"}, absent: []string{"digestpin-lock:"},
		},
	}, func(vars map[string]string) (string, error) {
		return runCodeBuild(t, spec, r.dir, path, secrets, vars)
	})

	// Without the helper on PATH, the same configuration fails too.
	path = ciPath(t)
	out, err := runCodeBuild(t, spec, r.dir, path, secrets, with())
	if err == nil || !strings.Contains(out, reg.Ref("shop/")) {
		t.Errorf("without the credential helper: %v\n%s\nwant a failure naming the images", err, out)
	}
	if got := gitOut(t, r.dir, "log", "-1", "--format=%an <%ae>"); got != spec.Env.Variables["DIGESTPIN_CI_GIT_NAME"]+" <"+spec.Env.Variables["DIGESTPIN_CI_GIT_EMAIL"]+">" {
		t.Errorf("the build's commit is by %q, want the buildspec's DIGESTPIN_CI_GIT_NAME and _EMAIL", got)
	}
}
