package launcher

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RealNodeOptions describe a node run by a real kubelet with a containerd
// of its own: pods on it are real containers (see docs/real-leaves.md).
type RealNodeOptions struct {
	// Name is the node's name. Required.
	Name string
	// Labels are set on the node once it has registered (the kubelet's
	// own labels stay).
	Labels map[string]string
	// Taints are registered with the node.
	Taints []corev1.Taint
	// KubeProxy runs kube-proxy (nftables mode) for the node, so that its
	// pods reach the cluster's Services by ClusterIP. With NetworkHosts
	// every real node has a network namespace of its own, hence its own
	// nftables tables, and always runs kube-proxy; with NetworkShared at
	// most one real node of this machine may (the tables are host-wide).
	KubeProxy bool
	// Images are more images to import, by name: OCI archives such as
	// the one `make images` builds (hack/images.sh). Every real node has
	// RealNodeImages anyway.
	Images map[string]string
}

// RealNode is a running real node. Its pods' images are those the project
// builds (RealNodeImages), imported into its containerd; nothing is pulled.
type RealNode struct {
	Name string
	// Dir holds its logs (kubelet.log, containerd.log), the kubelet's root
	// and containerd's root.
	Dir string
	// IP is its InternalIP: its address on the link to its cluster's host
	// (NetworkHosts), or the address of its bridge, the pods' gateway.
	IP string
	// Netns is its network namespace (NetworkHosts), else empty, and
	// HostLink the host's end of its link, in its cluster's host.
	Netns, HostLink string
	// PodCIDR is the subnet its pods' IPs come from.
	PodCIDR string
	// RuntimeEndpoint is its containerd's CRI socket (unix://...).
	RuntimeEndpoint string
	// Bridge is its network bridge and CgroupRoot its cgroup (in every
	// hierarchy): both unique on the host.
	Bridge, CgroupRoot string
	// Kubelet and Containerd are its processes, once started; KubeProxy
	// too, when asked for.
	Kubelet, Containerd, KubeProxy *Process

	cluster *Cluster
	record  *hostRecord
}

// RealNodeImages are the images every real node has, by the name pods use.
var RealNodeImages = map[string]string{
	"nestlet.local/pause:v1":    "pause.tar",
	"nestlet.local/demo-app:v1": "demo-app.tar",
	VolumeHelperImage:           "volume-helper.tar",
	CoreDNSImage:                "coredns.tar",
}

// RealNodeLabel is set to RealNodeLabelValue on every real node (kwok
// nodes carry type=kwok, virtual nodes type=virtual-kubelet).
const (
	RealNodeLabel      = "type"
	RealNodeLabelValue = "real"
)

// DemoAppImage is the demo app's image (hack/images/demo-app): an HTTP
// server on 8080 that logs each request, with /healthz, and a small tool
// set for exec (hostname, env, echo, cat, ls, exit CODE).
const DemoAppImage = "nestlet.local/demo-app:v1"

// AddRealNode starts a real node in the cluster and waits until it is
// Ready. It checks the prerequisites first (CheckRealNodes) and returns
// their error as is. On error everything it made is removed again.
func (c *Cluster) AddRealNode(ctx context.Context, o RealNodeOptions) (n *RealNode, err error) {
	if o.Name == "" {
		return nil, fmt.Errorf("real node: a name is required")
	}
	rt, err := FindNodeRuntime(c.bins.Dir)
	if err != nil {
		return nil, err
	}
	if err := CheckRealNodes(rt); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Join(c.Dir, "nodes", o.Name))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := hostLock()
	if err != nil {
		return nil, err
	}
	rec, err := allocateHostRecord(o.Name, dir, filepath.Dir(c.Dir), c.netns(), detachedStateFor(c.Dir) != nil)
	unlock()
	if err != nil {
		return nil, fmt.Errorf("real node %s: %w", o.Name, err)
	}
	n = &RealNode{
		Name: o.Name, Dir: dir, IP: rec.gateway().String(), PodCIDR: rec.PodCIDR, Netns: rec.Netns,
		RuntimeEndpoint: "unix://" + rec.Socket(), Bridge: rec.Bridge, CgroupRoot: rec.CgroupRoot,
		cluster: c, record: rec,
	}
	if rec.Netns != "" {
		_, nodeEnd := rec.link()
		n.IP, n.HostLink = nodeEnd.String(), rec.hostVeth()
		// Every real node of a host has its own nftables tables.
		o.KubeProxy = true
	}
	c.addRealNode(n)
	defer func() {
		if err != nil {
			err = fmt.Errorf("real node %s: %w (logs in %s)", o.Name, err, dir)
			if terr := n.Stop(); terr != nil {
				err = fmt.Errorf("%w; cleaning up: %w", err, terr)
			}
		}
	}()
	if err := n.prepareHost(); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx, rt, o.Images); err != nil {
		return n, err
	}
	if err := n.startKubelet(ctx, rt, o); err != nil {
		return n, err
	}
	if o.KubeProxy {
		if err := n.startKubeProxy(ctx, rt); err != nil {
			return n, err
		}
	}
	if err := n.label(ctx, o); err != nil {
		return n, err
	}
	// A cluster with real nodes has cluster DNS, as any cluster a user
	// has; it answers where kube-proxy runs (RealNodeOptions.KubeProxy).
	return n, c.installClusterDNS(ctx)
}

