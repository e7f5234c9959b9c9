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
	// Netns is the node's own network namespace, behind its cluster's
	// host (HostNetns), when the cluster has one (NetworkHosts); empty
	// when the node shares this machine's network.
	Netns     string `json:"netns,omitempty"`
	HostNetns string `json:"hostNetns,omitempty"`
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

// gateway is the bridge's address: the pods' default gateway, and the
// node's InternalIP when it shares this machine's network (kubelet serves
// on it; it must not be a loopback address).
func (r *hostRecord) gateway() netip.Addr {
	return netip.MustParsePrefix(r.PodCIDR).Addr().Next()
}

// RealNodeLinkRange is where the links between a host and its real nodes
// (NetworkHosts) take their addresses: a /30 per node index, the host's end
// first, then the node's, which is the node's InternalIP.
const RealNodeLinkRange = "10.252.0.0/16"

// link returns the host's and the node's address on their link.
func (r *hostRecord) link() (hostEnd, nodeEnd netip.Addr) {
	base := netip.MustParsePrefix(RealNodeLinkRange).Addr().As4()
	base[2], base[3] = byte(r.Index>>6), byte(r.Index&63)*4 //nolint:gosec // index < 256
	a := netip.AddrFrom4(base)
	return a.Next(), a.Next().Next()
}

// hostVeth is the node's link on its host's side.
func (r *hostRecord) hostVeth() string { return "nstln" + strconv.Itoa(r.Index) }

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

// readHostRecords returns every real node's record of RealNodeHostDir.
func readHostRecords() ([]*hostRecord, error) { return readRecords[hostRecord]("node-*.json") }

// readRecords returns the records of RealNodeHostDir whose file names match
// pattern.
func readRecords[R any](pattern string) ([]*R, error) {
	paths, err := filepath.Glob(filepath.Join(RealNodeHostDir, pattern))
	if err != nil {
		return nil, err
	}
	var out []*R
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r R
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("reading %s: %w (remove it once what it names is gone)", p, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

// record is what teardownEnvRecords undoes.
type record interface {
	envDir() string
	teardown() error
}

func (r *hostRecord) envDir() string    { return r.EnvDir }
func (r *netHostRecord) envDir() string { return r.EnvDir }

// teardownEnvRecords undoes, under the host lock, the records read returns
// that belong to the detached Environment in dir (absolute).
func teardownEnvRecords[R record](dir string, read func() ([]R, error)) error {
	if _, err := os.Stat(RealNodeHostDir); err != nil {
		return nil //nolint:nilerr // nothing ever ran here
	}
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	records, err := read()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range records {
		if r.envDir() == dir {
			errs = append(errs, r.teardown())
		}
	}
	return errors.Join(errs...)
}

// allocateHostRecord cleans up stale records, then claims the lowest free
// index for a new node. The caller holds the host lock.
func allocateHostRecord(node, dir, envDir, hostNetns string, detachedEnv bool) (*hostRecord, error) {
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
	if hostNetns != "" {
		r.HostNetns, r.Netns = hostNetns, "nestlet-n"+strconv.Itoa(index)
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
