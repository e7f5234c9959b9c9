package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LimitCPU moves a cluster's processes (its agent included) into a cgroup
// of that cluster with the CPU quota asked for, leaves other processes
// where they were (kwok, the cluster's simulated kubelets, too), and undo
// puts everything back and removes the cgroups.
func TestLimitCPU(t *testing.T) {
	hier, unified := cpuHierarchyOrSkip(t)
	dir := t.TempDir()
	e := &Environment{clusters: map[string]*Cluster{"a": {Name: "a"}}, order: []string{"a"}}
	agent, err := startProcess(dir, "a-nestlet", "/bin/sh", "-c", "while :; do :; done")
	require.NoError(t, err)
	t.Cleanup(func() { agent.Stop(time.Second) })
	other, err := startProcess(dir, "b-nestlet", "/bin/sh", "-c", "sleep 300")
	require.NoError(t, err)
	t.Cleanup(func() { other.Stop(time.Second) })
	kwok, err := startProcess(dir, kwokProcess, "/bin/sh", "-c", "sleep 300")
	require.NoError(t, err)
	t.Cleanup(func() { kwok.Stop(time.Second) })
	e.clusters["a"].own = []*Process{kwok}
	kwokWas, err := cgroupOf(kwok.PID(), hier, unified)
	require.NoError(t, err)
	e.procs.add(agent)
	e.procs.add(other)
	agentWas, err := cgroupOf(agent.PID(), hier, unified)
	require.NoError(t, err)
	otherWas, err := cgroupOf(other.PID(), hier, unified)
	require.NoError(t, err)

	undo, err := e.LimitCPU(0.25)
	require.NoError(t, err)
	// Undone even when the test fails (a second undo finds nothing to do).
	t.Cleanup(func() { _ = undo() })
	limited := filepath.Join(hier, "nestlet-limit-"+strconv.Itoa(os.Getpid()), "a")
	at, err := cgroupOf(agent.PID(), hier, unified)
	require.NoError(t, err)
	require.Equal(t, limited, at)
	at, err = cgroupOf(other.PID(), hier, unified)
	require.NoError(t, err)
	require.Equal(t, otherWas, at, "a process of no cluster of the environment was moved")
	at, err = cgroupOf(kwok.PID(), hier, unified)
	require.NoError(t, err)
	require.Equal(t, kwokWas, at, "kwok, the cluster's kubelets, was moved")
	requireQuota(t, limited, unified, 25000)
	// The kernel holds the busy agent to its quota.
	require.Eventually(t, func() bool {
		stat, err := os.ReadFile(filepath.Join(limited, "cpu.stat"))
		return err == nil && !strings.Contains(string(stat), "nr_throttled 0\n")
	}, 10*time.Second, 50*time.Millisecond, "the agent was never throttled")

	require.NoError(t, undo())
	at, err = cgroupOf(agent.PID(), hier, unified)
	require.NoError(t, err)
	require.Equal(t, agentWas, at)
	_, err = os.Stat(filepath.Dir(limited))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// cpuHierarchyOrSkip returns the CPU cgroup hierarchy, skipping the test
// where none can be written (failing it under NESTLET_REQUIRE_REAL_NODES).
func cpuHierarchyOrSkip(t *testing.T) (string, bool) {
	t.Helper()
	hier, unified, err := cpuHierarchy()
	if err == nil {
		_, err = os.Stat(filepath.Join(hier, "cgroup.procs"))
	}
	if err == nil && os.Geteuid() != 0 {
		err = os.ErrPermission
	}
	if err != nil {
		if os.Getenv("NESTLET_REQUIRE_REAL_NODES") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return hier, unified
}

// requireQuota checks the CFS quota of cgroup dir, in microseconds per
// 100 ms.
func requireQuota(t *testing.T, dir string, unified bool, micros int) {
	t.Helper()
	quotaFile, want := "cpu.cfs_quota_us", strconv.Itoa(micros)
	if unified {
		quotaFile, want = "cpu.max", fmt.Sprintf("%d 100000", micros)
	}
	quota, err := os.ReadFile(filepath.Join(dir, quotaFile))
	require.NoError(t, err)
	require.Equal(t, want, strings.TrimSpace(string(quota)))
}

// LimitCPUTogether holds every cluster's processes in one cgroup, to the
// cores asked for in all.
func TestLimitCPUTogether(t *testing.T) {
	hier, unified := cpuHierarchyOrSkip(t)
	dir := t.TempDir()
	e := &Environment{clusters: map[string]*Cluster{"a": {Name: "a"}, "b": {Name: "b"}}, order: []string{"a", "b"}}
	for _, name := range []string{"a-nestlet", "b-nestlet"} {
		p, err := startProcess(dir, name, "/bin/sh", "-c", "sleep 300")
		require.NoError(t, err)
		t.Cleanup(func() { p.Stop(time.Second) })
		e.procs.add(p)
	}
	undo, err := e.LimitCPUTogether(0.5)
	require.NoError(t, err)
	t.Cleanup(func() { _ = undo() })
	limited := filepath.Join(hier, "nestlet-limit-"+strconv.Itoa(os.Getpid()), "all")
	for _, p := range e.Processes() {
		at, err := cgroupOf(p.PID(), hier, unified)
		require.NoError(t, err)
		require.Equal(t, limited, at, p.Name)
	}
	requireQuota(t, limited, unified, 50000)
	require.NoError(t, undo())
}

// The agent's and proxy's processes are known by name as their cluster's,
// a cluster's name holding dashes included; no other process is.
func TestProcessComponent(t *testing.T) {
	for name, want := range map[string][2]string{
		"east-1-nestlet":       {"east-1", ComponentAgent},
		"east-1-nestlet-proxy": {"east-1", ComponentProxy},
		"root-nestlet":         {"root", ComponentAgent},
	} {
		cluster, component, ok := ProcessComponent(name)
		require.True(t, ok, name)
		require.Equal(t, want, [2]string{cluster, component}, name)
	}
	for _, name := range []string{"etcd", "root-kube-apiserver", "nestlet", "root-nestlet-proxy-2"} {
		_, _, ok := ProcessComponent(name)
		require.False(t, ok, name)
	}
}
