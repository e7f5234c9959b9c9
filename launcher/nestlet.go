package launcher

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/charts/nestlet/crds"
	"github.com/nestlet/nestlet/charts/nestlet/policies"
)

// InstallCRDs installs Nestlet's CRDs in the cluster.
func (c *Cluster) InstallCRDs(ctx context.Context) error { return crds.Install(ctx, c.Config) }

// TrustedSchedulers are the schedulers whose pods the launcher's agents
// forward without the virtual nodes' toleration: the launcher's clusters
// run Nestlet's profile as their default scheduler (default-scheduler), and
// Nestlet's own name.
var TrustedSchedulers = []string{"default-scheduler", "nestlet-scheduler"}

// StartAgent installs the CRDs in c, makes the nestlet StorageClass and the
// admission policy of children as the chart does (ensureNestletClass,
// policies.InstallChildren), and starts a nestlet agent for it, with
// an admin kubeconfig or the identity Config.Identities gives agents,
// logging to <env dir>/<cluster>-nestlet.log.
func (e *Environment) StartAgent(ctx context.Context, c *Cluster, extraArgs ...string) (*Process, error) {
	if err := c.InstallCRDs(ctx); err != nil {
		return nil, err
	}
	if err := c.ensureNestletClass(ctx); err != nil {
		return nil, err
	}
	namespace := agentNamespace(extraArgs)
	// As the chart does: a child of this cluster is held to a child's
	// rules in the API server (charts/nestlet/policies).
	if err := policies.InstallChildren(ctx, c.Client, namespace); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	kubeconfig, err := e.kubeconfigFor(ctx, c, ComponentAgent, namespace)
	if err != nil {
		return nil, err
	}
	// Every cluster the launcher makes takes its nodes' pod CIDRs from
	// PodCIDRRange (RealNodePodCIDRRange is part of it): that is the pool
	// each parent grants its children shares of, as an operator gives a
	// parent the range its children's cluster CIDRs come from.
	args := append([]string{"--kubeconfig=" + kubeconfig, "--v=2", "--trusted-schedulers=" + strings.Join(TrustedSchedulers, ","),
		"--pod-cidr-pool=" + PodCIDRRange}, extraArgs...)
	return e.StartProcessIn(c, c.Name+componentSuffixes[ComponentAgent], e.Nestlet.Nestlet, args...)
}

// componentSuffixes name the processes StartAgent and StartProxy start
// for a cluster: <cluster>-nestlet and <cluster>-nestlet-proxy.
var componentSuffixes = map[string]string{ComponentAgent: "-nestlet", ComponentProxy: "-nestlet-proxy"}

// ProcessComponent tells which cluster's agent or proxy the process named
// name is (StartAgent, StartProxy): the cluster's name and ComponentAgent
// or ComponentProxy; ok is false for any other process.
func ProcessComponent(name string) (cluster, component string, ok bool) {
	for component, suffix := range componentSuffixes {
		if cluster, ok := strings.CutSuffix(name, suffix); ok {
			return cluster, component, true
		}
	}
	return "", "", false
}

// GatewayPort is the UDP port of the agents' gateways on hosts.
const GatewayPort = 51820

// GatewayArgs are the agent's arguments that run its gateway (WireGuard
// tunnels between the clusters' hosts, --gateway) on c's host, with the
// host's WAN address as the endpoint its children open tunnels to. Only
// on hosts: clusters sharing this machine's network would share one
// interface name and port.
func (c *Cluster) GatewayArgs() []string {
	if c.Host == nil {
		return nil
	}
	return []string{"--gateway", fmt.Sprintf("--gateway-endpoint=%s:%d", c.Host.IP, GatewayPort), fmt.Sprintf("--gateway-listen-port=%d", GatewayPort),
		"--gateway-api-address=" + c.Host.APIAddress()}
}

// GatewayAPIRange holds the addresses where the hosts' gateways relay
// their clusters' API servers to the pods of the clusters below
// (--gateway-api-address): host i's is the address of this range with the
// host part of its WAN address, outside every pod CIDR of the launcher.
const GatewayAPIRange = "10.251.0.0/16"