// prepareHost creates the node's network namespace behind its cluster's
// host (NetworkHosts), its bridge with its gateway address (so the kubelet
// has a non-loopback address to serve on from the start) and its cgroup
// root.
func (n *RealNode) prepareHost() error {
	if n.record.Netns != "" {
		if err := n.record.createNetns(); err != nil {
			return err
		}
	} else if err := createBridge(n.record.Bridge, n.record.gateway(), n.record.PodCIDR); err != nil {
		return err
	}
	return createCgroups(n.record.CgroupRoot)
}

// createNetns makes the node's network namespace, linked to its host: the
// node's end of the link is its address and default route; the host routes
// the node's pod subnet to it. The pods' bridge is made inside.
func (r *hostRecord) createNetns() error {
	hostEnd, nodeEnd := r.link()
	bridgeAddr := netip.PrefixFrom(r.gateway(), netip.MustParsePrefix(r.PodCIDR).Bits()).String()
	steps := [][]string{
		{"netns", "add", r.Netns},
		{"-n", r.HostNetns, "link", "add", r.hostVeth(), "type", "veth", "peer", "name", "eth0", "netns", r.Netns},
		{"-n", r.HostNetns, "addr", "add", hostEnd.String() + "/30", "dev", r.hostVeth()},
		{"-n", r.HostNetns, "link", "set", r.hostVeth(), "up"},
		{"-n", r.Netns, "link", "set", "lo", "up"},
		{"-n", r.Netns, "addr", "add", nodeEnd.String() + "/30", "dev", "eth0"},
		{"-n", r.Netns, "link", "set", "eth0", "up"},
		{"-n", r.Netns, "route", "add", "default", "via", hostEnd.String()},
		{"-n", r.HostNetns, "route", "add", r.PodCIDR, "via", nodeEnd.String()},
		{"-n", r.Netns, "link", "add", r.Bridge, "type", "bridge"},
		{"-n", r.Netns, "addr", "add", bridgeAddr, "dev", r.Bridge},
		{"-n", r.Netns, "link", "set", r.Bridge, "up"},
	}
	for _, s := range steps {
		if err := ipCommand(s...); err != nil {
			return fmt.Errorf("network of real node %s: %w", r.Node, err)
		}
	}
	return nil
}

