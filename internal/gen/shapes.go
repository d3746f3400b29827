package gen

import (
	"bytes"
	_ "embed" // the charts' corpus
	"errors"
	"io"
	"regexp"
)

// Shape is a form of YAML that charts write, for Stream: the same kind of
// stream (Deployments with two containers, a Service and a ConfigMap per
// three Deployments) in the syntax a chart's templates and its values
// give it.
type Shape string

// The shapes of Stream.
const (
	// Block is the plain block style of Helm's templates and toYaml.
	Block Shape = "block"
	// FlowMapping writes resources, security contexts, selectors and node
	// selectors as flow mappings on one line: limits: {cpu: 500m}.
	FlowMapping Shape = "flow-mapping"
	// FlowSequence writes commands, arguments and capabilities as flow
	// sequences with items, and empty lists as "[]".
	FlowSequence Shape = "flow-sequence"
	// Args gives each container a block sequence of --flag=value
	// arguments, as controllers take their options.
	Args Shape = "args"
	// Env gives each container an env block: values, and values from
	// fields, secrets and config maps.
	Env Shape = "env"
	// ConfigMaps follows each Deployment with a long ConfigMap: a
	// configuration file and a dashboard as JSON in block scalars, and
	// JSON on one line.
	ConfigMaps Shape = "configmap"
	// Comments writes the comments charts leave: comment lines between
	// the keys and comments after values.
	Comments Shape = "comments"
	// CRLF is Block with CRLF line breaks, as a chart edited on Windows
	// renders.
	CRLF Shape = "crlf"
	// Charts is the output of the charts the end-to-end tests render
	// (testdata/charts.yaml), repeated until it holds at least
	// Deployments documents with an image.
	Charts Shape = "charts"
)

// Shapes returns every shape, in the order the benchmarks show them.
func Shapes() []Shape {
	return []Shape{Block, FlowMapping, FlowSequence, Args, Env, ConfigMaps, Comments, CRLF, Charts}
}

// shape is the text of a shape's documents: a Deployment (%[1]d its
// number, %[2]s and %[3]s its images) and what follows every third one
// (%[1]d, %[2]d and %[3]d the Deployment's number).
type shape struct {
	deployment, others string
}

// shapes are the texts of the generated shapes.
var shapes = map[Shape]shape{
	"":           {deployment, service},
	Block:        {deployment, service},
	CRLF:         {deployment, service},
	FlowMapping:  {flowMappingDeployment, service},
	FlowSequence: {flowSequenceDeployment, service},
	Args:         {argsDeployment, service},
	Env:          {envDeployment, service},
	ConfigMaps:   {deployment, service + longConfigMap},
	Comments:     {commentsDeployment, service},
}

// crlfWriter writes what it is given with CRLF line breaks.
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

const flowMappingDeployment = `---
# Source: big/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels: {app.kubernetes.io/name: app-%[1]d, app.kubernetes.io/instance: big, helm.sh/chart: big-1.0.0}
spec:
  replicas: 2
  selector:
    matchLabels: {app.kubernetes.io/name: app-%[1]d}
  template:
    metadata:
      labels: {app.kubernetes.io/name: app-%[1]d}
    spec:
      nodeSelector: {"kubernetes.io/os": linux}
      securityContext: {runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000}
      containers:
        - name: app
          image: "%[2]s"
          ports:
            - {name: http, containerPort: 8080, protocol: TCP}
          resources:
            limits: {cpu: 500m, memory: 256Mi}
            requests: {cpu: 100m, memory: 128Mi}
        - name: sidecar
          image: "%[3]s"
          args: ["--port", "9090"]
          resources: {}
`

const flowSequenceDeployment = `---
# Source: big/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels:
    app.kubernetes.io/name: app-%[1]d
    app.kubernetes.io/instance: big
  finalizers: []
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: app-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-%[1]d
    spec:
      imagePullSecrets: []
      tolerations: []
      topologySpreadConstraints: []
      containers:
        - name: app
          image: "%[2]s"
          command: ["/bin/app", "serve"]
          args: [--port, "8080", --log-format, json]
          securityContext:
            capabilities:
              drop: ["ALL"]
              add: []
          volumeMounts: []
        - name: sidecar
          image: "%[3]s"
          args: ["--port", "9090"]
          envFrom: []
`

