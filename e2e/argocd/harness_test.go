//go:build linux

package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/e2e/kube/controlplane"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testgit"
	"github.com/digestpin/digestpin/internal/testredis"
)

// Where Argo CD runs: its own namespace, and the destination every
// Application deploys to (the controller's own cluster).
const (
	argocdNamespace = "argocd"
	inCluster       = "https://kubernetes.default.svc"
	pluginName      = "digestpin"
)

// tool returns the path named by env (testfiles.Tool: skipped outside
// CI when missing, failed in CI).
func tool(t *testing.T, env string) string {
	t.Helper()
	return testfiles.Tool(t, env, env+" does not name what the test needs; run the tests with `make test-argocd`, which builds it")
}

// repoRoot returns the digestpin repository's root folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// argoCD is a running Argo CD on a running control plane.
type argoCD struct {
	cluster *controlplane.Cluster
	git     *testgit.Server
	redis   *testredis.Server
	bin     string // digestpin
}

// startArgoCD starts the control plane, installs Argo CD's CRDs and
// settings, and starts Redis, the git server, argocd-cmp-server with the
// plugin, argocd-repo-server and argocd-application-controller. Everything
// stops when the test ends.
func startArgoCD(t *testing.T) *argoCD {
	t.Helper()
	kubeBin := tool(t, "DIGESTPIN_TEST_KUBE")
	argoBin := tool(t, "DIGESTPIN_TEST_ARGOCD")
	digestpin := tool(t, "DIGESTPIN_TEST_BIN")
	helm := tool(t, "DIGESTPIN_TEST_HELM4")
	begin := time.Now()

	c, dir := controlplane.StartT(t, kubeBin, "digestpin-argocd-")
	a := &argoCD{cluster: c, bin: digestpin}
	a.install(t)

	a.redis = testredis.Start(t, testredis.Options{})
	a.git = testgit.Start(t, filepath.Join(dir, "git"))

	// The sidecar: argocd-cmp-server with the plugin's files, its
	// folders as repo-server-patch.yaml mounts them, under dir/cmp. A
	// unix socket's path is limited to 107 bytes: the socket folder is a
	// short one of its own.
	sockDir, err := os.MkdirTemp("", "cmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	cmpEnv := a.sidecar(t, filepath.Join(dir, "cmp"), sockDir, helm)
	cmp, err := c.Run("argocd-cmp-server", filepath.Join(argoBin, "argocd-cmp-server"), append(baseEnv(), cmpEnv...),
		"--config-dir-path", filepath.Join(dir, "cmp", "config"), "--logformat", "text", "--loglevel", "info")
	if err != nil {
		t.Fatal(err)
	}
	a.waitSocket(t, cmp, filepath.Join(sockDir, pluginName+".sock"))

	// The repo server, which asks the sidecar through the socket folder,
	// then the application controller, which asks the repo server.
	repoTmp := filepath.Join(dir, "repo-server")
	var repoPort int
	c.StartOnFreePortsT(t, "argocd-repo-server", 2, a.repoServer(argoBin, sockDir, repoTmp, &repoPort))
	c.StartOnFreePortsT(t, "argocd-application-controller", 1, a.controller(argoBin, repoTmp, filepath.Join(dir, "cluster"), repoPort))
	t.Logf("Argo CD (controller, repo server, cmp server) on Kubernetes %s ready in %.1f s", c.Version, time.Since(begin).Seconds())
	return a
}

// repoServer returns how startOnFreePorts starts argocd-repo-server on
// its port and metrics port: asking the sidecar through the socket folder
// sockDir, with its folders under tmp. The port it serves on goes into
// *port.
func (a *argoCD) repoServer(argoBin, sockDir, tmp string, port *int) func(ports []int) (*controlplane.Proc, string, error) {
	return func(ports []int) (*controlplane.Proc, string, error) {
		for _, d := range []string{"tmp", "tls", "ssh", "gpg", "gnupg"} {
			if err := os.MkdirAll(filepath.Join(tmp, d), 0o700); err != nil {
				return nil, "", err
			}
		}
		*port = ports[0]
		p, err := a.cluster.Run("argocd-repo-server", filepath.Join(argoBin, "argocd-repo-server"), append(baseEnv(),
			"ARGOCD_FAKE_IN_CLUSTER=true",
			"ARGOCD_PLUGINSOCKFILEPATH="+sockDir,
			"ARGOCD_GPG_ENABLED=false",
			"ARGOCD_GNUPGHOME="+filepath.Join(tmp, "gnupg"),
			"ARGOCD_GPG_DATA_PATH="+filepath.Join(tmp, "gpg"),
			"ARGOCD_TLS_DATA_PATH="+filepath.Join(tmp, "tls"),
			"ARGOCD_SSH_DATA_PATH="+filepath.Join(tmp, "ssh"),
			"TMPDIR="+filepath.Join(tmp, "tmp"),
			"HOME="+tmp,
		),
			"--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports[1]),
			"--redis", a.redis.Addr, "--loglevel", "info", "--logformat", "text")
		return p, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1]), err
	}
}

