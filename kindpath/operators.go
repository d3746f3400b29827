package kindpath

import "slices"

// The image fields of operator resources: custom resources that name the
// images their operator runs, as pod templates (or container lists that
// the operator merges into the pods it makes) and as single image
// fields. Each entry follows the operator's API types; the README's
// table names the source of each. An operator that makes its pods from
// the resource rolls them when a pinned field changes, because the pod
// template it writes changes: those entries need no checksum of their
// own, and a container list of the resource's own gets none
// (NoChecksum). A pod template in the resource (ECK's podTemplate,
// CloudNativePG's Pooler template) gets the checksum like a Deployment's,
// in its metadata.annotations, which the operator copies to the pods.

// operatorPodSpecs are the pod specs and container lists of operator
// resources; DefaultPodSpecs ends with them.
var operatorPodSpecs = slices.Concat(
	// Prometheus Operator (monitoring.coreos.com): containers and
	// initContainers that the operator merges by name into the
	// StatefulSet it makes, and volumes (image volumes too).
	operatorContainers("monitoring.coreos.com", "Prometheus", "PrometheusAgent", "Alertmanager", "ThanosRuler"),
	// OpenTelemetry Operator: initContainers and volumes beside the
	// collector's own container (additionalContainers are image paths).
	operatorContainers("opentelemetry.io", "OpenTelemetryCollector", "TargetAllocator", "OpAMPBridge"),
	[]PodSpec{
		// CloudNativePG: a Pooler's template is its Deployment's.
		{Group: "postgresql.cnpg.io", Kind: "Pooler", Fields: []string{"spec", "template", "spec"}},
		// Grafana Operator: the Deployment it makes, merged.
		{Group: "grafana.integreatly.org", Kind: "Grafana", Fields: []string{"spec", "deployment", "spec", "template", "spec"}},
		// MongoDB Community Operator: the StatefulSet it makes, merged.
		{Group: "mongodbcommunity.mongodb.com", Kind: "MongoDBCommunity", Fields: []string{"spec", "statefulSet", "spec", "template", "spec"}},
		// Crossplane: the Deployment of a provider or function package.
		{Group: "pkg.crossplane.io", Kind: "DeploymentRuntimeConfig", Fields: []string{"spec", "deploymentTemplate", "spec", "template", "spec"}},
		// ECK: every node set of an Elasticsearch, and the Deployment,
		// DaemonSet or StatefulSet of a Beat or an Agent.
		{Group: "elasticsearch.k8s.elastic.co", Kind: "Elasticsearch", Fields: []string{"spec", "nodeSets", "*", "podTemplate", "spec"}},
		{Group: "beat.k8s.elastic.co", Kind: "Beat", Fields: []string{"spec", "daemonSet", "podTemplate", "spec"}},
		{Group: "beat.k8s.elastic.co", Kind: "Beat", Fields: []string{"spec", "deployment", "podTemplate", "spec"}},
		{Group: "agent.k8s.elastic.co", Kind: "Agent", Fields: []string{"spec", "daemonSet", "podTemplate", "spec"}},
		{Group: "agent.k8s.elastic.co", Kind: "Agent", Fields: []string{"spec", "deployment", "podTemplate", "spec"}},
		{Group: "agent.k8s.elastic.co", Kind: "Agent", Fields: []string{"spec", "statefulSet", "podTemplate", "spec"}},
	},
	eckPodTemplates(),
)

// eckKinds are the ECK kinds with one spec.image and one
// spec.podTemplate, by API group.
var eckKinds = []struct{ group, kind string }{
	{"kibana.k8s.elastic.co", "Kibana"},
	{"apm.k8s.elastic.co", "ApmServer"},
	{"enterprisesearch.k8s.elastic.co", "EnterpriseSearch"},
	{"logstash.k8s.elastic.co", "Logstash"},
	{"maps.k8s.elastic.co", "ElasticMapsServer"},
	{"packageregistry.k8s.elastic.co", "PackageRegistry"},
	{"autoops.k8s.elastic.co", "AutoOpsAgentPolicy"},
}

func eckPodTemplates() []PodSpec {
	var out []PodSpec
	for _, k := range eckKinds {
		out = append(out, PodSpec{Group: k.group, Kind: k.kind, Fields: []string{"spec", "podTemplate", "spec"}})
	}
	return out
}

// operatorContainers declares spec as the container list of each kind of
// group, without a checksum.
func operatorContainers(group string, kinds ...string) []PodSpec {
	out := make([]PodSpec, len(kinds))
	for i, k := range kinds {
		out[i] = PodSpec{Group: group, Kind: k, Fields: []string{"spec"}, NoChecksum: true}
	}
	return out
}

