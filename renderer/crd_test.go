package renderer

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/kindpath"
)

// TestWorkloadCRDs renders the golden file of each workload CRD project
// (TestGolden compares them and checks that they are fixed points) and
// checks which fields it pinned, by whom: every image field of a pod
// spec in the default paths, every field of the default image paths, and
// nothing else.
func TestWorkloadCRDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// uses are "WORKLOAD: IMAGE" for every image field pinned.
		uses []string
	}{
		{name: "knative-serving", uses: []string{
			`Service/apps/greeter container "user-container": registry.example/apps/greeter:3.1`,
			`Service/apps/greeter container "metrics": registry.example/apps/greeter-metrics:1.0`,
			`Configuration/apps/greeter-worker container "": registry.example/apps/greeter-worker:3.1`,
		}},
		{name: "openkruise", uses: []string{
			`CloneSet/shop/shop-web container "web": registry.example/shop/web:2.0`,
			`CloneSet/shop/shop-web volume "assets": registry.example/shop/assets:2.0`,
			`StatefulSet/shop/shop-db container "init-config": registry.example/shop/db-init:1.2`,
			`StatefulSet/shop/shop-db container "db": registry.example/shop/db:15.4`,
			`DaemonSet/shop/shop-node-agent container "agent": registry.example/shop/node-agent:0.8`,
			`SidecarSet/shop-log-agent container "log-init": registry.example/shop/log-init:1.0`,
			`SidecarSet/shop-log-agent container "log-agent": registry.example/shop/log-agent:3.2`,
		}},
		{name: "keda-scaledjob", uses: []string{
			`ScaledJob/mailer/mailer-consumer container "consumer": registry.example/mailer/consumer:4.0`,
		}},
		{name: "openshift-deploymentconfig", uses: []string{
			`DeploymentConfig/finance/ledger container "ledger": registry.example/finance/ledger:5.2`,
		}},
		{name: "openkruise-jobs", uses: []string{
			`BroadcastJob/node-tools/node-cleanup container "cleanup": registry.example/node-tools/cleanup:1.3`,
			`UnitedDeployment/shop/shop-api container "api": registry.example/shop/api:2.4`,
			`UnitedDeployment/shop/shop-cache container "sysctl": registry.example/shop/busybox:1.36`,
			`UnitedDeployment/shop/shop-cache container "redis": registry.example/shop/redis:7.4`,
			`UnitedDeployment/shop/shop-search container "search": registry.example/shop/search:8.15`,
			`UnitedDeployment/shop/shop-workers container "worker": registry.example/shop/worker:2.4`,
		}},
		// Image fields (kindpath.DefaultImages). Parameters ("{{…}}", "$(…)"),
		// empty optional images and image-like strings elsewhere (a
		// resource template's manifest, parameters, Spark's sparkConf)
		// are not pinned.
		{name: "argo-workflows", uses: []string{
			`Rollout/ci/app container "app": registry.example/ci/app:main`,
			`WorkflowTemplate/ci/ci-build field spec.templates[1].initContainers[0].image: registry.example/ci/git-prepare:1.2`,
			`WorkflowTemplate/ci/ci-build field spec.templates[1].container.image: registry.example/ci/git:2.45`,
			`WorkflowTemplate/ci/ci-build field spec.templates[2].script.image: registry.example/ci/golang:1.23`,
			`WorkflowTemplate/ci/ci-build field spec.templates[3].containerSet.containers[0].image: registry.example/ci/golang:1.23`,
			`WorkflowTemplate/ci/ci-build field spec.templates[3].containerSet.containers[1].image: registry.example/ci/golangci-lint:2.1`,
			`CronWorkflow/ci/ci-nightly field spec.workflowSpec.templates[0].container.image: registry.example/ci/nightly:3.0`,
			`WorkflowTemplate/ci/ci-build field spec.templates[2].sidecars[0].image: registry.example/ci/redis:7.4`,
			`Workflow/ci/ci-smoke field spec.templates[0].container.image: registry.example/ci/smoke:1.0`,
			`ClusterWorkflowTemplate/image-scan field spec.templates[0].container.image: registry.example/security/scanner:0.58`,
		}},
		{name: "tekton", uses: []string{
			`TaskRun/pipelines/migrate field spec.taskSpec.steps[0].image: registry.example/app/migrate:5.1`,
			`PipelineRun/pipelines/smoke field spec.pipelineSpec.tasks[0].taskSpec.steps[0].image: registry.example/app/smoke:1.0`,
			`Task/pipelines/build field spec.stepTemplate.image: registry.example/tools/base:1.0`,
			`Task/pipelines/build field spec.steps[0].image: registry.example/tools/busybox:1.36`,
			`StepAction/pipelines/sign field spec.image: registry.example/tools/cosign:2.4`,
			`Pipeline/pipelines/release field spec.finally[0].taskSpec.steps[0].image: registry.example/tools/curl:8.10`,
			`Task/pipelines/build field spec.sidecars[0].image: registry.example/tools/dind:27`,
			`ClusterTask/git-clone field spec.steps[0].image: registry.example/tools/git-init:0.40`,
			`Pipeline/pipelines/release field spec.tasks[1].taskSpec.steps[1].image: registry.example/tools/golang:1.23`,
			`Pipeline/pipelines/release field spec.tasks[1].taskSpec.stepTemplate.image: registry.example/tools/golang:1.23`,
			`PipelineRun/pipelines/smoke field spec.pipelineSpec.finally[0].taskSpec.steps[0].image: registry.example/tools/kubectl:1.31`,
			`Pipeline/pipelines/release field spec.tasks[1].taskSpec.sidecars[0].image: registry.example/tools/postgres:16`,
		}},
		{name: "spark-operator", uses: []string{
			`SparkApplication/analytics/daily-report field spec.driver.initContainers[0].image: registry.example/analytics/config-fetcher:1.4`,
			`SparkApplication/analytics/daily-report field spec.driver.sidecars[0].image: registry.example/analytics/fluent-bit:3.1`,
			`SparkApplication/analytics/daily-report field spec.executor.sidecars[0].image: registry.example/analytics/jmx-exporter:1.0`,
			`SparkApplication/analytics/daily-report field spec.driver.image: registry.example/analytics/spark-driver:3.5.1`,
			`ScheduledSparkApplication/analytics/hourly-ingest field spec.template.executor.image: registry.example/analytics/spark-ingest-executor:3.5.1`,
			`ScheduledSparkApplication/analytics/hourly-ingest field spec.template.image: registry.example/analytics/spark-ingest:3.5.1`,
			`SparkApplication/analytics/daily-report field spec.image: registry.example/analytics/spark-report:3.5.1`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join("testdata", tc.name+".input.yaml")
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), testfiles.Read(t, in))
			if err != nil {
				t.Fatalf("Render(%s) = %v", in, err)
			}
			var got []string
			for _, img := range res.Images {
				for _, w := range img.Workloads {
					got = append(got, w.String()+": "+img.Written)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.uses))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Render(%s) uses (-want +got):\n%s", in, diff)
			}
		})
	}
}

