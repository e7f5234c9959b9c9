package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// RSSBytes returns the resident set size of the process, read from
// /proc/<pid>/status.
func RSSBytes(p *launcher.Process) (int64, error) {
	return vmRSS(fmt.Sprintf("/proc/%d/status", p.PID()))
}

// AnonRSSBytes returns the anonymous part of the process's resident set
// (its heap, stacks and data; RssAnon in /proc/<pid>/status): RSS less the
// pages of files it maps, its own binary's code first, which the page
// cache holds and processes of the same binary share.
func AnonRSSBytes(p *launcher.Process) (int64, error) {
	return statusKB(fmt.Sprintf("/proc/%d/status", p.PID()), "RssAnon:")
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
func vmRSS(path string) (int64, error) { return statusKB(path, "VmRSS:") }

// statusKB reads the line key (in kB) of a /proc/<pid>/status file, in
// bytes.
func statusKB(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), key); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s in %s: %w", key, path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

// ShimsRSS returns how many containerd shims serve the containerd at socket
// (one per pod sandbox: runc's shim outlives the containerd that started
// it, so a node's memory is its kubelet's, its containerd's and these) and
// the sum of their RSS, found by their command line (-address socket).
func ShimsRSS(socket string) (n int, rss int64, err error) {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, 0, err
	}
	for _, path := range procs {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") || !slices.Contains(args, socket) {
			continue
		}
		b, err := vmRSS(filepath.Join(filepath.Dir(path), "status"))
		if err != nil {
			continue
		}
		n++
		rss += b
	}
	return n, rss, nil
}