// startContainerd writes the node's containerd and CNI configuration,
// starts containerd, waits for its CRI service and imports the images
// (RealNodeImages and extra, by name: archive path).
func (n *RealNode) startContainerd(ctx context.Context, rt *NodeRuntime, extra map[string]string) error {
	cfg, err := n.writeRuntimeConfig(rt)
	if err != nil {
		return err
	}
	// containerd looks its shim up in $PATH.
	path := "PATH=" + filepath.Dir(rt.Containerd) + string(os.PathListSeparator) + os.Getenv("PATH")
	p, err := startProcessIn(n.Netns, n.Dir, "containerd", rt.Containerd, []string{path}, "--config="+cfg)
	if err != nil {
		return err
	}
	n.cluster.track(p)
	n.Containerd = p
	if err := n.recordProcess(p, &n.record.Containerd); err != nil {
		return err
	}
	err = waitHealthy(ctx, p, time.Minute, func(ctx context.Context) bool {
		svc, err := n.Runtime()
		if err != nil {
			return false
		}
		defer func() { _ = svc.Close() }()
		_, err = svc.Version(ctx, "")
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	return importImages(ctx, rt, n.record.Socket(), extra)
}

// startKubelet writes the kubelet's certificates and configuration, starts
// it and waits until its node is Ready.
func (n *RealNode) startKubelet(ctx context.Context, rt *NodeRuntime, o RealNodeOptions) error {
	c := n.cluster
	pkiDir := filepath.Join(n.Dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	client, err := c.ca.issue(pkiDir, "kubelet-client", pkix.Name{CommonName: "system:node:" + o.Name, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return err
	}
	serving, err := c.ca.issue(pkiDir, "kubelet-serving", pkix.Name{CommonName: o.Name}, []net.IP{net.ParseIP(n.IP)}, []string{o.Name})
	if err != nil {
		return err
	}
	kubeconfig, err := c.writeKubeconfig(filepath.Join("nodes", o.Name, "kubelet"), client)
	if err != nil {
		return err
	}
	cfg, err := n.writeKubeletConfig(serving, o.Taints)
	if err != nil {
		return err
	}
	// Every kubelet of this machine binds the same device-plugin socket
	// (its path is fixed, whatever --root-dir), removing the file first:
	// two starting at once may each find the other's there and fail. One
	// at a time, until its socket is bound.
	kubeletStarts.Lock()
	started := time.Now()
	p, err := startProcessIn(n.Netns, n.Dir, "kubelet", rt.Kubelet, nil,
		"--config="+cfg,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--hostname-override="+o.Name,
		"--node-ip="+n.IP,
		"--v=1",
	)
	if err != nil {
		kubeletStarts.Unlock()
		return err
	}
	waitDevicePluginSocket(ctx, p, started)
	kubeletStarts.Unlock()
	c.track(p)
	n.Kubelet = p
	if err := n.recordProcess(p, &n.record.Kubelet); err != nil {
		return err
	}
	err = waitHealthy(ctx, p, 2*time.Minute, func(ctx context.Context) bool {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		return err == nil && NodeReady(node)
	})
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	return nil
}

// label sets the node's labels and its pod CIDR (which kubelet, under
// NodeRestriction, may not set itself).
func (n *RealNode) label(ctx context.Context, o RealNodeOptions) error {
	labels := map[string]string{RealNodeLabel: RealNodeLabelValue}
	maps.Copy(labels, o.Labels)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec":     map[string]any{"podCIDR": n.PodCIDR, "podCIDRs": []string{n.PodCIDR}},
	})
	if err != nil {
		return err
	}
	_, err = n.cluster.Client.CoreV1().Nodes().Patch(ctx, o.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "nestlet-test"})
	if err != nil {
		return fmt.Errorf("labelling node: %w", err)
	}
	return nil
}

func (n *RealNode) recordProcess(p *Process, into **ProcessRecord) error {
	rec := ProcessRecord{Name: p.Name, PID: p.PID(), Log: p.LogPath}
	if st, err := readProcStat(p.PID()); err == nil {
		rec.StartTime = st.startTime
	}
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	*into = &rec
	return n.record.save()
}

// Runtime returns a CRI client of the node's containerd (close it after
// use): what tests check a container's real state with.
func (n *RealNode) Runtime() (internalapi.RuntimeService, error) {
	return newRuntimeService(n.record.Socket())
}

// RuntimeSocket is the path of the node's containerd socket.
func (n *RealNode) RuntimeSocket() string { return n.record.Socket() }

// Containers returns the node's containers as its runtime has them, running
// or exited, with their pod's labels (io.kubernetes.pod.name and
// io.kubernetes.pod.namespace among them).
func (n *RealNode) Containers(ctx context.Context) ([]*runtimeapi.Container, error) {
	svc, err := n.Runtime()
	if err != nil {
		return nil, err
	}
	defer func() { _ = svc.Close() }()
	return svc.ListContainers(ctx, nil)
}

// Stop stops the node and removes everything it made on the host. It is
// idempotent.
func (n *RealNode) Stop() error {
	unlock, err := hostLock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(n.record.path()); os.IsNotExist(err) {
		return nil
	}
	return n.record.teardown()
}

// Dial opens a connection from the node's network (its namespace, on
// hosts): how a test reaches a pod by its IP, as a program on the node
// would.
func (n *RealNode) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if n.Netns == "" {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	return DialIn(ctx, n.Netns, network, address)
}

// HTTPClient is an HTTP client whose connections start on the node (Dial).
func (n *RealNode) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: n.Dial, DisableKeepAlives: true}, Timeout: 30 * time.Second}
}

// kubeletStarts lets one kubelet of this process start at a time
// (startKubelet).
var kubeletStarts sync.Mutex

// devicePluginSocket is where every kubelet serves device plugins'
// registrations.
const devicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// waitDevicePluginSocket waits until kubelet p has bound the device-plugin
// socket (made after started), has exited, or 30 s have passed.
func waitDevicePluginSocket(ctx context.Context, p *Process, started time.Time) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil && p.Alive() {
		if fi, err := os.Stat(devicePluginSocket); err == nil && !fi.ModTime().Before(started) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