// controller returns how startOnFreePorts starts
// argocd-application-controller on its metrics port, with the control
// plane as its in-cluster destination (ARGOCD_FAKE_IN_CLUSTER: the
// kubeconfig), the repo server's folders under repoTmp, its home home
// and the repo server on repoPort.
func (a *argoCD) controller(argoBin, repoTmp, home string, repoPort int) func(ports []int) (*controlplane.Proc, string, error) {
	return func(ports []int) (*controlplane.Proc, string, error) {
		p, err := a.cluster.Run("argocd-application-controller", filepath.Join(argoBin, "argocd-application-controller"), append(baseEnv(),
			"ARGOCD_FAKE_IN_CLUSTER=true",
			"KUBECONFIG="+a.cluster.Kubeconfig,
			"HOSTNAME=argocd-application-controller-0",
			"ARGOCD_TLS_DATA_PATH="+filepath.Join(repoTmp, "tls"),
			"ARGOCD_SSH_DATA_PATH="+filepath.Join(repoTmp, "ssh"),
			"HOME="+home,
		),
			"--namespace", argocdNamespace,
			"--redis", a.redis.Addr,
			"--repo-server", fmt.Sprintf("127.0.0.1:%d", repoPort),
			"--metrics-port", strconv.Itoa(ports[0]),
			"--loglevel", "info", "--logformat", "text")
		return p, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), err
	}
}

// install applies Argo CD's CRDs, from the argo-cd module tools/ requires
// (read where `go mod download` put it, never copied), its
// namespace and settings, and the default project the API server would
// make.
func (a *argoCD) install(t *testing.T) {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-json", "github.com/argoproj/argo-cd/v3")
	list.Dir = "tools"
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m github.com/argoproj/argo-cd/v3: %v", err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go list -m github.com/argoproj/argo-cd/v3: no folder in %s (%v); run go mod download", out, err)
	}
	a.kubectl(t, nil, "apply", "--server-side", "--field-manager=digestpin-test", "-k", filepath.Join(mod.Dir, "manifests", "crds"))
	// Established before anything of theirs is made.
	if err := a.cluster.WaitEstablished(context.Background(), "applications.argoproj.io", "appprojects.argoproj.io"); err != nil {
		t.Fatal(err)
	}
	a.kubectl(t, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: argocd
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels: {app.kubernetes.io/part-of: argocd}
data: {}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-rbac-cm
  namespace: argocd
  labels: {app.kubernetes.io/part-of: argocd}
data: {}
---
apiVersion: v1
kind: Secret
metadata:
  name: argocd-secret
  namespace: argocd
  labels: {app.kubernetes.io/part-of: argocd}
type: Opaque
stringData:
  server.secretkey: digestpin-test
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: default
  namespace: argocd
spec:
  sourceRepos: ["*"]
  destinations: [{server: "*", namespace: "*"}]
  clusterResourceWhitelist: [{group: "*", kind: "*"}]
`), "apply", "--server-side", "--field-manager=digestpin-test", "-f", "-")
}

// sidecar lays out the sidecar's files under root (the plugin's files in
// config/, helm and digestpin on its PATH, a new seed in the
// Secret volume) and returns its environment: repo-server-patch.yaml's
// env with its folders moved under root.
func (a *argoCD) sidecar(t *testing.T, root, sockDir, helm string) []string {
	t.Helper()
	home, cache, tmp, toolDir := filepath.Join(root, "home"), filepath.Join(root, "cache"), filepath.Join(root, "tmp"), filepath.Join(root, "bin")
	config := filepath.Join(root, "config")
	for _, d := range []string{config, filepath.Join(home, ".docker"), cache, tmp, toolDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"helm": helm, "digestpin": a.bin} {
		if err := os.Symlink(target, filepath.Join(toolDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The plugin's files as the init container digestpin-install places
	// them.
	testfiles.LayOutArgoCDPlugin(t, repoRoot(), config)
	seed := filepath.Join(root, "seed")
	if out, err := exec.Command(a.bin, "seed", seed).CombinedOutput(); err != nil {
		t.Fatalf("digestpin seed: %v: %s", err, out)
	}
	testfiles.SecretVolume(t, filepath.Join(home, "digestpin-seed"), map[string]string{"seed": string(testfiles.Read(t, seed))}, 0o440)

	var patch struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string `json:"name"`
						Env  []struct {
							Name  string `json:"name"`
							Value string `json:"value"`
						} `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	patchFile := filepath.Join(repoRoot(), "scripts", "argocd", "repo-server-patch.yaml")
	if err := yaml.Unmarshal(testfiles.Read(t, patchFile), &patch); err != nil {
		t.Fatalf("parsing scripts/argocd/repo-server-patch.yaml: %v", err)
	}
	move := strings.NewReplacer("/home/argocd", home, "/var/cache", cache, "/tmp", tmp)
	env := []string{
		"PATH=" + toolDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"ARGOCD_PLUGINSOCKFILEPATH=" + sockDir,
		"ARGOCD_CMP_WORKDIR=" + tmp,
	}
	found := false
	for _, ctr := range patch.Spec.Template.Spec.Containers {
		if ctr.Name != pluginName {
			continue
		}
		found = true
		for _, e := range ctr.Env {
			// PATH names the sidecar's folders (digestpin first, then
			// the image's): the test's tools come first instead.
			if e.Name == "PATH" {
				continue
			}
			env = append(env, e.Name+"="+move.Replace(e.Value))
		}
	}
	if !found {
		t.Fatalf("scripts/argocd/repo-server-patch.yaml: no container %s", pluginName)
	}
	return env
}

