package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// What a real node owns on the host outside its directory is recorded in
// RealNodeHostDir, one file per node, so that it can be undone by whoever
// finds it: the Environment that started the node when it stops, StopDetached
// for a detached one, or the next program that starts a real node after the
// one that owned it died without cleaning up (a test binary killed by its
// timeout, say). RealNodeHostDir is on tmpfs: what it records (interfaces,
// cgroups, mounts) does not outlive a reboot either.
const RealNodeHostDir = "/run/nestlet/real-nodes"

// RealNodePodCIDRRange is where real nodes take their /24 pod subnets from:
// the top /16 of PodCIDRRange, which nextPodCIDR leaves alone. The index of
// the /24 is unique on the host (not only in this program), since the
// bridges and routes of real nodes are host-wide; it also names the node's
// bridge (nstl<index>) and cgroup (/nestlet-node-<index>).
const RealNodePodCIDRRange = "10.255.0.0/16"

// hostRecord is one real node's entry in RealNodeHostDir.
type hostRecord struct {
	Index int    `json:"index"`
	Node  string `json:"node"`
	// Dir is the node's directory (logs, kubelet root, containerd root).
	Dir string `json:"dir"`
	// RunDir holds its sockets and containerd's state (short paths: unix
	// socket names are limited to 108 bytes).
	RunDir     string `json:"runDir"`
	Bridge     string `json:"bridge"`
	PodCIDR    string `json:"podCIDR"`
	CgroupRoot string `json:"cgroupRoot"`
	// Owner is the program that started the node; when it is gone and the
	// node is not Detached, the node is stale. EnvDir is the directory of
	// its Environment.
	Owner    ProcessRecord `json:"owner"`
	Detached bool          `json:"detached,omitempty"`
	EnvDir   string        `json:"envDir"`
	// Kubelet and Containerd are recorded once started, KubeProxy when
	// the node runs one.
	Kubelet    *ProcessRecord `json:"kubelet,omitempty"`
	Containerd *ProcessRecord `json:"containerd,omitempty"`
	KubeProxy  *ProcessRecord `json:"kubeProxy,omitempty"`
}

func (r *hostRecord) path() string {
	return filepath.Join(RealNodeHostDir, fmt.Sprintf("node-%d.json", r.Index))
}

// Socket is the node's containerd socket.
func (r *hostRecord) Socket() string { return filepath.Join(r.RunDir, "containerd.sock") }

// gateway is the bridge's address: the pods' default gateway and the node's
// InternalIP (kubelet serves on it; it must not be a loopback address).
func (r *hostRecord) gateway() netip.Addr {
	return netip.MustParsePrefix(r.PodCIDR).Addr().Next()
}

func (r *hostRecord) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.path() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording real node %s: %w", r.Node, err)
	}
	return os.Rename(tmp, r.path())
}

// stale reports whether nobody will undo the record but the finder: its
// owner is gone and it is not detached, or it is detached and its
// Environment's state file is gone.
func (r *hostRecord) stale() bool {
	if r.Detached {
		_, err := os.Stat(filepath.Join(r.EnvDir, StateFileName))
		return errors.Is(err, fs.ErrNotExist)
	}
	st, err := readProcStat(r.Owner.PID)
	return err != nil || st.startTime != r.Owner.StartTime
}

// hostLock serializes allocation and clean-up across programs with flock on
// RealNodeHostDir/.lock. It returns the unlock function.
func hostLock() (func(), error) {
	if err := os.MkdirAll(RealNodeHostDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(RealNodeHostDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", RealNodeHostDir, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// readHostRecords returns every record of RealNodeHostDir.
func readHostRecords() ([]*hostRecord, error) {
	paths, err := filepath.Glob(filepath.Join(RealNodeHostDir, "node-*.json"))
	if err != nil {
		return nil, err
	}
	var out []*hostRecord
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r hostRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("reading %s: %w (remove it once what it names is gone)", p, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

// allocateHostRecord cleans up stale records, then claims the lowest free
// index for a new node. The caller holds the host lock.
func allocateHostRecord(node, dir, envDir string, detachedEnv bool) (*hostRecord, error) {
	records, err := readHostRecords()
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, r := range records {
		if r.stale() {
			if err := r.teardown(); err != nil {
				return nil, fmt.Errorf("cleaning up real node %s left by an earlier run: %w", r.Node, err)
			}
			continue
		}
		used[r.Index] = true
	}
	if len(used) == 0 {
		if err := saveSysctls(); err != nil {
			return nil, err
		}
	}
	index := -1
	for i := range 256 {
		if !used[i] {
			index = i
			break
		}
	}
	if index < 0 {
		return nil, fmt.Errorf("all 256 real node subnets of %s are in use", RealNodePodCIDRRange)
	}
	self, err := readProcStat(os.Getpid())
	if err != nil {
		return nil, err
	}
	r := &hostRecord{
		Index:      index,
		Node:       node,
		Dir:        dir,
		RunDir:     filepath.Join(RealNodeHostDir, "n"+strconv.Itoa(index)),
		Bridge:     "nstl" + strconv.Itoa(index),
		PodCIDR:    fmt.Sprintf("10.255.%d.0/24", index),
		CgroupRoot: "/nestlet-node-" + strconv.Itoa(index),
		Owner:      ProcessRecord{Name: "owner", PID: os.Getpid(), StartTime: self.startTime},
		Detached:   detachedEnv,
		EnvDir:     envDir,
	}
	if err := os.MkdirAll(r.RunDir, 0o700); err != nil {
		return nil, err
	}
	return r, r.save()
}

// sysctls that kubelet (vm.overcommit_memory, kernel.panic,
// kernel.panic_on_oops, kernel.keys.*) and the CNI bridge plugin
// (net.ipv4.ip_forward) change; their values before the first real node are
// restored after the last.
var sysctls = []string{
	"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func sysctlFile() string { return filepath.Join(RealNodeHostDir, "sysctl-before.json") }

func saveSysctls() error {
	if _, err := os.Stat(sysctlFile()); err == nil {
		return nil // saved by an earlier node whose clean-up did not finish
	}
	values := map[string]string{}
	for _, s := range sysctls {
		v, err := os.ReadFile(sysctlPath(s))
		if err != nil {
			continue
		}
		values[s] = strings.TrimSpace(string(v))
	}
	data, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return os.WriteFile(sysctlFile(), data, 0o644)
}

func restoreSysctls() error {
	data, err := os.ReadFile(sysctlFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		return err
	}
	var errs []error
	for name, v := range values {
		if err := os.WriteFile(sysctlPath(name), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", name, v, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(sysctlFile())
	}
	return errors.Join(errs...)
}
