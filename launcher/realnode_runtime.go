package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// NodeRuntime holds the programs of a real node, built by
// hack/install-node-runtime.sh (make node-runtime) into <bin dir>/node.
type NodeRuntime struct {
	Kubelet, Containerd, Ctr, Runc string
	// KubeProxy is only needed by nodes that run it
	// (RealNodeOptions.KubeProxy).
	KubeProxy string
	// CNIDir holds the bridge, host-local, loopback and portmap plugins.
	CNIDir string
	// ImageDir holds the OCI archives of RealNodeImages.
	ImageDir string
}

// ErrRealNodesUnavailable is wrapped by every error that says this machine
// cannot run real nodes (and what to do about it).
var ErrRealNodesUnavailable = errors.New("real nodes unavailable")

// FindNodeRuntime returns the node runtime under binDir/node (binDir as for
// FindBinaries).
func FindNodeRuntime(binDir string) (*NodeRuntime, error) {
	if binDir == "" {
		bins, err := FindBinaries("")
		if err != nil {
			return nil, err
		}
		binDir = bins.Dir
	}
	dir := filepath.Join(binDir, "node")
	rt := &NodeRuntime{
		Kubelet:    filepath.Join(dir, "kubelet"),
		KubeProxy:  filepath.Join(dir, "kube-proxy"),
		Containerd: filepath.Join(dir, "containerd"),
		Ctr:        filepath.Join(dir, "ctr"),
		Runc:       filepath.Join(dir, "runc"),
		CNIDir:     filepath.Join(dir, "cni"),
		ImageDir:   filepath.Join(dir, "images"),
	}
	need := []string{rt.Kubelet, rt.Containerd, rt.Ctr, rt.Runc, filepath.Join(dir, "containerd-shim-runc-v2")}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		need = append(need, filepath.Join(rt.CNIDir, p))
	}
	for _, f := range RealNodeImages {
		need = append(need, filepath.Join(rt.ImageDir, f))
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: %s is missing: run make node-runtime (hack/install-node-runtime.sh) to build the node runtime", ErrRealNodesUnavailable, p)
		}
	}
	return rt, nil
}

