// Command benchtemplate measures digestpin template on a large generated
// chart (of kube-prometheus-stack's size: 150 templates, large CRDs,
// generated certificates and passwords) against the pipelines it
// replaces: `helm template | digestpin` under the Helm 4 CLI, and the
// retired two-render mode's least cost, two `helm template` runs and
// digestpin once (the comparison of the two renders excluded); and the
// Argo CD plugin's whole generation (digestpin argocd generate in the
// chart's folder, as the sidecar runs it). Images come
// from a lock file (--frozen), so only rendering and pinning are measured.
// It prints a Markdown table for the README.
//
// A second table is the key cache's: a chart of 40 genPrivateKey "rsa"
// (4096 bits) under plain helm template (keys from crypto/rand), and
// digestpin template cold (a new seed and an empty cache folder each run:
// every key derived, then stored) and warm (every key read from the
// cache), the cold runs taking turns with helm's so that a change of the
// machine's load reaches both.
//
// Usage: go run ./internal/cmd/benchtemplate [-runs 5] [-keyruns 3] DIGESTPIN-BINARY HELM4-BINARY
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
)

func main() {
	runs := flag.Int("runs", 5, "runs of each measurement; the median is shown")
	keyRuns := flag.Int("keyruns", 3, "runs of each measurement of the key cache's chart (a cold run takes tens of seconds); 0 skips it")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtemplate [-runs N] [-keyruns N] DIGESTPIN-BINARY HELM4-BINARY")
		os.Exit(2)
	}
	err := testregistry.Run(func(tb testregistry.TB) error {
		if err := bench(tb, flag.Arg(0), flag.Arg(1), *runs); err != nil {
			return err
		}
		if *keyRuns == 0 {
			return nil
		}
		return benchKeys(flag.Arg(0), flag.Arg(1), *keyRuns)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtemplate: %v\n", err)
		os.Exit(1)
	}
}

// Chart size: templates of each kind, CRDs and their size, generators.
const (
	workloads = 50 // each a Deployment, a Service and a ConfigMap
	secrets   = 20 // each with two generated passwords
	webhooks  = 4  // each a CA, a signed certificate and a webhook configuration
	crds      = 10
	crdBytes  = 300 << 10
)

func bench(tb testregistry.TB, bin, helm string, runs int) error {
	// Absolute: the plugin's case runs in the chart's folder.
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if helm, err = filepath.Abs(helm); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "benchtemplate")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	reg := testregistry.New(tb)
	for i := range workloads {
		reg.PushImage(tb, fmt.Sprintf("app%d:1.0", i))
	}
	chart := filepath.Join(dir, "big")
	if err := writeChart(chart, reg.Host()); err != nil {
		return err
	}
	seed := filepath.Join(dir, "seed")
	f, err := os.Create(seed)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "seed")
	cmd.Stdout = f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("digestpin seed: %w", err)
	}
	f.Close()
	// The lock file inside the chart's folder, where the Argo CD plugin
	// reads it (ARGOCD_ENV_DIGESTPIN_LOCK names a file of the repository).
	lock := filepath.Join(chart, "digests.lock")
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"),
		"BIN="+bin, "HELM="+helm, "CHART="+chart, "SEED="+seed, "LOCK="+lock, "PCACHE="+filepath.Join(dir, "plugin-cache"), "OUT="+filepath.Join(dir, "second.yaml"))
	// The first run writes the lock file the others read.
	if _, err := sh(env, `"$BIN" template big "$CHART" --include-crds --seed-file "$SEED" --write-lock "$LOCK"`); err != nil {
		return err
	}
	cases := []struct{ name, script string }{
		{"helm template \\| digestpin (Helm 4.3.1 CLI)", `"$HELM" template big "$CHART" --include-crds | "$BIN" --lock "$LOCK" --frozen`},
		{"digestpin template", `"$BIN" template big "$CHART" --include-crds --seed-file "$SEED" --lock "$LOCK" --frozen`},
		{"digestpin argocd generate (the Argo CD plugin, whole)", `cd "$CHART" && ARGOCD_APP_NAME=big ARGOCD_APP_NAMESPACE=default ARGOCD_APP_SOURCE_PATH=big DIGESTPIN_SEED_FILE="$SEED" ARGOCD_ENV_DIGESTPIN_LOCK=digests.lock "$BIN" argocd generate`},
		// Live resolution with the sidecar's cache: cold, an empty cache
		// folder (every image asked of the registry, every key derived
		// and stored); warm, the folder the run before filled (every
		// image and key read from it, the resolutions within the TTL).
		{"digestpin argocd generate, live, cache cold", `rm -rf "$PCACHE" && cd "$CHART" && ARGOCD_APP_NAME=big ARGOCD_APP_NAMESPACE=default ARGOCD_APP_SOURCE_PATH=big DIGESTPIN_SEED_FILE="$SEED" DIGESTPIN_CACHE_TTL=1h DIGESTPIN_CACHE_DIR="$PCACHE" "$BIN" argocd generate`},
		{"digestpin argocd generate, live, cache warm", `cd "$CHART" && ARGOCD_APP_NAME=big ARGOCD_APP_NAMESPACE=default ARGOCD_APP_SOURCE_PATH=big DIGESTPIN_SEED_FILE="$SEED" DIGESTPIN_CACHE_TTL=1h DIGESTPIN_CACHE_DIR="$PCACHE" "$BIN" argocd generate`},
		{"two renders + digestpin (the retired mode's least cost)", `"$HELM" template big "$CHART" --include-crds >"$OUT" && "$HELM" template big "$CHART" --include-crds | "$BIN" --lock "$LOCK" --frozen`},
	}
	walls := make([]time.Duration, len(cases))
	var size int
	for i, c := range cases {
		var ws []time.Duration
		for range runs {
			start := time.Now()
			out, err := sh(env, c.script)
			if err != nil {
				return err
			}
			ws = append(ws, time.Since(start))
			size = len(out)
		}
		slices.Sort(ws)
		walls[i] = ws[len(ws)/2]
	}
	fmt.Printf("Chart: %d templates (%d Deployments), %d CRDs of %d KiB, %d generated certificates and %d passwords; output %.1f MB; median of %d runs.\n\n",
		3*workloads+secrets+2*webhooks, workloads, crds, crdBytes>>10, 2*webhooks, 2*secrets, float64(size)/(1<<20), runs)
	fmt.Println("| pipeline | wall | relative to digestpin template |")
	fmt.Println("|---|---|---|")
	for i, c := range cases {
		fmt.Printf("| %s | %s | %.2f× |\n", c.name, walls[i].Round(time.Millisecond), float64(walls[i])/float64(walls[1]))
	}
	return nil
}