// TestSidecarSetHasNoChecksum checks that a SidecarSet, whose containers
// are injected into other pods, gets its images pinned and no checksum
// anywhere: not in its own metadata, not in patchPodMetadata.
func TestSidecarSetHasNoChecksum(t *testing.T) {
	t.Parallel()
	in := "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata:\n  name: s\nspec:\n  selector: {matchLabels: {app: a}}\n  containers:\n  - name: agent\n    image: registry.example/app:1\n  patchPodMetadata:\n  - annotations: {a: b}\n    patchPolicy: MergePatchJson\n"
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	want := strings.Replace(in, "registry.example/app:1", "registry.example/app:1@"+dg("registry.example/app:1"), 1)
	if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
		t.Errorf("Render() (-want +got):\n%s", diff)
	}
}

// TestWorkloadCRDImageKeysUntouched renders documents of the workload
// CRD groups, and lookalikes of other groups, that hold "image" keys
// outside the pod specs of the default paths: each comes out byte for
// byte as it came in.
func TestWorkloadCRDImageKeysUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in string }{
		{
			desc: "a Knative Service with an image annotation and an image key beside the template",
			in:   "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n    image: registry.example/app:1\nspec:\n  image: registry.example/app:1\n  template:\n    metadata:\n      annotations: {image: registry.example/app:1}\n    spec:\n      containers: []\n  traffic:\n  - latestRevision: true\n    percent: 100\n",
		},
		{
			desc: "a Knative Service with containers outside spec.template.spec",
			in:   "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  containers:\n  - name: app\n    image: registry.example/app:1\n  template:\n    containers:\n    - name: app\n      image: registry.example/app:1\n",
		},
		{
			desc: "a Knative Revision, which the controller writes",
			in:   "apiVersion: serving.knative.dev/v1\nkind: Revision\nmetadata:\n  name: r\nspec:\n  containers:\n  - name: app\n    image: registry.example/app:1\n",
		},
		{
			desc: "a Service of another group than Knative's",
			in:   "apiVersion: example.com/v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
		},
		{
			desc: "a CloneSet's image key in its update strategy",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\nmetadata:\n  name: c\nspec:\n  template:\n    spec:\n      containers: []\n  updateStrategy:\n    image: registry.example/app:1\n",
		},
		{
			desc: "a SidecarSet's image in patchPodMetadata and a hot-upgrade image",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata:\n  name: s\nspec:\n  containers:\n  - name: agent\n    upgradeStrategy:\n      upgradeType: HotUpgrade\n      hotUpgradeEmptyImage: registry.example/empty:1\n  patchPodMetadata:\n  - annotations:\n      image: registry.example/app:1\n",
		},
		{
			desc: "an OpenKruise ImagePullJob",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: ImagePullJob\nmetadata:\n  name: j\nspec:\n  image: registry.example/app:1\n  parallelism: 2\n",
		},
		{
			desc: "a CloneSet of another group",
			in:   "apiVersion: apps/v1\nkind: CloneSet\nmetadata:\n  name: c\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
		},
		{
			desc: "a ScaledJob's trigger metadata and a template outside jobTargetRef",
			in:   "apiVersion: keda.sh/v1alpha1\nkind: ScaledJob\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n  triggers:\n  - type: cron\n    metadata:\n      image: registry.example/app:1\n",
		},
		{
			desc: "a DeploymentConfig's custom strategy image",
			in:   "apiVersion: apps.openshift.io/v1\nkind: DeploymentConfig\nmetadata:\n  name: d\nspec:\n  strategy:\n    type: Custom\n    customParams:\n      image: registry.example/app:1\n  template:\n    spec:\n      containers: []\n",
		},
		{
			desc: "a DeploymentConfig of the legacy group-less API",
			in:   "apiVersion: v1\nkind: DeploymentConfig\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.in, string(res.Bytes())); diff != "" {
				t.Errorf("Render() changed a document without a pod spec image (-in +out):\n%s", diff)
			}
			if len(res.Images) != 0 {
				t.Errorf("Render() found images %v, want none", res.Images)
			}
		})
	}
}

