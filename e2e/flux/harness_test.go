//go:build linux

package flux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/digestpin/digestpin/e2e/kube/controlplane"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testgit"
)

// fluxNamespace is where Flux's own objects live, as flux install makes it.
const fluxNamespace = "flux-system"

// The controllers, the modules they are built from (tools/go.mod) and the
// CRDs each one serves, which the tests install from the module.
var controllers = []struct {
	name, module string
	crds         []string
}{
	{"source-controller", "github.com/fluxcd/source-controller", []string{
		"buckets", "externalartifacts", "gitrepositories", "helmcharts", "helmrepositories", "ocirepositories",
	}},
	{"kustomize-controller", "github.com/fluxcd/kustomize-controller", []string{"kustomizations"}},
	{"helm-controller", "github.com/fluxcd/helm-controller", []string{"helmreleases"}},
}

// tool returns the path named by env (testfiles.Tool: skipped outside
// CI when missing, failed in CI).
func tool(t *testing.T, env string) string {
	t.Helper()
	return testfiles.Tool(t, env, env+" does not name what the test needs; run the tests with `make test-flux`, which builds it")
}

// repoRoot returns the digestpin repository's root folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// fluxCD is Flux's three controllers running on a control plane, with a
// git server beside them.
type fluxCD struct {
	cluster  *controlplane.Cluster
	git      *testgit.Server
	dir      string
	versions map[string]string // controller → module version
}

// startFlux starts the control plane, installs Flux's CRDs and namespace,
// and starts source-controller, kustomize-controller and helm-controller
// as Flux's own local development runs them (make run: the kubeconfig of
// the cluster, no leader election), watching every namespace, and a git
// server. Everything stops when the test ends.
func startFlux(t *testing.T) *fluxCD {
	t.Helper()
	kubeBin := tool(t, "DIGESTPIN_TEST_KUBE")
	fluxBin := tool(t, "DIGESTPIN_TEST_FLUX")
	begin := time.Now()

	c, dir := controlplane.StartT(t, kubeBin, "digestpin-flux-")
	f := &fluxCD{cluster: c, dir: dir, versions: map[string]string{}}
	f.install(t)
	f.git = testgit.Start(t, filepath.Join(dir, "git"))

	env := func(name string) []string {
		home := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
		return testfiles.CleanEnv("KUBECONFIG="+c.Kubeconfig, "RUNTIME_NAMESPACE="+fluxNamespace, "HOME="+home, "TMPDIR="+filepath.Join(home, "tmp"))
	}
	common := func(ports []int) []string {
		return []string{
			"--metrics-addr", "127.0.0.1:" + strconv.Itoa(ports[0]),
			"--health-addr", "127.0.0.1:" + strconv.Itoa(ports[1]),
			"--enable-leader-election=false", "--watch-all-namespaces=true",
			"--log-level", "debug", "--log-encoding", "console",
		}
	}
	for _, ctl := range controllers {
		n := 2
		if ctl.name == "source-controller" {
			n = 3 // and its artifact server, which the other two download from
		}
		c.StartOnFreePortsT(t, ctl.name, n, func(ports []int) (*controlplane.Proc, string, error) {
			args := common(ports)
			switch ctl.name {
			case "source-controller":
				storage, data := "127.0.0.1:"+strconv.Itoa(ports[2]), filepath.Join(dir, ctl.name, "data")
				if err := os.MkdirAll(data, 0o700); err != nil {
					return nil, "", err
				}
				args = append(args, "--storage-path", data,
					"--storage-addr", storage, "--storage-adv-addr", storage)
			case "helm-controller":
				args = append(args, "--graceful-shutdown-timeout", "1s")
			}
			p, err := c.Run(ctl.name, filepath.Join(fluxBin, ctl.name), env(ctl.name), args...)
			return p, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), err
		})
	}
	t.Logf("Flux (source-controller %s, kustomize-controller %s, helm-controller %s) on Kubernetes %s ready in %.1f s",
		f.versions["source-controller"], f.versions["kustomize-controller"], f.versions["helm-controller"], c.Version, time.Since(begin).Seconds())
	return f
}

// install applies the CRDs of each controller, from the module tools/
// requires (read where `go mod download` put it, never copied), and
// Flux's namespace.
func (f *fluxCD) install(t *testing.T) {
	t.Helper()
	var established []string
	for _, ctl := range controllers {
		mod := toolModule(t, ctl.module)
		f.versions[ctl.name] = mod.Version
		f.kubectl(t, nil, "apply", "--server-side", "--field-manager=digestpin-test", "-f", filepath.Join(mod.Dir, "config", "crd", "bases"))
		group := map[string]string{"source-controller": "source", "kustomize-controller": "kustomize", "helm-controller": "helm"}[ctl.name]
		for _, crd := range ctl.crds {
			established = append(established, crd+"."+group+".toolkit.fluxcd.io")
		}
	}
	if err := f.cluster.WaitEstablished(context.Background(), established...); err != nil {
		t.Fatal(err)
	}
	f.kubectl(t, nil, "create", "namespace", fluxNamespace)
}

// module is where the go command keeps a module, and its version.
type module struct{ Dir, Version string }

// toolModule returns the module path as tools/ requires it.
func toolModule(t *testing.T, path string) module {
	t.Helper()
	return moduleIn(t, "tools", path)
}

// moduleIn returns the module path as the module in dir requires it.
func moduleIn(t *testing.T, dir, path string) module {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-json", path)
	list.Dir = dir
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	var mod module
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go list -m %s: no folder in %s (%v); run go mod download", path, out, err)
	}
	return mod
}

// kubectl runs kubectl against the cluster and fails the test on error.
func (f *fluxCD) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	return f.cluster.KubectlT(t, stdin, args...)
}

// replicaSets returns the number of ReplicaSets of each Deployment in ns.
func (f *fluxCD) replicaSets(t *testing.T, ns string) map[string]int {
	t.Helper()
	counts, err := f.cluster.ReplicaSets(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}