// waitSocket waits until the unix socket at path listens (its file is
// there a moment before), or p exits.
func (a *argoCD) waitSocket(t *testing.T, p *controlplane.Proc, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !testfiles.Listening(path) {
		select {
		case <-p.Done():
			t.Fatalf("%s exited before it was ready: %s", filepath.Base(p.Log()), p.Why())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s in 60 s: %s", filepath.Base(p.Log()), path, p.Why())
		}
	}
}

// result is what a command printed and how it ended.
type result struct {
	stdout, stderr string
	err            error
}

// run runs name with args and stdin, with the environment (without the
// developer's DIGESTPIN_* settings) plus env.
func run(stdin []byte, env []string, name string, args ...string) result {
	r := testfiles.Run(stdin, env, name, args...)
	return result{stdout: r.Stdout, stderr: r.Stderr, err: r.Err}
}

// baseEnv is this process's environment without the developer's own
// DIGESTPIN_* settings (DIGESTPIN_TEST_* stay), so that they change no
// render, no sidecar and no command of a test.
func baseEnv() []string { return testfiles.CleanEnv() }

// kubeEnv points kubectl and digestpin at the cluster.
func (a *argoCD) kubeEnv() []string { return a.cluster.KubeEnv() }

// kubectl runs kubectl against the cluster and fails the test on error.
func (a *argoCD) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	return a.cluster.KubectlT(t, stdin, args...)
}

// limitedKubeconfig makes the service account sa in Argo CD's namespace,
// allowed only verbs on its Applications, and returns a kubeconfig file
// of a token of it: what a CI job or a CronJob with too little RBAC has.
func (a *argoCD) limitedKubeconfig(t *testing.T, sa string, verbs ...string) string {
	t.Helper()
	a.kubectl(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s-apps, namespace: %[2]s}
rules:
  - apiGroups: [argoproj.io]
    resources: [applications]
    verbs: [%[3]s]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-apps, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s-apps}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
`, sa, argocdNamespace, strings.Join(verbs, ", "))), "apply", "-f", "-")
	token := strings.TrimSpace(a.kubectl(t, nil, "-n", argocdNamespace, "create", "token", sa))
	kc := filepath.Join(t.TempDir(), sa+"-kubeconfig")
	if err := os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %s, certificate-authority: %s}}]
users: [{name: %s, user: {token: %s}}]
contexts: [{name: %s, context: {cluster: test, user: %s}}]
current-context: %s
`, a.cluster.Server, a.cluster.File("ca.crt"), sa, token, sa, sa, sa), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}
