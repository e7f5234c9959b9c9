package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Network is how the clusters of an Environment are laid out on this
// machine.
type Network string

const (
	// NetworkHosts gives every cluster a host of its own: a network
	// namespace with one address on a simulated WAN (a bridge of this
	// machine), holding the cluster's control plane, its Nestlet programs,
	// and, each in a namespace of its own behind it, its real nodes. Every
	// host is behind NAT: it opens connections to anyone, and accepts new
	// ones from the WAN only from its children (the clusters joined to it,
	// Host.Admit) and from this machine (the operator: the
	// tests, kubectl, nestctl). The default.
	NetworkHosts Network = "hosts"
	// NetworkShared runs every cluster's processes on this machine's
	// network, on loopback: what a thousand hollow children need (a
	// namespace each is too many for a small machine), and what a machine
	// without root uses. Nothing that tests networking may use it.
	NetworkShared Network = "shared"
)

// NetworkEnv overrides the default Network (hosts) for Environments whose
// Config leaves it empty: NESTLET_NETWORK=shared on a machine without root.
const NetworkEnv = "NESTLET_NETWORK"

// DefaultNetwork is the Network of an Environment whose Config has none.
func DefaultNetwork() Network {
	if v := os.Getenv(NetworkEnv); v != "" {
		return Network(v)
	}
	return NetworkHosts
}

const (
	// WANBridge is the simulated WAN: a bridge of this machine, every host's
	// WAN interface attached to it.
	WANBridge = "nstl-wan"
	// WANCIDR is the WAN's range. This machine (the operator, and the
	// address the tests' link proxies and the shared etcd listen on) is its
	// first address, host i the (i+2)th.
	WANCIDR = "10.250.0.0/16"
	// hostWANIf is a host's interface on the WAN, inside its namespace.
	hostWANIf = "wan0"
	// hostTable is the nftables table (inet family) of a host's firewall,
	// and hostNATTable its NAT (ip family).
	hostTable    = "nestlet_host"
	hostNATTable = "nestlet_host_nat"
	// netnsDir is where `ip netns` keeps named namespaces.
	netnsDir = "/run/netns"
)

// OperatorIP is this machine's address on the WAN: where the hosts see the
// operator (tests, kubectl, nestctl, the link proxies, the shared etcd)
// come from, and what they accept connections from.
func OperatorIP() string { return netip.MustParsePrefix(WANCIDR).Addr().Next().String() }

// CheckHosts reports what this machine lacks to run clusters as hosts
// (NetworkHosts), each with what to do; nil when nothing.
func CheckHosts() error {
	var missing []string
	if runtime.GOOS != "linux" {
		missing = append(missing, "hosts need Linux network namespaces (this is "+runtime.GOOS+")")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "hosts need root (network namespaces, veths, nftables)")
	}
	for prog, pkg := range map[string]string{"ip": "iproute2", "nsenter": "util-linux", "nft": "nftables"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, fmt.Sprintf("the %s program is missing: install Debian's %s (hack/install-node-runtime.sh does)", prog, pkg))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("cannot give clusters hosts of their own: %s; or run with %s=%s (no test of networking then)", strings.Join(missing, "; "), NetworkEnv, NetworkShared)
}

// Host is one cluster's host: a network namespace on the WAN.
type Host struct {
	// Cluster is the cluster it holds.
	Cluster string
	// Netns is its network namespace (`ip netns` name).
	Netns string
	// IP is its address on the WAN.
	IP string
	// Region is the cluster's region (ClusterOptions.Region), for people.
	Region string

	record *netHostRecord
}

// netHostRecord is one host's entry in RealNodeHostDir, so that whoever
// finds it after its owner died can undo it (as hostRecord for real nodes).
type netHostRecord struct {
	Index    int           `json:"index"`
	Cluster  string        `json:"cluster"`
	Netns    string        `json:"netns"`
	IP       string        `json:"ip"`
	Owner    ProcessRecord `json:"owner"`
	Detached bool          `json:"detached,omitempty"`
	EnvDir   string        `json:"envDir"`
}

func (r *netHostRecord) path() string {
	return filepath.Join(RealNodeHostDir, fmt.Sprintf("host-%d.json", r.Index))
}

// rootVeth is the host's WAN veth on this machine's side.
func (r *netHostRecord) rootVeth() string { return "nstlw" + strconv.Itoa(r.Index) }

func (r *netHostRecord) stale() bool {
	if r.Detached {
		_, err := os.Stat(filepath.Join(r.EnvDir, StateFileName))
		return errors.Is(err, fs.ErrNotExist)
	}
	st, err := readProcStat(r.Owner.PID)
	return err != nil || st.startTime != r.Owner.StartTime
}

func readNetHostRecords() ([]*netHostRecord, error) { return readRecords[netHostRecord]("host-*.json") }

// newHost makes the host of cluster: its namespace, its WAN interface and
// address, its firewall (NAT). Stale hosts of earlier runs are removed
// first. The WAN bridge is made with the first host.
func newHost(cluster, region, envDir string, detachedEnv bool) (h *Host, err error) {
	if err := CheckHosts(); err != nil {
		return nil, err
	}
	unlock, err := hostLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := cleanStaleHosts(); err != nil {
		return nil, err
	}
	if err := ensureWAN(); err != nil {
		return nil, err
	}
	records, err := readNetHostRecords()
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, r := range records {
		used[r.Index] = true
	}
	index := 0
	for used[index] {
		index++
	}
	wan := netip.MustParsePrefix(WANCIDR)
	ip := wan.Addr()
	for range index + 2 {
		ip = ip.Next()
	}
	if !wan.Contains(ip) {
		return nil, fmt.Errorf("the WAN %s has no address left for another host", WANCIDR)
	}
	self, err := readProcStat(os.Getpid())
	if err != nil {
		return nil, err
	}
	r := &netHostRecord{
		Index: index, Cluster: cluster, Netns: "nestlet-h" + strconv.Itoa(index), IP: ip.String(),
		Owner:    ProcessRecord{Name: "owner", PID: os.Getpid(), StartTime: self.startTime},
		Detached: detachedEnv, EnvDir: envDir,
	}
	if err := saveJSON(r.path(), r); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.teardown())
		}
	}()
	if err := r.create(); err != nil {
		return nil, fmt.Errorf("host of cluster %s: %w", cluster, err)
	}
	return &Host{Cluster: cluster, Netns: r.Netns, IP: r.IP, Region: region, record: r}, nil
}