// sh runs script with sh -c and returns its stdout.
func sh(env []string, script string) ([]byte, error) {
	cmd := exec.Command("sh", "-c", "set -e; "+script)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", script, err, errb.String())
	}
	return out.Bytes(), nil
}

// writeChart writes the large chart, its images at host.
func writeChart(dir, host string) error {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: big\nversion: 1.0.0\n",
		"values.yaml": fmt.Sprintf("registry: %s\nreplicas: 2\ndomain: cluster.local\n", host),
		"templates/_helpers.tpl": `{{- define "big.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
`,
	}
	for i := range workloads {
		files[fmt.Sprintf("templates/app%d/deployment.yaml", i)] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-app%[1]d
  labels:
    {{- include "big.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app: app%[1]d
  template:
    metadata:
      labels:
        app: app%[1]d
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/app%[1]d/configmap.yaml") . | sha256sum }}
    spec:
      containers:
        - name: app
          image: {{ .Values.registry }}/app%[1]d:1.0
          args: ["--port=8080", "--log-level=info"]
          ports:
            - containerPort: 8080
          resources:
            requests: {cpu: 100m, memory: 128Mi}
        - name: sidecar
          image: {{ .Values.registry }}/app%[2]d:1.0
`, i, (i+1)%workloads)
		files[fmt.Sprintf("templates/app%d/service.yaml", i)] = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-app%[1]d
  labels:
    {{- include "big.labels" . | nindent 4 }}
spec:
  selector:
    app: app%[1]d
  ports:
    - port: 80
      targetPort: 8080
`, i)
		files[fmt.Sprintf("templates/app%d/configmap.yaml", i)] = fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-app%[1]d
data:
  config.yaml: |
    {{- dict "name" "app%[1]d" "replicas" .Values.replicas "rules" (list "a" "b" "c") | toYaml | nindent 4 }}
`, i)
	}
	for i := range secrets {
		files[fmt.Sprintf("templates/secret%d.yaml", i)] = fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-secret%d
data:
  password: {{ randAlphaNum 32 | b64enc }}
  token: {{ uuidv4 | b64enc }}
`, i)
	}
	for i := range webhooks {
		files[fmt.Sprintf("templates/webhook%d.yaml", i)] = fmt.Sprintf(`{{- $svc := printf "%%s-webhook%[1]d.%%s.svc" .Release.Name .Release.Namespace }}
{{- $ca := genCA "webhook%[1]d-ca" 365 }}
{{- $cert := genSignedCert $svc nil (list $svc (printf "%%s.%%s" $svc .Values.domain)) 365 $ca }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-webhook%[1]d-tls
type: kubernetes.io/tls
data:
  tls.crt: {{ $cert.Cert | b64enc }}
  tls.key: {{ $cert.Key | b64enc }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ .Release.Name }}-webhook%[1]d
webhooks:
  - name: webhook%[1]d.example.com
    admissionReviewVersions: ["v1"]
    sideEffects: None
    clientConfig:
      caBundle: {{ $ca.Cert | b64enc }}
      service:
        name: {{ .Release.Name }}-webhook%[1]d
        namespace: {{ .Release.Namespace }}
`, i)
	}
	for i := range crds {
		var props strings.Builder
		for j := 0; props.Len() < crdBytes; j++ {
			fmt.Fprintf(&props, "                field%d:\n                  type: string\n                  description: A field of the generated resource, described at length as the operators' CRDs are.\n", j)
		}
		files[fmt.Sprintf("crds/crd%d.yaml", i)] = fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things%[1]d.big.example
spec:
  group: big.example
  names:
    kind: Thing%[1]d
    plural: things%[1]d
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
%[2]s`, i, props.String())
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rsaKeys is how many genPrivateKey "rsa" the key cache's chart calls.
const rsaKeys = 40

// benchKeys measures the key cache's chart: helm template, digestpin
// template cold and warm, and prints the table and whether the goals of
// issue 36 held (warm under a second, cold at most 1.2× helm template).
func benchKeys(bin, helm string, runs int) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if helm, err = filepath.Abs(helm); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "benchkeys")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	chart := filepath.Join(dir, "keys")
	files := map[string]string{"Chart.yaml": "apiVersion: v2\nname: keys\nversion: 1.0.0\n"}
	for i := range rsaKeys {
		files[fmt.Sprintf("templates/key%d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: key%d\ndata:\n  tls.key: {{ genPrivateKey \"rsa\" | b64enc }}\n", i)
	}
	for name, content := range files {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"),
		"BIN="+bin, "HELM="+helm, "CHART="+chart)
	// render is digestpin template with the seed and cache folder of run
	// name, a new seed the first time.
	render := func(name string) (time.Duration, []byte, error) {
		seed, cache := filepath.Join(dir, name+".seed"), filepath.Join(dir, name+".cache")
		if _, err := os.Stat(seed); err != nil {
			if _, err := sh(append(env, "SEED="+seed), `"$BIN" seed >"$SEED"`); err != nil {
				return 0, nil, err
			}
		}
		start := time.Now()
		out, err := sh(append(env, "SEED="+seed, "CACHE="+cache), `"$BIN" template keys "$CHART" --seed-file "$SEED" --cache-dir "$CACHE" --cache-ttl 1h`)
		return time.Since(start), out, err
	}
	var helmWalls, cold, warm []time.Duration
	for i := range runs {
		start := time.Now()
		if _, err := sh(env, `"$HELM" template keys "$CHART"`); err != nil {
			return err
		}
		helmWalls = append(helmWalls, time.Since(start))
		w, first, err := render(fmt.Sprintf("run%d", i))
		if err != nil {
			return err
		}
		cold = append(cold, w)
		w, again, err := render(fmt.Sprintf("run%d", i))
		if err != nil {
			return err
		}
		if !bytes.Equal(first, again) {
			return fmt.Errorf("run %d: the warm render wrote other bytes than the cold one", i)
		}
		warm = append(warm, w)
	}
	median := func(ws []time.Duration) time.Duration {
		ws = slices.Clone(ws)
		slices.Sort(ws)
		return ws[len(ws)/2]
	}
	h, c, w := median(helmWalls), median(cold), median(warm)
	fmt.Printf("\nKey cache: a chart of %d genPrivateKey \"rsa\" (4096 bits); median of %d runs, the cold ones with a new seed each, taking turns with helm's.\n\n", rsaKeys, runs)
	fmt.Println("| pipeline | wall | relative to helm template |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| helm template (Helm 4.3.1 CLI, keys from crypto/rand) | %s | 1.00× |\n", h.Round(time.Millisecond))
	fmt.Printf("| digestpin template, cold (every key derived, then cached) | %s | %.2f× |\n", c.Round(time.Millisecond), float64(c)/float64(h))
	fmt.Printf("| digestpin template, warm (every key read from the cache folder) | %s | %.3f× |\n", w.Round(time.Millisecond), float64(w)/float64(h))
	fmt.Printf("\nGoals: warm under 1 s: %v (%s); cold at most 1.2× helm template: %v (%.2f×). Each run (helm, cold, warm): %s\n",
		w < time.Second, w.Round(time.Millisecond), float64(c) <= 1.2*float64(h), float64(c)/float64(h), runsOf(helmWalls, cold, warm))
	return nil
}

// runsOf lists each run's walls, helm's, cold and warm, in seconds.
func runsOf(helm, cold, warm []time.Duration) string {
	var parts []string
	for i := range helm {
		parts = append(parts, fmt.Sprintf("%.1f/%.1f/%.2f", helm[i].Seconds(), cold[i].Seconds(), warm[i].Seconds()))
	}
	return strings.Join(parts, ", ")
}