// CheckRealNodes reports, in one error wrapping ErrRealNodesUnavailable,
// every reason this machine cannot run real nodes, each with what to do; nil
// when it can.
func CheckRealNodes(rt *NodeRuntime) error {
	var missing []string
	if runtime.GOOS != "linux" {
		missing = append(missing, "real nodes need Linux (this is "+runtime.GOOS+"); use kwok nodes")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "real nodes need root (kubelet and containerd manage cgroups, mounts and network interfaces): run as root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		missing = append(missing, "the CNI plugins' nftables backends need the nft program: install Debian's nftables (make node-runtime does)")
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(fs, []byte("\toverlay\n")) {
		missing = append(missing, "containerd's overlayfs snapshotter needs the overlay filesystem, which this kernel lacks (load the overlay module)")
	}
	if msg := checkCgroups(); msg != "" {
		missing = append(missing, msg)
	}
	if rt != nil {
		if _, err := os.Stat(rt.Runc); err != nil {
			missing = append(missing, "runc is missing: run make node-runtime")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRealNodesUnavailable, strings.Join(missing, "; "))
}

func checkCgroups() string {
	points, unified, err := cgroupMounts()
	if err != nil {
		return "cannot read the cgroup mounts: " + err.Error()
	}
	if unified {
		data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		have := strings.Fields(string(data))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if err != nil || !slices.Contains(have, c) {
				return "cgroup v2 without the " + c + " controller: kubelet needs cpu, memory and pids"
			}
		}
		return ""
	}
	for _, c := range v1Controllers[:5] {
		if !slices.Contains(points, "/sys/fs/cgroup/"+c) {
			return "cgroup v1 hierarchy /sys/fs/cgroup/" + c + " is not mounted: kubelet needs cpu, cpuacct, cpuset, memory and pids"
		}
	}
	return ""
}

// writeRuntimeConfig writes the node's containerd configuration and CNI
// network, and returns the containerd configuration's path. Everything
// containerd owns lives under the node's directories, not in
// /var/lib/containerd or /run/containerd (only the shims' sockets, hashed
// by the containerd socket, go to /run/containerd/s).
func (n *RealNode) writeRuntimeConfig(rt *NodeRuntime) (string, error) {
	r := n.record
	cniConf := filepath.Join(n.Dir, "cni")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return "", err
	}
	network, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       r.Bridge,
		"plugins": []map[string]any{{
			"type": "bridge", "bridge": r.Bridge, "isGateway": true,
			// On a host of its own (r.HostNetns), the host masquerades what
			// leaves by the WAN, and pod addresses stay unchanged on their
			// way to other clusters (the gateways' tunnels).
			"ipMasq": r.HostNetns == "", "ipMasqBackend": "nftables", "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": filepath.Join(r.RunDir, "ipam"),
				"ranges":  [][]map[string]string{{{"subnet": r.PodCIDR, "gateway": r.gateway().String()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}, {
			"type": "portmap", "backend": "nftables", "capabilities": map[string]bool{"portMappings": true},
		}},
	}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-"+r.Bridge+".conflist"), network, 0o644); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(containerdConfig, filepath.Join(n.Dir, "containerd"), filepath.Join(r.RunDir, "state"),
		r.Socket(), rt.Runc, filepath.Join(r.RunDir, "runc"), rt.CNIDir, cniConf)
	path := filepath.Join(n.Dir, "containerd.toml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// containerdConfig is containerd 2.x's configuration (schema 3) of a real
// node; the reasons for each setting are in docs/real-leaves.md.
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q
temp = "%[1]s/tmp"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = %[3]q

[ttrpc]
  address = "%[3]s.ttrpc"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "%[1]s/opt"
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "nestlet.local/pause:v1"
  [plugins."io.containerd.cri.v1.runtime"]
    netns_mounts_under_state_dir = true
    restrict_oom_score_adj = true
    enable_cdi = false
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = %[4]q
          Root = %[5]q
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = [%[6]q]
      conf_dir = %[7]q
      max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`

// writeKubeletConfig writes the kubelet's configuration and returns its
// path: cgroupfs under the node's own cgroup root (cgroup v1 allowed),
// serving on the node IP with x509 and webhook authentication and webhook
// authorization, files under the node's directory.
func (n *RealNode) writeKubeletConfig(serving *certKey, taints []corev1.Taint) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		ContainerRuntimeEndpoint: n.RuntimeEndpoint,
		ImageServiceEndpoint:     n.RuntimeEndpoint,
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               n.record.CgroupRoot,
		CgroupsPerQOS:            ptr.To(true),
		EnforceNodeAllocatable:   []string{"pods"},
		Address:                  n.IP,
		Port:                     int32(ports[0]), //nolint:gosec // a port number
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr.To(int32(ports[1])), //nolint:gosec // a port number
		ReadOnlyPort:             0,
		TLSCertFile:              serving.CertPath,
		TLSPrivateKeyFile:        serving.KeyPath,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: n.cluster.CAPath},
		},
		Authorization:               kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		PodLogsDir:                  filepath.Join(n.Dir, "pod-logs"),
		SerializeImagePulls:         ptr.To(false),
		RegisterNode:                ptr.To(true),
		RegisterWithTaints:          taints,
		MaxPods:                     110,
		EvictionHard:                map[string]string{"memory.available": "1Mi"},
		ImageGCHighThresholdPercent: ptr.To(int32(100)),
		ImageGCLowThresholdPercent:  ptr.To(int32(99)),
		FailSwapOn:                  ptr.To(false),
		ClusterDomain:               ClusterDomain,
		ClusterDNS:                  []string{ClusterDNSIP},
		ResolverConfig:              ptr.To("/etc/resolv.conf"),
		NodeStatusReportFrequency:   metav1.Duration{Duration: time.Minute},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(n.Dir, "kubelet-config.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

// importImages imports RealNodeImages, and the archives of extra (by image
// name), into containerd's CRI namespace with ctr (no registry: the pause
// image is pinned, pods use IfNotPresent).
func importImages(ctx context.Context, rt *NodeRuntime, socket string, extra map[string]string) error {
	files := map[string]string{}
	for name, file := range RealNodeImages {
		files[name] = filepath.Join(rt.ImageDir, file)
	}
	maps.Copy(files, extra)
	return importArchives(ctx, rt, socket, files)
}

// importArchives imports the OCI archives of files (by image name).
func importArchives(ctx context.Context, rt *NodeRuntime, socket string, files map[string]string) error {
	for name, file := range files {
		cmd := exec.CommandContext(ctx, rt.Ctr, "--address", socket, "--namespace", "k8s.io", "images", "import", file)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("importing %s: %w: %s", name, err, out)
		}
	}
	return nil
}

// ImportImages imports more images (OCI archives, by image name) into the
// running node's containerd, as an operator loads a new build onto its
// nodes before an upgrade.
func (n *RealNode) ImportImages(ctx context.Context, images map[string]string) error {
	rt, err := FindNodeRuntime(n.cluster.bins.Dir)
	if err != nil {
		return err
	}
	return importArchives(ctx, rt, n.record.Socket(), images)
}

func newRuntimeService(socket string) (internalapi.RuntimeService, error) {
	logger := klog.Background()
	return criclient.NewRemoteRuntimeService("unix://"+socket, 10*time.Second, noop.NewTracerProvider(), &logger)
}

// removeSandboxes stops and removes every pod sandbox of the containerd at
// socket: stopping runs CNI DEL, which removes the pod's veth, IP and
// nftables rules.
func removeSandboxes(ctx context.Context, socket string) {
	svc, err := newRuntimeService(socket)
	if err != nil {
		return
	}
	defer func() { _ = svc.Close() }()
	pods, err := svc.ListPodSandbox(ctx, nil)
	if err != nil {
		return
	}
	for _, p := range pods {
		_ = svc.StopPodSandbox(ctx, p.Id)
		_ = svc.RemovePodSandbox(ctx, p.Id)
	}
}

// createBridge creates the node's bridge with the pods' gateway address and
// brings it up (the CNI bridge plugin then uses it as it is).
func createBridge(name string, gateway netip.Addr, podCIDR string) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("creating bridge %s: %w", name, err)
	}
	prefix := netip.MustParsePrefix(podCIDR)
	addr, err := netlink.ParseAddr(netip.PrefixFrom(gateway, prefix.Bits()).String())
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("adding %s to bridge %s: %w", addr, name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bringing bridge %s up: %w", name, err)
	}
	return nil
}
