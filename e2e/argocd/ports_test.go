//go:build linux

package argocd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/digestpin/digestpin/e2e/kube/controlplane"
	"github.com/digestpin/digestpin/internal/testredis"
)

// TestPortTakenBeforeTheBind: a port the harness picked for
// argocd-repo-server, taken by another process before the server binds it
// (another suite's control plane on the same machine), costs one more
// start on other ports, not the run.
func TestPortTakenBeforeTheBind(t *testing.T) {
	argoBin := tool(t, "DIGESTPIN_TEST_ARGOCD")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	c := &controlplane.Cluster{Dir: t.TempDir()}
	t.Cleanup(c.Stop)
	a := &argoCD{cluster: c, redis: testredis.Start(t, testredis.Options{})}
	sockDir, err := os.MkdirTemp("", "cmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })

	for i, taken := range []string{"metrics port", "port"} {
		var repoPort int
		start := a.repoServer(argoBin, sockDir, filepath.Join(t.TempDir(), "repo-server"), &repoPort)
		var tried [][]int
		c.StartOnFreePortsT(t, "argocd-repo-server", 2, func(ports []int) (*controlplane.Proc, string, error) {
			if len(tried) == 0 {
				ports[1-i] = busyPort // taken between the pick and the bind
			}
			tried = append(tried, ports)
			return start(ports)
		})
		if len(tried) != 2 {
			t.Errorf("%s taken: started on %v, want a second start after the first", taken, tried)
		}
		if repoPort == busyPort {
			t.Errorf("%s taken: the repo server is said to serve on the taken port %d", taken, busyPort)
		}
		if conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(repoPort))); err != nil {
			t.Errorf("%s taken: nothing serves on the repo server's port %d: %v", taken, repoPort, err)
		} else {
			conn.Close()
		}
		c.Stop()
	}
}
