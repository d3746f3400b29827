//go:build linux

package kube

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterBadInput: a missing binary, one that is no program, a port
// in use, etcd failing and the API server failing each fail the start with
// one line saying which, and leave no process behind.
func TestClusterBadInput(t *testing.T) {
	bin := kubeBin(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	// A folder with every binary but kube-controller-manager.
	partial := t.TempDir()
	for _, b := range controlPlaneBinaries {
		if b != "kube-controller-manager" {
			if err := os.Symlink(filepath.Join(bin, b), filepath.Join(partial, b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A folder whose etcd is no program.
	broken := t.TempDir()
	for _, b := range controlPlaneBinaries {
		if b != "etcd" {
			if err := os.Symlink(filepath.Join(bin, b), filepath.Join(broken, b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(broken, "etcd"), []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(t.TempDir(), "etcd-data")
	if err := os.WriteFile(notADir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc      string
		cfg       clusterConfig
		want      []string // in the error
		processes int      // started before the failure; -1: one or more
	}{
		{
			desc: "binary missing",
			cfg:  clusterConfig{Bin: partial},
			want: []string{"kube-controller-manager is missing", filepath.Join(partial, "kube-controller-manager")},
		},
		{
			desc: "binary not runnable",
			cfg:  clusterConfig{Bin: broken},
			want: []string{"etcd: starting: ", filepath.Join(broken, "etcd"), "exec format error"},
		},
		{
			desc: "port in use",
			cfg:  clusterConfig{Bin: bin, APIPort: busyPort},
			want: []string{"kube-apiserver port 127.0.0.1:" + strconv.Itoa(busyPort) + " is in use"},
		},
		{
			desc: "etcd port in use",
			cfg:  clusterConfig{Bin: bin, EtcdPort: busyPort},
			want: []string{"etcd client port 127.0.0.1:" + strconv.Itoa(busyPort) + " is in use"},
		},
		{
			desc:      "etcd fails",
			cfg:       clusterConfig{Bin: bin, EtcdDataDir: notADir},
			want:      []string{"etcd exited before it was ready"},
			processes: 1,
		},
		{
			// Too short for the API server to be ready (or even etcd,
			// on a busy machine): whatever started is stopped.
			desc:      "start times out",
			cfg:       clusterConfig{Bin: bin, Timeout: 1500 * time.Millisecond},
			want:      []string{"was not ready in time"},
			processes: -1,
		},
		{
			desc:      "kube-apiserver fails",
			cfg:       clusterConfig{Bin: bin, APIServerArgs: []string{"--no-such-flag"}},
			want:      []string{"kube-apiserver exited before it was ready", "unknown flag: --no-such-flag"},
			processes: 2,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var pids []int
			cfg := tc.cfg
			cfg.Dir = t.TempDir()
			cfg.Started = func(_ string, pid int) { pids = append(pids, pid) }
			c, err := startCluster(context.Background(), cfg)
			if err == nil {
				c.Stop()
				t.Fatalf("startCluster succeeded, want an error containing %q", tc.want)
			}
			msg := err.Error()
			t.Logf("startCluster: %s", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("startCluster = %q, want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("startCluster = %q, want one line", msg)
			}
			if some := tc.processes == -1 && len(pids) > 0; !some && len(pids) != tc.processes {
				t.Errorf("started %d processes before failing, want %d", len(pids), tc.processes)
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("process %d is still there after the failed start (kill 0: %v)", pid, err)
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestControlPlaneVersion: the servers report the version they were built
// from (the version ldflags), the one the README names.
func TestControlPlaneVersion(t *testing.T) {
	c := controlPlane(t)
	if c.Version != "v1.37.2" {
		t.Errorf("kube-apiserver reports %q, want v1.37.2", c.Version)
	}
	out := c.kubectlT(t, nil, "version", "-o", "json")
	if !strings.Contains(out, `"gitVersion": "v1.37.2"`) || strings.Count(out, `"gitVersion": "v1.37.2"`) != 2 {
		t.Errorf("kubectl version = %s, want client and server v1.37.2", out)
	}
}
