package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// teardown undoes everything the node made, in an order that lets each part
// clean up after itself while it can: kube-proxy stops and its tables go;
// the kubelet stops; containerd, still
// running, stops and removes every pod sandbox (CNI DEL removes the veth,
// the IP and the nftables rules of each); then containerd and its shims stop,
// anything left in the node's cgroups is killed, and what remains is removed
// by hand (mounts, bridge and veths, nftables rules naming the pod subnet,
// cgroups, container log links, sysctls after the last node). It goes on
// past errors and returns them all; the record is removed only when nothing
// failed, so a later run retries. The caller holds the host lock.
func (r *hostRecord) teardown() error {
	var errs []error
	if r.KubeProxy != nil {
		stopRecord(*r.KubeProxy, 10*time.Second)
		if r.Netns == "" { // else its tables go with the namespace
			if err := deleteKubeProxyTables(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if r.Kubelet != nil {
		stopRecord(*r.Kubelet, 10*time.Second)
	}
	if r.Containerd != nil && r.Containerd.Alive() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		removeSandboxes(ctx, r.Socket())
		cancel()
		stopRecord(*r.Containerd, 10*time.Second)
	}
	killShims(r.Socket())
	if err := killCgroupProcesses(r.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	for _, dir := range []string{r.Dir, r.RunDir} {
		if err := unmountUnder(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Netns != "" {
		// Its bridge, veths, routes and nftables tables go with it, once
		// the kernel gets to it; the host's end of its link is deleted
		// now (with it, the node's end and the route to its pods).
		if _, err := os.Stat(filepath.Join(netnsDir, r.HostNetns)); err == nil {
			if err := ipCommand("-n", r.HostNetns, "link", "del", r.hostVeth()); err != nil && !ipLinkGone(err) {
				errs = append(errs, err)
			}
		}
		if _, err := os.Stat(filepath.Join(netnsDir, r.Netns)); err == nil {
			if err := ipCommand("netns", "del", r.Netns); err != nil {
				errs = append(errs, err)
			}
		}
	} else if err := deleteBridge(r.Bridge); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(r.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	removeContainerLogLinks(r.Dir)
	others, err := readHostRecords()
	if err != nil {
		errs = append(errs, err)
	}
	last := !slices.ContainsFunc(others, func(o *hostRecord) bool { return o.Index != r.Index })
	if err := r.deleteCNIRules(last); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(r.RunDir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("real node %s: %w", r.Node, errors.Join(errs...))
	}
	if err := os.Remove(r.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if last {
		// The shim socket directory is hard-coded in containerd; remove
		// the sockets nobody listens on (killed shims leave theirs), then
		// the directory when nobody else uses it.
		removeDeadSockets("/run/containerd/s")
		_ = os.Remove("/run/containerd/s")
		_ = os.Remove("/run/containerd")
		return restoreSysctls()
	}
	return nil
}

// stopRecord stops a recorded process group: SIGTERM, then SIGKILL after
// grace.
func stopRecord(p ProcessRecord, grace time.Duration) {
	if !p.Alive() {
		return
	}
	p.signal(syscall.SIGTERM)
	if left := waitGone([]ProcessRecord{p}, grace); len(left) > 0 {
		p.signal(syscall.SIGKILL)
		waitGone(left, 10*time.Second)
	}
}

// killShims kills the runc shims of the containerd serving socket. They run
// in sessions of their own, outside every process group the launcher stops.
func killShims(socket string) {
	for _, pid := range processesWithArgs("containerd-shim", "-address", socket) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesWithArgs returns the pids whose command line has an argument
// containing name and the two arguments flag value in a row.
func processesWithArgs(name, flag, value string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(data, "\x00")), "\x00")
		if !strings.Contains(args[0], name) {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == flag && args[i+1] == value {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// unmountUnder unmounts every mount point under dir, deepest first (lazily:
// a mount still busy goes once its last user does).
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(abs))
	if err != nil {
		return err
	}
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// deleteBridge deletes the veths attached to bridge, then bridge.
func deleteBridge(name string) error {
	br, err := netlink.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			if err := netlink.LinkDel(l); err != nil && !linkGone(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", l.Attrs().Name, err))
			}
		}
	}
	if err := netlink.LinkDel(br); err != nil && !linkGone(err) {
		errs = append(errs, fmt.Errorf("deleting bridge %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// linkGone tells whether deleting a link failed because it is already
// gone: a veth goes with its peer when the kernel destroys a pod's network
// namespace, which a dying runtime's last shim can do between the listing
// and the deletion.
func linkGone(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.As(err, &notFound)
}

// removeContainerLogLinks removes the links kubelet made in
// /var/log/containers to logs under dir.
func removeContainerLogLinks(dir string) {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			_ = os.Remove(p)
		}
	}
}

// The nftables tables the CNI plugins' nftables backends keep their rules
// in: masquerading (one rule per pod, commented with a hash, the network
// name and the container id) and host ports (rules commented with the
// container id).
const (
	cniMasqTable     = "cni_plugins_masquerade"
	cniHostPortTable = "cni_hostport"
)

// deleteCNIRules removes the nftables rules the node's pods left when their
// CNI DEL could not run (containerd was gone): masquerade rules of the
// node's network, host-port rules of its sandboxes. After the last node it
// also removes the tables when no rule of any pod is left in them, as the
// plugins leave them behind even then.
func (r *hostRecord) deleteCNIRules(last bool) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil //nolint:nilerr // without nft, no plugin made rules
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sandboxes := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(r.Dir, "containerd", "io.containerd.grpc.v1.cri", "sandboxes"))
	for _, e := range entries {
		sandboxes[e.Name()] = true
	}
	ours := func(comment *string) bool {
		return comment != nil && (strings.Contains(*comment, ", net: "+r.Bridge+",") || sandboxes[*comment])
	}
	var errs []error
	tables := []struct {
		family knftables.Family
		name   string
		chains []string
	}{
		{knftables.InetFamily, cniMasqTable, []string{"masq_checks"}},
		{knftables.IPv4Family, cniHostPortTable, []string{"hostports", "hostip_hostports", "masquerading"}},
	}
	for _, t := range tables {
		errs = append(errs, pruneTable(ctx, t.family, t.name, t.chains, ours, last))
	}
	return errors.Join(errs...)
}

// pruneTable deletes the rules of chains that ours says are the node's, and
// the table when last and no rule is left in chains.
func pruneTable(ctx context.Context, family knftables.Family, table string, chains []string, ours func(*string) bool, last bool) error {
	nft, err := knftables.New(family, table)
	if err != nil {
		return nil //nolint:nilerr // nftables unusable here: nothing was made
	}
	tx := nft.NewTransaction()
	left := 0
	for _, chain := range chains {
		rules, err := nft.ListRules(ctx, chain)
		if knftables.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		for _, rule := range rules {
			if ours(rule.Comment) {
				tx.Delete(&knftables.Rule{Chain: chain, Handle: rule.Handle})
			} else {
				left++
			}
		}
	}
	if last && left == 0 {
		tx = nft.NewTransaction()
		tx.Delete(&knftables.Table{})
	}
	if tx.NumOperations() == 0 {
		return nil
	}
	if err := nft.Run(ctx, tx); err != nil && !knftables.IsNotFound(err) {
		return fmt.Errorf("nftables table %s: %w", table, err)
	}
	return nil
}

// stopDetachedRealNodes tears down the real nodes of the detached
// Environment in dir (absolute), before its processes are stopped.
func stopDetachedRealNodes(dir string) error { return teardownEnvRecords(dir, readHostRecords) }

// removeDeadSockets removes the unix sockets in dir that no process
// listens on (none is in /proc/net/unix).
func removeDeadSockets(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return
	}
	live := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 8 {
			live[f[7]] = true
		}
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSocket != 0 && !live[p] {
			_ = os.Remove(p)
		}
	}
}