// APIAddress is where h's gateway relays its cluster's API server
// (GatewayAPIRange), port 443.
func (h *Host) APIAddress() string {
	wan, rng := netip.MustParseAddr(h.IP).As4(), netip.MustParsePrefix(GatewayAPIRange).Addr().As4()
	return netip.AddrFrom4([4]byte{rng[0], rng[1], wan[2], wan[3]}).String()
}

// The node port range of the clusters' API servers (kube-apiserver's
// default --service-node-port-range).
const (
	ServiceNodePortFirst = 30000
	ServiceNodePortLast  = 32767
)

// StartProxyServingNodePorts is StartProxy with the proxy serving c's
// Services' node ports at the address its children's virtual nodes
// advertise (--service-node-ports), the range published to the WAN on its
// host, as a cloud's load balancer publishes node ports.
func (e *Environment) StartProxyServingNodePorts(ctx context.Context, c *Cluster, args ...string) (*Process, error) {
	p, err := e.StartProxy(ctx, c, append(args, "--service-node-ports")...)
	if err != nil || c.Host == nil {
		return p, err
	}
	for _, proto := range []string{"tcp", "udp"} {
		if err := c.Host.Open(proto, ServiceNodePortFirst, ServiceNodePortLast); err != nil {
			return p, fmt.Errorf("publishing the node ports of %s: %w", c.Name, err)
		}
	}
	return p, nil
}

