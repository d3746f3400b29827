//go:build unix

package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// gitlabJob is a job of a GitLab CI file: every key the template may use,
// and no other.
type gitlabJob struct {
	Variables map[string]string `yaml:"variables"`
	Artifacts struct {
		When     string   `yaml:"when"`
		ExposeAs string   `yaml:"expose_as"`
		Paths    []string `yaml:"paths"`
	} `yaml:"artifacts"`
	BeforeScript []string `yaml:"before_script"`
	Script       []string `yaml:"script"`
}

// gitlabTemplate reads scripts/ci/gitlab/digestpin.gitlab-ci.yml and
// returns its hidden job .digestpin-lock, the one users extend.
func gitlabTemplate(t *testing.T) gitlabJob {
	t.Helper()
	var jobs map[string]gitlabJob
	decodeStrict(t, filepath.Join(repoRoot(t), "scripts", "ci", "gitlab", "digestpin.gitlab-ci.yml"), &jobs)
	job, ok := jobs[".digestpin-lock"]
	if !ok || len(jobs) != 1 || len(job.Script) == 0 {
		t.Fatalf("the GitLab template has jobs %v, want one, .digestpin-lock, with a script", jobs)
	}
	// The summary is the artifact a merge request shows: its path in
	// the project folder, literal (GitLab exposes no artifact whose path
	// is a variable), kept when the job fails (a check that found a
	// moved image).
	if a := job.Artifacts; a.When != "always" || a.ExposeAs == "" || !slices.Equal(a.Paths, []string{job.Variables["DIGESTPIN_CI_SUMMARY"]}) || a.Paths[0] != ciSummary {
		t.Fatalf("the GitLab template's artifacts are %+v with DIGESTPIN_CI_SUMMARY=%q, want %s, exposed, always", a, job.Variables["DIGESTPIN_CI_SUMMARY"], ciSummary)
	}
	for k, v := range job.Variables {
		// GitLab expands $NAME in variables; the test does not, so the
		// template may not rely on it.
		if strings.Contains(v, "$") {
			t.Fatalf("the GitLab template's variable %s=%q refers to another variable", k, v)
		}
	}
	return job
}

