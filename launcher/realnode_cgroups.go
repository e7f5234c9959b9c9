package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// cgroupMounts returns the mount points of every cgroup hierarchy, v1 and
// v2 (on a hybrid host both), and whether the host runs cgroup v2 alone
// (what kubelet and runc call the unified mode: /sys/fs/cgroup itself is
// cgroup2).
func cgroupMounts() (points []string, unified bool, err error) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, false, err
	}
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
		if m.Mountpoint == "/sys/fs/cgroup" && m.FSType == "cgroup2" {
			unified = true
		}
	}
	slices.Sort(points)
	return slices.Compact(points), unified, nil
}

// v1Controllers are the hierarchies kubelet's cgroup manager checks for a
// pod cgroup on cgroup v1 (and "systemd", the named hierarchy), so the
// node's cgroup root must exist in each.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"}

// createCgroups creates the node's cgroup root, under which kubelet puts
// kubepods: in each v1 hierarchy kubelet checks, or on cgroup v2 in the
// unified hierarchy with the controllers kubelet needs enabled for it.
func createCgroups(root string) error {
	points, unified, err := cgroupMounts()
	if err != nil {
		return err
	}
	if unified {
		for _, c := range []string{"cpu", "cpuset", "memory", "pids", "io"} {
			// Each on its own: a controller the host lacks must not stop
			// the others.
			_ = os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+"+c), 0o644)
		}
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", root), 0o755)
	}
	for _, c := range v1Controllers {
		h := "/sys/fs/cgroup/" + c
		if !slices.Contains(points, h) {
			if c == "systemd" {
				continue
			}
			return fmt.Errorf("cgroup v1 hierarchy %s is not mounted (kubelet needs cpu, cpuacct, cpuset, memory and pids)", h)
		}
		if err := os.MkdirAll(filepath.Join(h, root), 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", filepath.Join(h, root), err)
		}
	}
	return nil
}

// killCgroupProcesses kills every process in the cgroup root (any depth) of
// every hierarchy, until none is left or 10 seconds have passed.
func killCgroupProcesses(root string) error {
	points, _, err := cgroupMounts()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var pids []int
		for _, h := range points {
			pids = append(pids, cgroupProcesses(filepath.Join(h, root))...)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroup %s after SIGKILL", pids, root)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupProcesses returns the pids in dir and the cgroups below it.
func cgroupProcesses(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil //nolint:nilerr // a cgroup removed meanwhile has no processes
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil //nolint:nilerr // as above
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cgroup root, deepest first, from every
// hierarchy.
func removeCgroups(root string) error {
	points, _, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range points {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			// A cgroup is removed with rmdir, although it holds files.
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
