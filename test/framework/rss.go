package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// RSSBytes returns the resident set size of the process, read from
// /proc/<pid>/status.
func RSSBytes(p *launcher.Process) (int64, error) {
	return vmRSS(fmt.Sprintf("/proc/%d/status", p.PID()))
}

// ContainerRSSBytes returns the resident set size of the main process of
// container id on real node n, read from /proc as RSSBytes reads a host
// process's: the same measure for a component run as a pod and as a host
// process (the kubelet's working set counts page cache too).
func ContainerRSSBytes(ctx context.Context, n *launcher.RealNode, id string) (int64, error) {
	svc, err := n.Runtime()
	if err != nil {
		return 0, err
	}
	defer func() { _ = svc.Close() }()
	st, err := svc.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return 0, fmt.Errorf("container %s: reading the runtime's status: %w", id, err)
	}
	if info.Pid == 0 {
		return 0, fmt.Errorf("container %s: no process id in the runtime's status", id)
	}
	return vmRSS(fmt.Sprintf("/proc/%d/status", info.Pid))
}

// SelfRSSBytes returns this process's resident set size.
func SelfRSSBytes() (int64, error) { return vmRSS("/proc/self/status") }

// vmRSS reads VmRSS from a /proc/<pid>/status file, in bytes.
func vmRSS(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS in %s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in %s", path)
}