// runGitLabJob runs a job that extends the template as a GitLab runner's
// shell executor does: the template's variables, overridden by the job's,
// and GitLab's own for a branch pipeline in the environment; before_script
// and script lines one after the other in one bash with -eo pipefail, in
// the project folder, a detached checkout of the commit. It returns what
// the job printed.
func runGitLabJob(t *testing.T, job gitlabJob, project, path string, vars map[string]string) (string, error) {
	t.Helper()
	env := append(ciGitEnv(project),
		"PATH="+path, "HOME="+t.TempDir(), "TMPDIR="+t.TempDir(), "CI=true", "GITLAB_CI=true",
		"CI_PROJECT_DIR="+project, "CI_COMMIT_BRANCH=main", "CI_COMMIT_REF_NAME=main",
		"GITLAB_USER_NAME=Shop Maintainer", "GITLAB_USER_EMAIL=maintainer@shop.example",
		// No cluster: never the developer's own.
		"KUBECONFIG="+filepath.Join(t.TempDir(), "no-kubeconfig"))
	for k, v := range job.Variables {
		env = append(env, k+"="+v)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	script := "set -eo pipefail\n" + strings.Join(append(append([]string(nil), job.BeforeScript...), job.Script...), "\n") + "\n"
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = project
	cmd.Env = cleanEnv(env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestGitLabTemplate runs a job extending the GitLab CI template, as a
// GitLab runner would, in a detached checkout with a chart and without
// helm (digestpin template renders it), with the seed in a CI/CD variable,
// against a release served on loopback (made by make release for this
// platform) and a loopback registry.
func TestGitLabTemplate(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	base := releaseServer(t, dir, version)
	job := gitlabTemplate(t)
	if got := job.Variables["DIGESTPIN_CI_VERSION"]; got != version {
		t.Errorf("the GitLab template installs digestpin %q by default, plugin.yaml says %q", got, version)
	}
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	r := newCIRepo(t, reg)
	// A GitLab runner checks out the commit, not the branch.
	git(t, r.dir, "checkout", "-q", "--detach")
	path := ciPath(t)
	// digestpin is downloaded into the tools folder the runs share (a
	// runner's cache).
	tools := t.TempDir()
	seed := seedText(t)

	with := func(extra ...string) map[string]string {
		m := map[string]string{
			"DIGESTPIN_CI_CHART": "web", "DIGESTPIN_CI_RELEASE": "shop", "DIGESTPIN_CI_NAMESPACE": "prod",
			"DIGESTPIN_CI_VALUES": "web/values-e2e.yaml", "DIGESTPIN_CI_RELEASES_URL": base + "/v" + version,
			"DIGESTPIN_CI_PUSH_URL": r.origin, "DIGESTPIN_CI_TOOLS": tools, "DIGESTPIN_CI_SEED": seed,
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	runCICases(t, r, reg, digests, []ciCase{
		{
			desc: "first update", vars: with(), commit: true,
			output:  []string{"installed digestpin " + version, "web/digests.lock updated", "pushed to branch main", "summary written to " + ciSummary},
			summary: []string{"### digestpin: 4 images pinned (nothing to compare with", "| `" + reg.Ref("shop/worker:2.0") + "` | added | `"},
			absent:  []string{strings.TrimSpace(seed), "throwaway"},
		},
		{desc: "update, nothing changed", vars: with(), output: []string{"web/digests.lock unchanged", "nothing to commit"}},
		{
			desc: "check after a push", vars: with("DIGESTPIN_CI_MODE", "check"), push: "shop/web:1.4", fail: true,
			output:  []string{reg.Ref("shop/web:1.4") + ": moved from", "does not match the registry"},
			summary: []string{"### digestpin: 1 image moved", "| `" + reg.Ref("shop/web:1.4") + "` | `"},
		},
		{
			desc: "check of a broken chart", vars: with("DIGESTPIN_CI_MODE", "check"), broken: true, fail: true,
			output: []string{"render failed", "broken.yaml", "nil pointer"}, absent: []string{"does not match the registry"},
		},
		{
			desc: "the seed in a file variable and as a value", vars: with("DIGESTPIN_CI_SEED_FILE", newSeed(t)), fail: true,
			output: []string{"DIGESTPIN_CI_SEED and DIGESTPIN_CI_SEED_FILE are both set"}, absent: []string{"digestpin-lock:"},
		},
		{
			// What moved is in the job log (GitLab has no job summary) and
			// in the commit message (runCICases).
			desc: "update after the push", vars: with(), commit: true,
			output:  []string{"web/digests.lock updated", "digestpin-lock: 1 image moved", "digestpin-lock: " + reg.Ref("shop/web:1.4") + " "},
			summary: []string{"### digestpin: 1 image moved", "Deployment/prod/"},
		},
		{
			desc: "check", vars: with("DIGESTPIN_CI_MODE", "check"), output: []string{"web/digests.lock matches the registry", "digestpin-lock: no image moved"},
			summary: []string{"### digestpin: no image moved"},
		},
		{
			desc: "wrong checksum", vars: with("DIGESTPIN_CI_RELEASES_URL", base+"/bad"), fail: true,
			output: []string{"refusing to install it"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "no release", vars: with("DIGESTPIN_CI_RELEASES_URL", base+"/v0.0.0"), fail: true,
			output: []string{"cannot download " + base + "/v0.0.0/SHA256SUMS"}, absent: []string{"digestpin-lock:"},
		},
		// The refresh itself runs under a running Argo CD in e2e/argocd.
		{
			desc: "refresh without a cluster", vars: map[string]string{
				"DIGESTPIN_CI_MODE": "refresh", "DIGESTPIN_CI_IMAGES": reg.Ref("shop/web:1.4"),
				"DIGESTPIN_CI_RELEASES_URL": base + "/v" + version, "DIGESTPIN_CI_TOOLS": tools,
			}, fail: true,
			output: []string{"digestpin: error: reading the kubeconfig: invalid configuration: no configuration has been provided"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "refresh-moved without a cluster", vars: map[string]string{
				"DIGESTPIN_CI_MODE": "refresh-moved", "DIGESTPIN_CI_ARGOCD_SELECTOR": "team=shop",
				"DIGESTPIN_CI_RELEASES_URL": base + "/v" + version, "DIGESTPIN_CI_TOOLS": tools,
			}, fail: true,
			output: []string{"digestpin: error: reading the kubeconfig: invalid configuration: no configuration has been provided"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "refresh-moved with a bad cache", vars: map[string]string{
				"DIGESTPIN_CI_MODE": "refresh-moved", "DIGESTPIN_CACHE": "memcached://cache:11211",
				"DIGESTPIN_CI_RELEASES_URL": base + "/v" + version, "DIGESTPIN_CI_TOOLS": tools,
			}, fail: true,
			output: []string{"digestpin: error: DIGESTPIN_CACHE: "}, absent: []string{"kubeconfig"},
		},
	}, func(vars map[string]string) (string, error) {
		return runGitLabJob(t, job, r.dir, path, vars)
	})
	// The job's commits carry the name GitLab gives the person who ran
	// the pipeline.
	if got := gitOut(t, r.dir, "log", "-1", "--format=%an <%ae>"); got != "Shop Maintainer <maintainer@shop.example>" {
		t.Errorf("the job's commit is by %q, want the pipeline's user", got)
	}
}