// TestPodSpecPathRepeatingADefault checks that a --pod-spec-path that
// repeats a default (as users declared Knative before it was one) finds
// each pod spec once: one use per container, one checksum.
func TestPodSpecPathRepeatingADefault(t *testing.T) {
	t.Parallel()
	img := "registry.example/app:1"
	for _, tc := range []struct {
		desc, path, in string
	}{
		{
			desc: "a Knative Service",
			path: "serving.knative.dev/Service=spec.template.spec",
			in:   "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + img + "\n",
		},
		{
			// The user's path asks for a checksum where the default
			// writes none: the user's word wins.
			desc: "a SidecarSet",
			path: "SidecarSet=spec",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata:\n  name: s\nspec:\n  containers:\n  - name: app\n    image: " + img + "\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := kindpath.ParsePodSpec(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			r := &Renderer{Resolver: newFixed(), PodSpecPaths: append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], p)}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if len(res.Images) != 1 || len(res.Images[0].Workloads) != 1 {
				t.Errorf("Render() images = %+v, want one image used once", res.Images)
			}
			sum := Checksum([]string{"app=" + img + "@" + dg(img)})
			if got := strings.Count(string(res.Bytes()), sum); got != 1 {
				t.Errorf("Render() wrote the checksum %d times, want once:\n%s", got, res.Bytes())
			}
		})
	}
}