// NewHost makes a host on the WAN, behind NAT, for programs that are not a
// cluster of an Environment (a test of the network itself), its record in
// dir; Remove removes it, and a later host removes it if its owner died.
func NewHost(name, region, dir string) (*Host, error) { return newHost(name, region, dir, false) }

// create makes the namespace, links it to the WAN and writes its firewall.
func (r *netHostRecord) create() error {
	bits := netip.MustParsePrefix(WANCIDR).Bits()
	steps := [][]string{
		{"netns", "add", r.Netns},
		// A MAC address of its own per index: a later host with the same
		// index (and address) answers where neighbours' caches say.
		{"link", "add", r.rootVeth(), "type", "veth", "peer", "name", hostWANIf, "address", wanMAC(r.Index + 1), "netns", r.Netns},
		{"link", "set", r.rootVeth(), "master", WANBridge, "up"},
		{"-n", r.Netns, "link", "set", "lo", "up"},
		{"-n", r.Netns, "addr", "add", r.IP + "/" + strconv.Itoa(bits), "dev", hostWANIf},
		{"-n", r.Netns, "link", "set", hostWANIf, "up"},
	}
	for _, s := range steps {
		if err := ipCommand(s...); err != nil {
			return err
		}
	}
	// The host routes between its real nodes and the WAN.
	if err := inNetns(r.Netns, nil, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"); err != nil {
		return err
	}
	return inNetns(r.Netns, strings.NewReader(r.firewall()), "nft", "-f", "-")
}

// teardown deletes the namespace (with it its interfaces, routes and
// nftables tables; the WAN veth goes with its peer) and the record, and the
// WAN bridge after the last host. Processes still in the namespace keep it
// alive, unnamed, until they end. The caller holds the host lock.
func (r *netHostRecord) teardown() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(netnsDir, r.Netns)); err == nil {
		if err := ipCommand("netns", "del", r.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := net.InterfaceByName(r.rootVeth()); err == nil {
		// The kernel removes the veth with its peer once the namespace is
		// gone, which may happen between the look and the delete.
		if err := ipCommand("link", "del", r.rootVeth()); err != nil && !ipLinkGone(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("host of cluster %s: %w", r.Cluster, errors.Join(errs...))
	}
	if err := os.Remove(r.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	others, err := readNetHostRecords()
	if err != nil {
		return err
	}
	if len(others) == 0 {
		return deleteWAN()
	}
	return nil
}

// cleanStaleHosts removes the hosts whose owner is gone. The caller holds
// the host lock.
func cleanStaleHosts() error {
	records, err := readNetHostRecords()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range records {
		if r.stale() {
			if err := r.teardown(); err != nil {
				errs = append(errs, fmt.Errorf("cleaning up a host left by an earlier run: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the host. Stop every process in it first.
func (h *Host) Remove() error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(h.record.path()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return h.record.teardown()
}

// removeDetachedHosts removes the hosts of the detached Environment in dir
// (absolute), once its processes are stopped.
func removeDetachedHosts(dir string) error { return teardownEnvRecords(dir, readNetHostRecords) }

// ensureWAN makes the WAN bridge with the operator's address, unless it
// exists. The caller holds the host lock.
func ensureWAN() error {
	if _, err := net.InterfaceByName(WANBridge); err == nil {
		return nil
	}
	bits := netip.MustParsePrefix(WANCIDR).Bits()
	for _, s := range [][]string{
		// A fixed MAC address: a bridge otherwise takes its lowest port's,
		// which changes as hosts come and go, and the hosts' neighbour
		// caches would point at the old one.
		{"link", "add", WANBridge, "address", wanMAC(0), "type", "bridge"},
		{"addr", "add", OperatorIP() + "/" + strconv.Itoa(bits), "dev", WANBridge},
		{"link", "set", WANBridge, "up"},
	} {
		if err := ipCommand(s...); err != nil {
			return fmt.Errorf("making the WAN bridge: %w", err)
		}
	}
	return nil
}

// EnsureWAN makes the WAN bridge if no host has yet, so that a program can
// listen on OperatorIP before the hosts that will dial it start (a test's
// port-forward target, say). The last host removed takes it away.
func EnsureWAN() error {
	if err := CheckHosts(); err != nil {
		return err
	}
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	return ensureWAN()
}

// removeUnusedWAN deletes the WAN bridge when no host uses it.
func removeUnusedWAN() error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	records, err := readNetHostRecords()
	if err != nil || len(records) > 0 {
		return err
	}
	return deleteWAN()
}

// wanMAC is the MAC address of the WAN's i-th address (0: the operator's),
// locally administered.
func wanMAC(i int) string {
	return fmt.Sprintf("02:6e:73:74:%02x:%02x", (i>>8)&0xff, i&0xff)
}

func deleteWAN() error {
	if _, err := net.InterfaceByName(WANBridge); err != nil {
		return nil //nolint:nilerr // gone already
	}
	return ipCommand("link", "del", WANBridge)
}
