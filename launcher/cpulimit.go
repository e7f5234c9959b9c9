package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// cpuPeriodMicros is the CFS period the CPU limits use (the kernel's
// default, 100 ms).
const cpuPeriodMicros = 100_000

// LimitCPU gives each cluster of the environment a machine of its own, as
// far as CPU goes: every process of a cluster (its API server, controller
// manager, scheduler, kwok, and its agent and proxy, the environment's
// processes named <cluster>-nestlet and <cluster>-nestlet-proxy) is moved
// into a CPU cgroup of that cluster limited to cores CPUs (a CFS quota),
// so that a busy cluster cannot take the CPU another one needs, as on
// machines of their own. The shared etcd, the program that called
// LimitCPU, and the nodes stay where they are: kwok (which simulates
// every kubelet of a cluster) and the real nodes' kubelets and runtimes
// do the workers' work, not the control plane's, and a cluster made of
// clusters has none to hold.
//
// The returned function moves every process back where it was and removes
// the cgroups; call it before Stop, and before starting any process of a
// cluster again (a restarted process starts outside the limit).
func (e *Environment) LimitCPU(cores float64) (undo func() error, err error) {
	return e.limitCPU(cores, false)
}

// LimitCPUTogether holds every cluster of the environment, as LimitCPU
// holds one, to cores CPUs in all: the whole tree on the machine of a
// single cluster, the other question a tree's CPU cost asks.
func (e *Environment) LimitCPUTogether(cores float64) (undo func() error, err error) {
	return e.limitCPU(cores, true)
}

func (e *Environment) limitCPU(cores float64, together bool) (undo func() error, err error) {
	if cores <= 0 {
		return nil, fmt.Errorf("CPU limit %v: want a positive number of cores", cores)
	}
	hier, unified, err := cpuHierarchy()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(hier, "nestlet-limit-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", base, err)
	}
	if unified {
		// The clusters' cgroups need the cpu controller of their parent.
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			_ = os.Remove(base)
			return nil, fmt.Errorf("enabling the cpu controller under %s: %w", base, err)
		}
	}
	// Where each moved process was, to put it back.
	was := map[int]string{}
	var made []string
	undo = func() error {
		var errs []error
		for pid, from := range was {
			err := os.WriteFile(filepath.Join(from, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("moving process %d back to %s: %w", pid, from, err))
			}
		}
		// The clusters' cgroups first: base must be empty to go.
		for _, dir := range append(made, base) {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
			}
		}
		return errors.Join(errs...)
	}
	quota := int64(cores * cpuPeriodMicros)
	byCluster := map[string][]*Process{}
	for _, c := range e.Clusters() {
		byCluster[c.Name] = c.Processes()
	}
	for _, p := range e.Processes() {
		if name, _, ok := ProcessComponent(p.Name); ok {
			if _, known := byCluster[name]; known {
				byCluster[name] = append(byCluster[name], p)
			}
		}
	}
	if together {
		all := []*Process{}
		for _, procs := range byCluster {
			all = append(all, procs...)
		}
		byCluster = map[string][]*Process{"all": all}
	}
	for name, procs := range byCluster {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, errors.Join(fmt.Errorf("creating cgroup %s: %w", dir, err), undo())
		}
		made = append(made, dir)
		if err := limitCgroup(dir, quota, unified); err != nil {
			return nil, errors.Join(err, undo())
		}
		for _, p := range procs {
			if exited, _ := p.Exited(); exited || p.Name == kwokProcess {
				continue
			}
			from, err := cgroupOf(p.PID(), hier, unified)
			if err != nil {
				return nil, errors.Join(err, undo())
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p.PID())), 0o644); err != nil {
				if errors.Is(err, syscall.ESRCH) {
					continue // it ended meanwhile
				}
				return nil, errors.Join(fmt.Errorf("moving %s into %s: %w", p.Name, dir, err), undo())
			}
			was[p.PID()] = from
		}
	}
	return undo, nil
}

// limitCgroup sets the CFS quota of the cgroup dir, in microseconds per
// cpuPeriodMicros.
func limitCgroup(dir string, quota int64, unified bool) error {
	files := [][2]string{
		{"cpu.cfs_period_us", strconv.Itoa(cpuPeriodMicros)},
		{"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)},
	}
	if unified {
		files = [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriodMicros)}}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			return fmt.Errorf("limiting cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// cpuHierarchy returns where the cgroup hierarchy with the cpu controller
// is mounted, and whether it is the unified (v2) one.
func cpuHierarchy() (string, bool, error) {
	points, unified, err := cgroupMounts()
	if err != nil {
		return "", false, err
	}
	if unified {
		return "/sys/fs/cgroup", true, nil
	}
	for _, p := range points {
		// Mounted alone (cpu) or with others (cpu,cpuacct).
		if slices.Contains(strings.Split(filepath.Base(p), ","), "cpu") {
			return p, false, nil
		}
	}
	return "", false, errors.New("no cgroup hierarchy with the cpu controller is mounted (want /sys/fs/cgroup/cpu on cgroup v1, or cgroup v2)")
}

// cgroupOf returns the directory of pid's cgroup in the cpu hierarchy
// mounted at hier, from /proc/<pid>/cgroup.
func cgroupOf(pid int, hier string, unified bool) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if unified && f[0] == "0" {
			return filepath.Join(hier, f[2]), nil
		}
		if !unified && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return filepath.Join(hier, f[2]), nil
		}
	}
	return "", fmt.Errorf("process %d has no cgroup in %s", pid, hier)
}
