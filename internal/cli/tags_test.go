package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// issueTags are the tags of the issue's example, pushed in this order
// (each image created a minute after the one before).
var issueTags = []string{"1.4.1", "1.4.2", "1.5.0", "2.0.0-rc.1", "2.0.0"}

// pushCreated pushes an image for each tag of repo, created a minute
// apart from start in order, and returns the digests by tag.
func pushCreated(t *testing.T, reg *testregistry.Registry, repo string, start time.Time, tags ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, tag := range tags {
		out[tag] = reg.PushCreated(t, repo+":"+tag, start.Add(time.Duration(i)*time.Minute)).String()
	}
	return out
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestTagPolicyStrategies runs each strategy against a registry that
// pages its tag lists at 2 tags.
func TestTagPolicyStrategies(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushCreated(t, reg, "shop/web", epoch, issueTags...)
	reg.PushImage(t, "shop/web:1.4") // what the manifests name
	// Created out of name order: latest is 1.4.9, the last pushed.
	api := pushCreated(t, reg, "shop/api", epoch, "1.4.9", "main-3", "main-12", "latest")
	api["1.4.9"] = reg.PushCreated(t, "shop/api:1.4.9", epoch.Add(time.Hour)).String()
	reg.PageTags(t, 2)
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"), reg.Ref("shop/api"))
	for _, tc := range []struct {
		desc         string
		args         []string
		web, api     string // the chosen tags
		mode         string
		wantListings int
	}{
		{desc: "semver", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~1.4"}, web: "1.4.2", wantListings: 3},
		{desc: "semver range", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:>=1.2 <2"}, web: "1.5.0", wantListings: 3},
		{desc: "semver major", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:^2"}, web: "2.0.0", wantListings: 3},
		{desc: "semver pre-release asked for", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:>=2.0.0-0 <2.0.0"}, web: "2.0.0-rc.1", wantListings: 3},
		{desc: "latest", args: []string{"--tag-policy", reg.Ref("shop/api") + "=latest"}, api: "1.4.9", wantListings: 2},
		{desc: "latest ignoring", args: []string{"--tag-policy", reg.Ref("shop/api") + "=latest", "--tag-ignore", reg.Ref("shop/api") + `=^\d`}, api: "latest", wantListings: 2},
		{desc: "name", args: []string{"--tag-policy", reg.Ref("shop/api") + "=name:^main-"}, api: "main-3", wantListings: 2},
		{desc: "name allowed", args: []string{"--tag-allow", reg.Ref("shop/api") + "=-12$", "--tag-policy", reg.Ref("shop/api") + "=name:^main-"}, api: "main-12", wantListings: 2},
		{desc: "both, digest mode", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~1.4", "--tag-policy", reg.Ref("shop/api") + "=latest", "--mode", "digest"}, web: "1.4.2", api: "1.4.9", mode: "digest", wantListings: 5},
		{desc: "digest strategy", args: []string{"--tag-policy", reg.Ref("shop/web") + "=digest"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg.ResetCounts()
			r := mustRun(t, in, tc.args...)
			for _, want := range []struct{ written, tag, digest string }{
				{reg.Ref("shop/web:1.4"), tc.web, web[tc.web]},
				{reg.Ref("shop/api"), tc.api, api[tc.api]},
			} {
				if want.tag == "" {
					if !strings.Contains(r.stdout, "image: "+want.written+"@sha256:") && !strings.Contains(r.stdout, "image: "+want.written+":latest@sha256:") {
						t.Errorf("%s is not pinned as written:\n%s", want.written, r.stdout)
					}
					continue
				}
				repo, _, _ := strings.Cut(strings.TrimPrefix(want.written, reg.Host()), ":")
				line := "image: " + reg.Host() + repo + ":" + want.tag + "@" + want.digest
				if tc.mode == "digest" {
					line = "image: " + reg.Host() + repo + "@" + want.digest
				}
				if !strings.Contains(r.stdout, line+"\n") {
					t.Errorf("output lacks %q:\n%s", line, r.stdout)
				}
			}
			if n := reg.Count("GET tags"); n != tc.wantListings {
				t.Errorf("%d tags/list requests, want %d (one listing of every page, per repository with a policy)", n, tc.wantListings)
			}
		})
	}
}

// TestTagPolicyNewTagRollsItsWorkloads: a new matching tag changes the
// workloads that use it, and nothing else; images without a policy cost
// no listing, and a run without policies is what it was before.
func TestTagPolicyNewTagRollsItsWorkloads(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushCreated(t, reg, "shop/web", epoch, issueTags...)
	reg.PushImage(t, "shop/web:1.4")
	reg.PushImage(t, "shop/db:16")
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"), reg.Ref("shop/db:16"), reg.Ref("shop/web:1.4"))
	policy := []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~1.4"}
	before := mustRun(t, in, policy...)
	next := reg.PushCreated(t, "shop/web:1.4.3", epoch.Add(time.Hour)).String()
	after := mustRun(t, in, policy...)
	b, a := documents(t, before.stdout), documents(t, after.stdout)
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("want 3 documents, got %d and %d", len(b), len(a))
	}
	for i, changed := range []bool{true, false, true} {
		if got := a[i] != b[i]; got != changed {
			t.Errorf("document %d changed = %t, want %t", i+1, got, changed)
		}
	}
	if want := reg.Ref("shop/web:1.4.3@") + next; !strings.Contains(after.stdout, want) {
		t.Errorf("output lacks %s:\n%s", want, after.stdout)
	}

	// A policy for another repository: byte-identical to a run without
	// one, and no listing.
	reg.ResetCounts()
	plain := mustRun(t, in)
	other := mustRun(t, in, "--tag-policy", reg.Ref("shop/other")+"=latest")
	if plain.stdout != other.stdout {
		t.Errorf("a policy for an unused repository changed the output")
	}
	if n := reg.Count("GET tags"); n != 0 {
		t.Errorf("%d tags/list requests for images without a policy, want 0", n)
	}
}

// TestTagPolicyLockWorkflow: the lock records each choice, --frozen
// renders it offline, --check reports a newer matching tag, and the report
// lists the candidates.
func TestTagPolicyLockWorkflow(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushCreated(t, reg, "shop/web", epoch, issueTags...)
	side := reg.PushImage(t, "shop/side:1").String()
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"), reg.Ref("shop/side:1"))
	dir := t.TempDir()
	lock, report := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "report.json")
	policy := []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~1.4"}

	recorded := mustRun(t, in, append(policy, "--write-lock", lock, "--report", report)...)
	want := "# digestpin lock file: image references and the digests they resolve to.\n" +
		"# Written by `digestpin --write-lock FILE`; read by `digestpin --lock FILE`.\n" +
		"version: 4\nimages:\n" +
		"  - reference: " + reg.Ref("shop/side:1") + "\n    digest: " + side + "\n    mediaType: " + dockerManifest + "\n" +
		"  - reference: " + reg.Ref("shop/web:1.4") + "\n    digest: " + web["1.4.2"] + "\n    mediaType: " + dockerManifest + "\n    policy: semver:~1.4\n    tag: 1.4.2\n"
	if diff := cmp.Diff(want, string(testfiles.Read(t, lock))); diff != "" {
		t.Errorf("lock file (-want +got):\n%s", diff)
	}
	var rep pin.Report
	if err := json.Unmarshal(testfiles.Read(t, report), &rep); err != nil {
		t.Fatal(err)
	}
	wantPolicy := &pin.ReportPolicy{Policy: "semver:~1.4", Chosen: "1.4.2", Candidates: []string{"1.4.2", "1.4.1"}}
	if len(rep.Images) != 2 || rep.Images[0].Policy != nil || !cmp.Equal(wantPolicy, rep.Images[1].Policy) {
		t.Errorf("report images = %+v, want shop/web with %+v", rep.Images, wantPolicy)
	}

	// Offline: the same output, and not one request.
	reg.ResetCounts()
	frozen := mustRun(t, in, append(policy, "--lock", lock, "--frozen", "--report", report)...)
	if frozen.stdout != recorded.stdout || reg.Total() != 0 {
		t.Errorf("--frozen: output equal %t, %d requests; want equal, 0", frozen.stdout == recorded.stdout, reg.Total())
	}
	var frozenRep pin.Report
	if err := json.Unmarshal(testfiles.Read(t, report), &frozenRep); err != nil || len(frozenRep.Images) != 2 || !cmp.Equal(&pin.ReportPolicy{Policy: "semver:~1.4", Chosen: "1.4.2"}, frozenRep.Images[1].Policy) {
		t.Errorf("--frozen report: %v, %+v", err, frozenRep.Images)
	}
	// Another policy is not in the lock file.
	r := runPin(t, in, "--tag-policy", reg.Ref("shop/web")+"=semver:^1", "--lock", lock, "--frozen")
	if r.err == nil || !strings.Contains(r.stderr, reg.Ref("shop/web:1.4")+": not in the lock file, and --frozen asks no registry") {
		t.Errorf("--frozen with another policy = %v:\n%s", r.err, r.stderr)
	}

	// Nothing new: --check passes. Then 1.4.8 appears.
	mustRun(t, in, append(policy, "--lock", lock, "--check")...)
	reg.PushCreated(t, "shop/web:1.4.8", epoch.Add(time.Hour))
	r = runPin(t, in, append(policy, "--lock", lock, "--check")...)
	if r.err == nil || ExitCode(r.err) != 3 || r.stdout != "" {
		t.Fatalf("--check after 1.4.8 = %v (stdout %d bytes), want exit 3 (a difference) and no output", r.err, len(r.stdout))
	}
	if want := reg.Ref("shop/web") + ": policy semver:~1.4 chose 1.4.2, registry now has 1.4.8"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	// The lock file without --frozen: its choice holds, no listing.
	reg.ResetCounts()
	locked := mustRun(t, in, append(policy, "--lock", lock)...)
	if locked.stdout != recorded.stdout || reg.Count("GET tags") != 0 {
		t.Errorf("--lock: output equal %t after %d listings, want equal, 0", locked.stdout == recorded.stdout, reg.Count("GET tags"))
	}
}

// TestTagPolicyCache: a cached choice costs no request within the TTL.
func TestTagPolicyCache(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushCreated(t, reg, "shop/web", epoch, issueTags...)
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"))
	args := []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~1.4", "--cache-ttl", "1h", "--cache-dir", t.TempDir()}
	first := mustRun(t, in, args...)
	reg.ResetCounts()
	second := mustRun(t, in, args...)
	if second.stdout != first.stdout || reg.Total() != 0 {
		t.Errorf("cached run: output equal %t, %d requests; want equal, 0", second.stdout == first.stdout, reg.Total())
	}
}

func TestTagPolicyErrors(t *testing.T) {
	reg := testregistry.New(t)
	pushCreated(t, reg, "shop/web", epoch, issueTags...)
	in := gen.Deployments("shop", reg.Ref("shop/web:1.4"))
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
		code int
	}{
		{desc: "bad constraint", args: []string{"--tag-policy", "shop/web=semver:~1.x.y.z"}, want: `invalid --tag-policy "shop/web=semver:~1.x.y.z": parsing tag policy "semver:~1.x.y.z": constraint "~1.x.y.z"`, code: 2},
		{desc: "bad regexp", args: []string{"--tag-policy", "shop/web=name:(main"}, want: `invalid --tag-policy "shop/web=name:(main": parsing tag policy "name:(main": regular expression "(main"`, code: 2},
		{desc: "unknown strategy", args: []string{"--tag-policy", "shop/web=newest"}, want: `unknown strategy "newest"`, code: 2},
		{desc: "no strategy", args: []string{"--tag-policy", "shop/web"}, want: `invalid --tag-policy "shop/web": want IMAGE=STRATEGY`, code: 2},
		{desc: "tag in image", args: []string{"--tag-policy", "shop/web:1=latest"}, want: "want a repository without a tag or digest", code: 2},
		{desc: "bad ignore", args: []string{"--tag-policy", "shop/web=latest", "--tag-ignore", "shop/web=[z-a]"}, want: `invalid --tag-ignore "shop/web=[z-a]"`, code: 2},
		{desc: "allow without policy", args: []string{"--tag-allow", "shop/web=x"}, want: "shop/web has no tag policy", code: 2},
		{desc: "from the environment", env: map[string]string{"DIGESTPIN_TAG_POLICY": "shop/web=semver:<<1"}, want: `invalid DIGESTPIN_TAG_POLICY "shop/web=semver:<<1"`, code: 2},
		{desc: "annotate", args: []string{"--tag-policy", "shop/web=latest", "--mode", "annotate"}, want: "--tag-policy excludes the annotate mode", code: 2},
		{desc: "max tags", args: []string{"--tag-policy", "shop/web=latest", "--max-tags", "0"}, want: `invalid --max-tags "0": want at least 1`, code: 2},
		{desc: "no match", args: []string{"--tag-policy", reg.Ref("shop/web") + "=semver:~3"}, want: reg.Ref("shop/web") + ": policy semver:~3 matches none of its 5 tags; nearest: 2.0.0, 2.0.0-rc.1, 1.5.0, 1.4.2, 1.4.1", code: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := runPin(t, in, tc.args...)
			if r.err == nil || ExitCode(r.err) != tc.code {
				t.Fatalf("digestpin %v = %v (exit %d), want exit %d", tc.args, r.err, ExitCode(r.err), tc.code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tc.want)
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

// TestLockVersion1StillRead: a lock file written before tag policies
// renders as it did.
func TestLockVersion1StillRead(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	d := reg.PushImage(t, "app:1")
	lock := filepath.Join(t.TempDir(), "digests.lock")
	if err := os.WriteFile(lock, []byte("version: 1\nimages:\n  - reference: "+reg.Ref("app:1")+"\n    digest: "+d.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, gen.Deployments("", reg.Ref("app:1")), "--lock", lock, "--frozen")
	if !strings.Contains(r.stdout, reg.Ref("app:1@")+d.String()) {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// keelDeployment is a Deployment whose metadata carries meta (annotations
// or labels), with one container of image.
func keelDeployment(name, meta, image string) string {
	return "---\n# Source: shop/templates/" + name + ".yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + meta +
		"spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + image + "\n"
}

// TestKeelAnnotations: --keel-annotations gives a workload with Keel's
// policy its tag (pin.TestKeelPolicies checks each policy), a workload
// without Keel's annotations is unchanged, and without the flag Keel's
// annotations mean nothing.
func TestKeelAnnotations(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushCreated(t, reg, "shop/web", epoch, issueTags...)
	web["1.4"] = reg.PushImage(t, "shop/web:1.4").String()
	in := []byte(keelDeployment("web", "  annotations:\n    keel.sh/policy: patch\n", reg.Ref("shop/web:1.4.1")) + keelDeployment("plain", "", reg.Ref("shop/web:1.4")))
	r := mustRun(t, in, "--keel-annotations")
	if want := reg.Ref("shop/web:1.4.2@") + web["1.4.2"]; !strings.Contains(r.stdout, "image: "+want+"\n") {
		t.Errorf("output lacks %s:\n%s", want, r.stdout)
	}
	if !strings.Contains(r.stdout, "image: "+reg.Ref("shop/web:1.4@")+web["1.4"]+"\n") {
		t.Errorf("the workload without Keel's annotations changed:\n%s", r.stdout)
	}
	plain := mustRun(t, in)
	if !strings.Contains(plain.stdout, "image: "+reg.Ref("shop/web:1.4.1@")+web["1.4.1"]+"\n") {
		t.Errorf("without --keel-annotations:\n%s", plain.stdout)
	}

	// One reference, two policies: refused, naming both workloads.
	in = []byte(keelDeployment("a", "  annotations:\n    keel.sh/policy: patch\n", reg.Ref("shop/web:1.4.1")) + keelDeployment("b", "", reg.Ref("shop/web:1.4.1")))
	r = runPin(t, in, "--keel-annotations")
	want := `document 2 (shop/templates/b.yaml), line 26 (rendered line 10 of the template): Deployment/b container "app": ` + reg.Ref("shop/web:1.4.1") + ` would follow its own tag, but Deployment/a container "app" (document 1 (shop/templates/a.yaml), line 14 (rendered line 12 of the template)) uses it with policy semver:>=1.4.1, <1.5.0-0`
	if r.err == nil || ExitCode(r.err) != 1 || !strings.Contains(r.stderr, want) || r.stdout != "" {
		t.Errorf("conflict = %v:\n%s\nwant %q", r.err, r.stderr, want)
	}
	r = runPin(t, []byte(keelDeployment("a", "  annotations:\n    keel.sh/policy: sometimes\n", reg.Ref("shop/web:1.4.1"))), "--keel-annotations")
	if want := `unknown keel policy "sometimes"`; r.err == nil || !strings.Contains(r.stderr, want) {
		t.Errorf("unknown policy = %v:\n%s", r.err, r.stderr)
	}
}