// StartProxy starts a nestlet-proxy for c on free ports of its host's
// address (of this machine's, in NetworkShared), with an admin kubeconfig
// or the identity Config.Identities gives proxies,
// and waits until it has published its endpoints in
// kube-public/nestlet-info. args are added to the proxy's (for example
// --direct-nodes).
func (e *Environment) StartProxy(ctx context.Context, c *Cluster, args ...string) (*Process, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	ip := HostIP()
	if c.Host != nil {
		ip = c.Host.IP
	}
	// Its serving certificate comes from the cluster's CA, which the API
	// server verifies kubelet endpoints with.
	serving, err := c.ca.issue(filepath.Join(c.Dir, "pki"), "nestlet-proxy-serving", pkix.Name{CommonName: "nestlet-proxy"}, []net.IP{net.ParseIP(ip)}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.kubeconfigFor(ctx, c, ComponentProxy, api.DefaultNamespace)
	if err != nil {
		return nil, err
	}
	nodePorts, err := nodePortWindow(c.Host != nil)
	if err != nil {
		return nil, err
	}
	p, err := e.StartProcessIn(c, c.Name+componentSuffixes[ComponentProxy], e.Nestlet.Proxy, append([]string{"--node-ports=" + nodePorts,
		"--kubeconfig=" + kubeconfig, "--bind-address=" + ip, "--advertise-address=" + ip,
		"--tls-cert-file=" + serving.CertPath, "--tls-private-key-file=" + serving.KeyPath,
		fmt.Sprintf("--kubelet-port=%d", ports[0]), fmt.Sprintf("--tunnel-port=%d", ports[1]), "--v=2"}, args...)...)
	if err != nil {
		return nil, err
	}
	err = waitHealthy(ctx, p, time.Minute, func(ctx context.Context) bool {
		cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data[api.ClusterInfoProxyKubeletEndpoint] == net.JoinHostPort(ip, strconv.Itoa(ports[0]))
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: nestlet-proxy: %w", c.Name, err)
	}
	return p, nil
}

// Nestctl runs nestctl against cluster c and returns its standard output.
func (c *Cluster) Nestctl(ctx context.Context, args ...string) (string, error) {
	if c.nestlet == nil {
		return "", errors.New("cluster " + c.Name + " was not started by this program: run nestctl yourself")
	}
	cmd := exec.CommandContext(ctx, c.nestlet.Nestctl, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	var stderr []byte
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	if err != nil {
		return string(out), fmt.Errorf("nestctl %v: %w: %s", args, err, stderr)
	}
	return string(out), nil
}

var joinLine = regexp.MustCompile(`nestctl join (.*)`)

// JoinOptions tune Join.
type JoinOptions struct {
	// ClusterName of the child in the parent (default: the child's name).
	ClusterName string
	// ManualApproval leaves the child's CSR pending (no --auto-approve).
	ManualApproval bool
	// ExtraJoinArgs are added to `nestctl join`.
	ExtraJoinArgs []string
	// ParentURL is where the child reaches the parent's API server, when
	// not directly (a proxy in between).
	ParentURL string
	// NoWait returns once the Target is written, without waiting for it to
	// be Ready.
	NoWait bool
}

// Join joins child to parent as an operator does: `nestctl token create`
// against the parent, then the printed `nestctl join` against the child. It
// waits until the child's Target is Ready, and returns the Target's name.
func Join(ctx context.Context, parent, child *Cluster, o JoinOptions) (string, error) {
	name := o.ClusterName
	if name == "" {
		name = child.Name
	}
	if parent.Host != nil && child.Host != nil {
		// The parent's host lets its new child in, as an operator opens
		// a firewall to the clusters that join: the child dials the
		// parent's API server and proxy, never the other way.
		if err := parent.Host.Admit(child.Host); err != nil {
			return "", err
		}
	}
	create := []string{"token", "create", "--cluster-name=" + parent.Name, "--child-name=" + name}
	if !o.ManualApproval {
		create = append(create, "--auto-approve")
	}
	if o.ParentURL != "" {
		create = append(create, "--parent-url="+o.ParentURL)
	}
	out, err := parent.Nestctl(ctx, create...)
	if err != nil {
		return "", err
	}
	m := joinLine.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("token create printed no join command: %q", out)
	}
	args := append(splitArgs(m[1]), o.ExtraJoinArgs...)
	out, err = child.Nestctl(ctx, append([]string{"join"}, args...)...)
	if err != nil {
		return "", err
	}
	target := regexp.MustCompile(`target/(\S+) created`).FindStringSubmatch(out)
	if target == nil {
		return "", fmt.Errorf("join printed no target: %q", out)
	}
	if o.NoWait {
		return target[1], nil
	}
	return target[1], child.WaitTargetReady(ctx, target[1], 2*time.Minute)
}

func splitArgs(s string) []string {
	return regexp.MustCompile(`\s+`).Split(s, -1)
}

// WaitTargetReady waits until Target name has condition Ready=True.
func (c *Cluster) WaitTargetReady(ctx context.Context, name string, timeout time.Duration) error {
	var last *v1alpha1.Target
	err := c.WaitTarget(ctx, name, timeout, func(t *v1alpha1.Target) bool {
		last = t
		return TargetCondition(t, v1alpha1.ConditionReady).Status == metav1.ConditionTrue
	})
	if err != nil && last != nil {
		return fmt.Errorf("target %s of %s not Ready: %w (conditions %+v)", name, c.Name, err, last.Status.Conditions)
	}
	return err
}

// WaitTarget waits until ok holds for Target name.
func (c *Cluster) WaitTarget(ctx context.Context, name string, timeout time.Duration, ok func(*v1alpha1.Target) bool) error {
	targets, err := v1alpha1.NewTargetClient(c.Config)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		t, err := targets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		return ok(t), nil
	})
}

// TargetCondition returns condition typ of t (zero value if absent).
func TargetCondition(t *v1alpha1.Target, typ string) metav1.Condition {
	for _, c := range t.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// ensureNestletClass makes the StorageClass the agent provisions
// (api.StorageClassName), as the chart does; it is the cluster's default
// when the cluster has no nodes of its own and no other default class (a
// root or a middle cluster, whose pods all run in its children), as the
// chart's values advise.
func (c *Cluster) ensureNestletClass(ctx context.Context) error {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	own := 0
	for _, n := range nodes.Items {
		if n.Labels[api.LabelNodeType] != api.NodeTypeVirtualKubelet {
			own++
		}
	}
	classes, err := c.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	isDefault := own == 0
	for _, sc := range classes.Items {
		if sc.Name == api.StorageClassName {
			return nil
		}
		if sc.Annotations[defaultClassAnnotation] == "true" {
			isDefault = false
		}
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: api.StorageClassName},
		Provisioner:       api.StorageProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if isDefault {
		sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	}
	_, err = c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the %s StorageClass in %s: %w", api.StorageClassName, c.Name, err)
	}
	return nil
}
