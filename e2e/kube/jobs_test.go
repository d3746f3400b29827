//go:build linux

package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// jobsChart is testdata/jobs: Job migrate, CronJob nightly and the hook
// Job hook (pre-install, post-upgrade).
func jobsChart(t *testing.T) string {
	return filepath.Join(repoRoot(t), "e2e", "kube", "testdata", "jobs")
}

// pod is what the tests read of a Pod.
type pod struct {
	Metadata struct {
		Name            string            `json:"name"`
		Annotations     map[string]string `json:"annotations"`
		OwnerReferences []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// jobPods waits until the job controller has made a Pod for the Job name
// in ns and returns the Job's pod template and its Pods.
func (c *cluster) jobPods(t *testing.T, ns, name string) (object, []pod) {
	t.Helper()
	var job object
	if err := json.Unmarshal([]byte(c.kubectlT(t, nil, "get", "job", name, "-n", ns, "-o", "json")), &job); err != nil {
		t.Fatalf("decoding Job %s: %v", name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var l struct{ Items []pod }
		if err := json.Unmarshal([]byte(c.kubectlT(t, nil, "get", "pods", "-n", ns, "-o", "json")), &l); err != nil {
			t.Fatalf("decoding the Pods: %v", err)
		}
		var pods []pod
		for _, p := range l.Items {
			if slices.ContainsFunc(p.Metadata.OwnerReferences, func(o struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			}) bool {
				return o.Kind == "Job" && o.Name == name
			}) {
				pods = append(pods, p)
			}
		}
		if len(pods) > 0 {
			return job, pods
		}
		if time.Now().After(deadline) {
			t.Fatalf("Job %s in %s: the job controller made no Pod in a minute", name, ns)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkJobPods checks that the Job name in ns runs image pinned to d with a
// checksum/images annotation, and that the Pods the job controller made of
// it carry both. It returns a figure.
func (c *cluster) checkJobPods(t *testing.T, ns, name string, d v1.Hash) string {
	t.Helper()
	job, pods := c.jobPods(t, ns, name)
	tmpl := podTemplate(job)
	spec, _ := tmpl["spec"].(map[string]any)
	cs, _ := spec["containers"].([]any)
	md, _ := tmpl["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	checksum, _ := ann["checksum/images"].(string)
	if len(cs) != 1 || checksum == "" {
		t.Fatalf("Job %s: pod template %v, want one container and a checksum/images annotation", name, tmpl)
	}
	image, _ := cs[0].(map[string]any)["image"].(string)
	if !strings.HasSuffix(image, "@"+d.String()) {
		t.Errorf("Job %s runs %s, want it pinned to %s", name, image, d)
	}
	var phases []string
	for _, p := range pods {
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != image {
			t.Errorf("Pod %s of Job %s runs %v, want %s", p.Metadata.Name, name, p.Spec.Containers, image)
		}
		if p.Metadata.Annotations["checksum/images"] != checksum {
			t.Errorf("Pod %s of Job %s has checksum/images %q, want the template's %q", p.Metadata.Name, name, p.Metadata.Annotations["checksum/images"], checksum)
		}
		phases = append(phases, p.Status.Phase)
	}
	digest := image[strings.LastIndex(image, "@")+1:]
	if len(digest) > 19 {
		digest = digest[:19] + "…"
	}
	return fmt.Sprintf("Job/%s: %d Pod(s) made by the job controller (%s), running %s", name, len(pods), strings.Join(phases, ", "), digest)
}

// TestJobs: the job controller makes a Job's Pods (Pending: no kubelet
// runs them), and they carry the image digestpin pinned and the
// checksum/images annotation, for a Job of `helm template | digestpin |
// kubectl apply`, for a Job made from a CronJob (`kubectl create job
// --from=cronjob/…`), for a Helm hook Job post-rendered by Helm 4's
// plugin, and for one of `digestpin install`. Without a kubelet no Job completes: Helm, which waits for a hook
// Job to complete, times out, and the test asserts what exists by then.
// A Job's template is immutable: a re-pushed tag makes a template the API
// server refuses for the Job that exists.
func TestJobs(t *testing.T) {
	t.Parallel()
	r := newRollout(t)
	d := r.push(t, "job:1.0")
	set := []string{"--set", "image=" + r.reg.Ref("job:1.0")}

	t.Run("apply", func(t *testing.T) {
		ns := r.c.namespace(t, "jobs")
		stream := mustRun(t, nil, r.helmHome, helm4(t), append([]string{"template", "jobs", jobsChart(t), "-n", ns, "--no-hooks"}, set...)...)
		r.c.apply(t, ns, r.pin(t, stream))
		figure(t, "%s", r.c.checkJobPods(t, ns, "migrate", d))
		r.c.kubectlT(t, nil, "create", "job", "manual", "--from=cronjob/nightly", "-n", ns)
		figure(t, "from CronJob/nightly: %s", r.c.checkJobPods(t, ns, "manual", d))
	})

	// A Job's pod template is immutable: the same render applies again
	// and changes nothing, while a re-pushed tag gives the Job a new
	// template that the API server refuses. (Without digestpin the
	// template would not change, and the Job would not run the new
	// image either.)
	t.Run("re-pushed tag", func(t *testing.T) {
		ns := r.c.namespace(t, "jobs-moved")
		first := r.push(t, "moved:1.0")
		render := func() string {
			stream := mustRun(t, nil, r.helmHome, helm4(t), "template", "jobs", jobsChart(t), "-n", ns, "--no-hooks", "--set", "image="+r.reg.Ref("moved:1.0"))
			return r.pin(t, stream)
		}
		r.c.apply(t, ns, render())
		r.c.checkJobPods(t, ns, "migrate", first)
		gen := func() string {
			return r.c.kubectlT(t, nil, "get", "job", "migrate", "-n", ns, "-o", "jsonpath={.metadata.generation}")
		}
		g := gen()
		r.c.apply(t, ns, render())
		if g2 := gen(); g2 != g {
			t.Errorf("the same render applied again: Job/migrate generation %s → %s, want it unchanged", g, g2)
		}
		r.push(t, "moved:1.0")
		res := run([]byte(render()), r.c.env(), r.c.Kubectl, "apply", "--server-side", "--field-manager=digestpin-test", "-n", ns, "-f", "-")
		if res.err == nil || !strings.Contains(res.stderr, "field is immutable") {
			t.Fatalf("applying Job/migrate with the re-pushed tag = %v, %s; want the API server to refuse the new template (immutable)", res.err, res.stderr)
		}
		r.c.checkJobPods(t, ns, "migrate", first)
		figure(t, "the same render applied again: Job/migrate unchanged (generation %s); moved:1.0 re-pushed: the API server refuses the Job's new template (spec.template is immutable), the Job keeps its Pod and digest", g)
	})

	t.Run("helm4 pre-install hook", func(t *testing.T) {
		t.Parallel()
		helm := helm4(t)
		r := &rollout{c: r.c, reg: r.reg, bin: r.bin, helmHome: newHelmHome(t, r.c)}
		installH4Plugin(t, r, helm)
		ns := r.c.namespace(t, "jobs-hook")
		// install runs the pre-install hook and waits for it to
		// complete, which it never does here: the install fails on its
		// timeout, after the job controller made the hook's Pod.
		res := run(nil, r.helmHome, helm, append([]string{"install", "jobs", jobsChart(t), "-n", ns, "--timeout", "15s", "--post-renderer", "digestpin-postrenderer"}, set...)...)
		if res.err == nil || !strings.Contains(res.stderr, "pre-install") {
			t.Fatalf("helm install = %v, %s; want it to fail waiting for the pre-install hook (no kubelet completes it)", res.err, res.stderr)
		}
		t.Logf("helm install: %s", strings.TrimSpace(res.stderr))
		figure(t, "helm install fails on its 15 s timeout (no kubelet completes the hook Job); by then %s", r.c.checkJobPods(t, ns, "hook", d))
	})

	// digestpin install renders with Helm 4.3.1's engine in-process and
	// pins every document, hooks included, before Helm applies them.
	t.Run("digestpin install pre-install hook", func(t *testing.T) {
		t.Parallel()
		ns := r.c.namespace(t, "jobs-dp-hook")
		seed := filepath.Join(t.TempDir(), "seed")
		if err := os.WriteFile(seed, []byte(mustRun(t, nil, nil, r.bin, "seed")), 0o600); err != nil {
			t.Fatal(err)
		}
		res := run(nil, newHelmHome(t, r.c), r.bin, append([]string{"install", "jobs", jobsChart(t), "-n", ns, "--seed-file", seed, "--timeout", "15s"}, set...)...)
		if res.err == nil || !strings.Contains(res.stderr, "pre-install") {
			t.Fatalf("digestpin install = %v, %s; want it to fail waiting for the pre-install hook (no kubelet completes it)", res.err, res.stderr)
		}
		t.Logf("digestpin install: %s", strings.TrimSpace(res.stderr))
		figure(t, "digestpin install fails on Helm's 15 s timeout (no kubelet completes the hook Job); by then %s", r.c.checkJobPods(t, ns, "hook", d))
	})

	// Helm 3 never post-renders hooks (README, helm/helm#7891): its hook
	// Job runs the tag as the chart wrote it. Helm 4 post-renders them.
	for _, tc := range []struct {
		name   string
		helm   func(*testing.T) string
		pr     func(t *testing.T, r *rollout, helm string) []string
		pinned bool // the hook Job is post-rendered
	}{
		{name: "helm3", helm: helm3, pr: func(_ *testing.T, r *rollout, _ string) []string { return []string{"--post-renderer", r.bin} }},
		{name: "helm4", helm: helm4, pinned: true, pr: func(t *testing.T, r *rollout, helm string) []string {
			installH4Plugin(t, r, helm)
			return []string{"--post-renderer", "digestpin-postrenderer"}
		}},
	} {
		t.Run(tc.name+" post-upgrade hook", func(t *testing.T) {
			t.Parallel()
			helm := tc.helm(t)
			r := &rollout{c: r.c, reg: r.reg, bin: r.bin, helmHome: newHelmHome(t, r.c)}
			pr := tc.pr(t, r, helm)
			ns := r.c.namespace(t, "jobs-"+tc.name+"-upgrade")
			mustRun(t, nil, r.helmHome, helm, append(append([]string{"install", "jobs", jobsChart(t), "-n", ns, "--no-hooks"}, set...), pr...)...)
			if res := run(nil, r.c.env(), r.c.Kubectl, "get", "job", "hook", "-n", ns); res.err == nil {
				t.Fatalf("install --no-hooks made Job/hook")
			}
			r.c.checkJobPods(t, ns, "migrate", d)
			res := run(nil, r.helmHome, helm, append(append([]string{"upgrade", "jobs", jobsChart(t), "-n", ns, "--timeout", "15s"}, set...), pr...)...)
			if res.err == nil || !strings.Contains(res.stderr, "post-upgrade") {
				t.Fatalf("helm upgrade = %v, %s; want it to fail waiting for the post-upgrade hook (no kubelet completes it)", res.err, res.stderr)
			}
			t.Logf("helm upgrade: %s", strings.TrimSpace(res.stderr))
			if !tc.pinned {
				job, pods := r.c.jobPods(t, ns, "hook")
				want := "hook=" + r.reg.Ref("job:1.0")
				w := r.c.state(t, ns, []object{job}).workloads["Job/hook"]
				if !slices.Equal(w.images, []string{want}) || w.checksum != "" || pods[0].Spec.Containers[0].Image != r.reg.Ref("job:1.0") {
					t.Errorf("Helm 3's hook Job runs %v (checksum %q), its Pod %v; want the tag as written, no checksum: Helm 3 does not post-render hooks", w.images, w.checksum, pods[0].Spec.Containers)
				}
				figure(t, "helm upgrade fails on its 15 s timeout (no kubelet completes the hook Job); by then Job/hook: %d Pod(s) made by the job controller, running the tag %s: Helm 3 does not post-render hooks", len(pods), r.reg.Ref("job:1.0"))
				return
			}
			figure(t, "helm upgrade fails on its 15 s timeout (no kubelet completes the hook Job); by then %s", r.c.checkJobPods(t, ns, "hook", d))
		})
	}
}
