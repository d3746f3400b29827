//go:build linux

package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// StartT starts a control plane of the binaries in the folder bin for the
// test t, in a new temporary folder named with prefix, which it returns
// (the cluster's files are in its folder cluster; the test may put its
// own beside them). When the test ends it stops the control plane and
// every process Run started, and removes the folder; when the test
// failed, it first logs each of those processes' last words, and keeps
// the folder when DIGESTPIN_TEST_KEEP is set.
func StartT(t testing.TB, bin, prefix string) (*Cluster, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Config{Bin: bin, Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		procs := c.procs
		c.Stop()
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s: last words: %s (log %s)", p.name, p.Why(), p.Log())
			}
			if os.Getenv("DIGESTPIN_TEST_KEEP") != "" {
				t.Logf("kept %s", dir)
				return
			}
		}
		_ = os.RemoveAll(dir)
	})
	return c, dir
}

// KubeEnv points kubectl and clients of a kubeconfig at the cluster.
func (c *Cluster) KubeEnv() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig, "KUBECACHEDIR=" + c.File("kubecache")}
}

// TryKubectl runs kubectl against the cluster with stdin (none when nil).
func (c *Cluster) TryKubectl(stdin []byte, args ...string) testfiles.Result {
	return testfiles.Run(stdin, c.KubeEnv(), c.Kubectl, args...)
}

// KubectlT runs kubectl against the cluster and returns its output; an
// error fails the test with kubectl's stderr.
func (c *Cluster) KubectlT(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	res := c.TryKubectl(stdin, args...)
	if res.Err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), res.Err, res.Stderr)
	}
	return res.Stdout
}

// StartOnFreePortsT is RunOnFreePorts for the test t, which fails when the
// server does not start or get ready; name names it in the failure.
func (c *Cluster) StartOnFreePortsT(t testing.TB, name string, n int, start func(ports []int) (*Proc, string, error)) {
	t.Helper()
	if _, err := c.RunOnFreePorts(context.Background(), n, start); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