// operatorImages are the single image fields of operator resources;
// DefaultImages ends with them.
var operatorImages = slices.Concat(
	// Prometheus Operator: spec.image, and the Thanos sidecar's.
	imagePaths("monitoring.coreos.com", "Prometheus", []string{"spec"}, [][]string{{"image"}, {"thanos", "image"}}),
	imagePaths("monitoring.coreos.com", "PrometheusAgent", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("monitoring.coreos.com", "Alertmanager", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("monitoring.coreos.com", "ThanosRuler", []string{"spec"}, [][]string{{"image"}}),
	// CloudNativePG: the PostgreSQL image, extension image volumes, and
	// the images of a catalog.
	imagePaths("postgresql.cnpg.io", "Cluster", []string{"spec"}, [][]string{{"imageName"}, {"postgresql", "extensions", "*", "image", "reference"}}),
	imagePaths("postgresql.cnpg.io", "ImageCatalog", []string{"spec"}, catalogImages),
	imagePaths("postgresql.cnpg.io", "ClusterImageCatalog", []string{"spec"}, catalogImages),
	// ECK: spec.image of every kind.
	imagePaths("elasticsearch.k8s.elastic.co", "Elasticsearch", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("beat.k8s.elastic.co", "Beat", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("agent.k8s.elastic.co", "Agent", []string{"spec"}, [][]string{{"image"}}),
	eckImages(),
	// Strimzi: the Kafka cluster's components, Connect, MirrorMaker 2
	// and the Bridge. ZooKeeper is gone since Strimzi 0.46; older
	// clusters still name its image.
	imagePaths("kafka.strimzi.io", "Kafka", []string{"spec"}, [][]string{
		{"kafka", "image"},
		{"zookeeper", "image"},
		{"entityOperator", "topicOperator", "image"},
		{"entityOperator", "userOperator", "image"},
		{"entityOperator", "tlsSidecar", "image"},
		{"kafkaExporter", "image"},
		{"cruiseControl", "image"},
	}),
	imagePaths("kafka.strimzi.io", "KafkaConnect", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("kafka.strimzi.io", "KafkaMirrorMaker2", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("kafka.strimzi.io", "KafkaBridge", []string{"spec"}, [][]string{{"image"}}),
	// OpenTelemetry Operator: the collector's image and its additional
	// containers, its embedded target allocator's; the instrumentation
	// images that its webhook injects into pods.
	imagePaths("opentelemetry.io", "OpenTelemetryCollector", []string{"spec"}, [][]string{{"image"}, {"additionalContainers", "*", "image"}, {"targetAllocator", "image"}}),
	imagePaths("opentelemetry.io", "TargetAllocator", []string{"spec"}, [][]string{{"image"}, {"additionalContainers", "*", "image"}}),
	imagePaths("opentelemetry.io", "OpAMPBridge", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("opentelemetry.io", "Instrumentation", []string{"spec"}, [][]string{
		{"java", "image"}, {"java", "extensions", "*", "image"}, {"nodejs", "image"}, {"python", "image"},
		{"dotnet", "image"}, {"go", "image"}, {"apacheHttpd", "image"}, {"nginx", "image"},
	}),
	// Grafana Operator: spec.version is a tag of its default image, or a
	// whole reference when it holds ":", "/" or "@".
	tagged(imagePaths("grafana.integreatly.org", "Grafana", []string{"spec"}, [][]string{{"version"}})),
	// Redis Operator (OT-CONTAINER-KIT): every kind's Redis, exporter,
	// init container and sidecar images.
	redisImages("Redis", "RedisCluster", "RedisReplication", "RedisSentinel"),
	// Crossplane: the package image of a provider, configuration or
	// function. Crossplane completes a package without a registry with
	// its own default registry, not Docker Hub's: only a reference that
	// names its registry is pinned.
	qualified(imagePaths("pkg.crossplane.io", "Provider", []string{"spec"}, [][]string{{"package"}})),
	qualified(imagePaths("pkg.crossplane.io", "Configuration", []string{"spec"}, [][]string{{"package"}})),
	qualified(imagePaths("pkg.crossplane.io", "Function", []string{"spec"}, [][]string{{"package"}})),
)

// catalogImages are the images of a CloudNativePG image catalog.
var catalogImages = [][]string{{"images", "*", "image"}, {"componentImages", "*", "image"}}

func eckImages() []Image {
	var out []Image
	for _, k := range eckKinds {
		out = append(out, imagePaths(k.group, k.kind, []string{"spec"}, [][]string{{"image"}})...)
	}
	return out
}

func redisImages(kinds ...string) []Image {
	var out []Image
	for _, k := range kinds {
		out = append(out, imagePaths("redis.redis.opstreelabs.in", k, []string{"spec"}, [][]string{
			{"kubernetesConfig", "image"}, {"redisExporter", "image"}, {"initContainer", "image"}, {"sidecars", "*", "image"},
		})...)
	}
	return out
}

// tagged marks paths as Tagged.
func tagged(paths []Image) []Image {
	for i := range paths {
		paths[i].Tagged = true
	}
	return paths
}

// qualified marks paths as Qualified.
func qualified(paths []Image) []Image {
	for i := range paths {
		paths[i].Qualified = true
	}
	return paths
}

// DefaultContainerImages are the images that operators and
// controllers take from their own container's arguments and environment,
// found in every container of every pod spec: each path leads from a
// container to the field. Each is Tagged: a value without a tag or
// digest is left alone (the Prometheus Operator tags a base image
// without one with a version of its own; a registry path alone would
// otherwise be pinned as "latest"). A value that does not read as a
// reference (a URL, a path) is never an image. They go into the pod
// template's checksum like its containers' images.
var DefaultContainerImages = tagged(slices.Concat(
	// Prometheus Operator (cmd/operator/main.go): the config reloader it
	// adds to every Prometheus and Alertmanager pod, and the default
	// images of the kinds it runs, used as written when tagged
	// (pkg/operator/image.go, BuildImagePath).
	argImages("--prometheus-config-reloader", "--prometheus-default-base-image",
		"--alertmanager-default-base-image", "--thanos-default-base-image"),
	// OpenTelemetry Operator (internal/config/cli.go): the default images
	// of what it runs and injects.
	argImages("--collector-image", "--clusterobservability-collector-image", "--target-allocator-image",
		"--operator-opamp-bridge-image", "--auto-instrumentation-java-image", "--auto-instrumentation-nodejs-image",
		"--auto-instrumentation-python-image", "--auto-instrumentation-dotnet-image", "--auto-instrumentation-go-image",
		"--auto-instrumentation-apache-httpd-image", "--auto-instrumentation-nginx-image"),
	// Longhorn (longhorn-manager app/daemon.go, app/driver.go): the
	// engine, instance manager and other images of the manager, and the
	// CSI sidecars that the driver deployer runs, by flag or variable.
	argImages("--engine-image", "--instance-manager-image", "--share-manager-image",
		"--backing-image-manager-image", "--manager-image", "--support-bundle-manager-image",
		"--csi-attacher-image", "--csi-provisioner-image", "--csi-resizer-image", "--csi-snapshotter-image",
		"--csi-node-driver-registrar-image", "--csi-liveness-probe-image"),
	envImages("CSI_ATTACHER_IMAGE", "CSI_PROVISIONER_IMAGE", "CSI_RESIZER_IMAGE", "CSI_SNAPSHOTTER_IMAGE",
		"CSI_NODE_DRIVER_REGISTRAR_IMAGE", "CSI_LIVENESS_PROBE_IMAGE"),
	// HashiCorp Vault Agent Injector (vault-k8s subcommand/injector/flags.go):
	// the agent it injects.
	envImages("AGENT_INJECT_VAULT_IMAGE"),
	// MongoDB Community Operator (controllers/construct/mongodbstatefulset.go):
	// the agent, version hook and readiness probe images. MONGODB_IMAGE
	// is a name that the operator completes with MONGODB_REPO_URL and
	// the version: not a reference.
	envImages("AGENT_IMAGE", "VERSION_UPGRADE_HOOK_IMAGE", "READINESS_PROBE_IMAGE"),
	// Strimzi cluster operator (ClusterOperatorConfig.java): the default
	// images of the components it runs. STRIMZI_KAFKA_IMAGES and the
	// like map versions to images, several in one value: not a
	// reference.
	envImages("STRIMZI_DEFAULT_TOPIC_OPERATOR_IMAGE", "STRIMZI_DEFAULT_USER_OPERATOR_IMAGE",
		"STRIMZI_DEFAULT_KAFKA_EXPORTER_IMAGE", "STRIMZI_DEFAULT_KAFKA_INIT_IMAGE", "STRIMZI_DEFAULT_KAFKA_BRIDGE_IMAGE",
		"STRIMZI_DEFAULT_CRUISE_CONTROL_IMAGE", "STRIMZI_DEFAULT_KANIKO_EXECUTOR_IMAGE", "STRIMZI_DEFAULT_BUILDAH_IMAGE"),
))

// argImages declares the values of flags in a container's args and in
// its command (where Longhorn's chart writes them).
func argImages(flags ...string) []Image {
	var out []Image
	for _, list := range []string{"args", "command"} {
		for _, f := range flags {
			out = append(out, Image{Fields: []string{list + "[" + FlagKey + "=" + f + "]"}})
		}
	}
	return out
}

// envImages declares the values of a container's env vars.
func envImages(vars ...string) []Image {
	out := make([]Image, len(vars))
	for i, v := range vars {
		out[i] = Image{Fields: []string{"env[name=" + v + "]", "value"}}
	}
	return out
}