const argsDeployment = `---
# Source: big/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels:
    app.kubernetes.io/name: app-%[1]d
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: app-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-%[1]d
    spec:
      containers:
        - name: manager
          image: "%[2]s"
          args:
            - --metrics-bind-address=:8080
            - --health-probe-bind-address=:8081
            - --leader-elect
            - --leader-election-id=app-%[1]d.example.com
            - --zap-log-level=info
            - "--config=/etc/app/config.yaml"
            - --sync-period=10m
          command:
            - /manager
        - name: kube-rbac-proxy
          image: "%[3]s"
          args:
            - --secure-listen-address=0.0.0.0:8443
            - --upstream=http://127.0.0.1:8080/
            - --logtostderr=true
            - --v=0
`

const envDeployment = `---
# Source: big/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels:
    app.kubernetes.io/name: app-%[1]d
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: app-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-%[1]d
    spec:
      containers:
        - name: app
          image: "%[2]s"
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: LOG_LEVEL
              value: "info"
            - name: PORT
              value: "8080"
            - name: DATABASE_PASSWORD
              valueFrom:
                secretKeyRef:
                  name: app-%[1]d-db
                  key: password
            - name: FEATURE_FLAGS
              valueFrom:
                configMapKeyRef:
                  name: app-%[1]d
                  key: flags
                  optional: true
        - name: sidecar
          image: "%[3]s"
          env:
            - name: UPSTREAM
              value: http://localhost:8080
`

const commentsDeployment = `---
# Source: big/templates/deployment.yaml
# The application's Deployment: one per instance.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d # the release's full name
  labels:
    # Common labels
    app.kubernetes.io/name: app-%[1]d
    app.kubernetes.io/instance: big
    helm.sh/chart: big-1.0.0
spec:
  # -- Number of replicas, when autoscaling is off
  replicas: 2 # see values.yaml
  selector:
    matchLabels:
      app.kubernetes.io/name: app-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: app-%[1]d
    spec:
      # serviceAccountName: default
      containers:
        - name: app
          # -- The image; the tag defaults to the chart's appVersion
          image: "%[2]s"
          ports:
            - name: http # the service's targetPort
              containerPort: 8080
          resources:
            # We usually recommend not to specify default resources.
            limits:
              cpu: 500m
              memory: 256Mi
        - name: sidecar
          image: "%[3]s" # pinned by digestpin
          args: ["--port", "9090"] # the metrics port
`

const longConfigMap = `---
# Source: big/templates/dashboards.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%[1]d-config
  labels:
    app.kubernetes.io/name: app-%[1]d
data:
  app.yaml: |
    server:
      listen: ":8080"
      readTimeout: 30s
      writeTimeout: 30s
    database:
      host: app-%[2]d-db
      port: 5432
      pool:
        min: 2
        max: 20
    features:
      - search
      - recommendations
  settings.json: '{"logLevel": "info", "cacheSize": 1024, "endpoints": ["http://app-%[3]d:8080", "http://app-%[3]d:9090"], "retries": 3}'
  dashboard.json: |-
    {
      "title": "app-%[1]d",
      "uid": "app-%[1]d",
      "panels": [
        {
          "type": "timeseries",
          "title": "Requests",
          "targets": [{"expr": "sum(rate(http_requests_total{app=\"app-%[1]d\"}[5m])) by (code)"}]
        },
        {
          "type": "table",
          "title": "Containers",
          "targets": [{"expr": "count by (image) (kube_pod_container_info{namespace=\"default\"})"}]
        }
      ],
      "refresh": "30s"
    }
`

// chartsCorpus is the output of the charts the end-to-end tests render,
// with Helm 4, concatenated, every image on registry.example and tagged
// (TestCharts writes it with -update).
//
//go:embed testdata/charts.yaml
var chartsCorpus []byte

// imageLine finds the value of an image field of the corpus.
var imageLine = regexp.MustCompile(`(?m)^(\s*-?\s*image: "?)([^"\s]+)`)

// charts writes the corpus to w until it has written at least n
// documents with an image, its images pinned when pinned.
func charts(w io.Writer, n int, pinned bool) error {
	corpus := chartsCorpus
	if pinned {
		corpus = imageLine.ReplaceAllFunc(corpus, func(m []byte) []byte {
			sub := imageLine.FindSubmatch(m)
			ref := string(sub[2])
			return []byte(string(sub[1]) + ref + "@" + Digest(ref))
		})
	}
	per := 0
	for _, d := range bytes.Split(corpus, []byte("\n---")) {
		if bytes.Contains(d, []byte("image: ")) {
			per++
		}
	}
	if per == 0 {
		return errors.New("generating a stream: the charts' corpus holds no image")
	}
	for range (n + per - 1) / per {
		if _, err := w.Write(corpus); err != nil {
			return err
		}
	}
	return nil
}
