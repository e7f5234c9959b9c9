package install

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	// release and chartNamespace are where the chart is installed in every
	// cluster, as its values file says.
	release        = "nestlet"
	chartNamespace = "nestlet-system"
	// The nodePorts of the root's proxy Service, which its load balancer
	// publishes on the same ports of the root's WAN address; the proxy
	// listens on the same numbers, since its virtual nodes advertise
	// <advertiseAddress>:<kubeletPort>.
	kubeletNodePort = 30250
	tunnelNodePort  = 30443
	// firstNodePort and nodePorts: the kubelet ports of the children's
	// virtual nodes (proxy.nodePorts), published the same way.
	firstNodePort = 30300
	nodePorts     = 4
	// proxyTLSSecret holds the proxy's serving certificate.
	proxyTLSSecret = "nestlet-proxy-tls"
	// proxyReplicas of every parent's proxy, peers.
	proxyReplicas = 2
)

// tree lists every cluster of the package with its parent, parents first.
var tree = []struct{ name, parent, node string }{
	{"root", "", rootNode},
	{"east", "root", eastNode},
	{"east-1", "east", leafNode},
}

// installTree installs the chart in every cluster, parents first: in a
// cluster with children with the proxy enabled (installParent's values),
// in a cluster with a parent with a Target (installChild's), and waits
// until each child's Target is Ready and its virtual node Ready in its
// parent.
func installTree(ctx context.Context) error {
	for _, c := range tree {
		// Every cluster runs the gateway: one pod network across the tree.
		// The agent on its node: the gateway's UDP port is published there
		// (parentValues), and the root's other node is routed to it.
		values := []string{"--set", "agent.gateway.enabled=true", "--set", `agent.nodeSelector.kubernetes\.io/hostname=` + c.node}
		if hasChildren(c.name) {
			v, err := parentValues(ctx, env.Cluster(c.name), c.node)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			values = append(values, v...)
		}
		if c.parent == "" {
			// The root's default scheduler is the stock one: the chart's
			// webhook routes the pods of opted-in namespaces to Nestlet's.
			values = append(values, "--set", "webhook.enabled=true")
			if err := helmInstall(ctx, env.Cluster(c.name), values...); err != nil {
				return fmt.Errorf("installing in %s: %w", c.name, err)
			}
			continue
		}
		if err := installChild(ctx, env.Cluster(c.name), env.Cluster(c.parent), values...); err != nil {
			return fmt.Errorf("installing in %s: %w", c.name, err)
		}
	}
	for _, c := range tree {
		if hasChildren(c.name) {
			if err := waitProxyPublished(ctx, env.Cluster(c.name)); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	return nil
}

func hasChildren(name string) bool {
	for _, c := range tree {
		if c.parent == name {
			return true
		}
	}
	return false
}

// imageValues are the values that point the chart at the image the real
// nodes imported (nothing is pulled).
func imageValues() []string {
	return []string{"--set", "image.repository=" + image.Repository(), "--set", "image.tag=" + image.Tag(), "--set", "image.pullPolicy=Never"}
}

// chartPath is charts/nestlet.
func chartPath() (string, error) {
	root, err := launcher.RepoRoot()
	return filepath.Join(root, "charts", "nestlet"), err
}

// helmInstall installs the chart in c and waits for its Deployments.
func helmInstall(ctx context.Context, c *launcher.Cluster, values ...string) error {
	chart, err := chartPath()
	if err != nil {
		return err
	}
	args := append([]string{"install", release, chart, "--namespace", chartNamespace,
		"--create-namespace", "--wait", "--timeout", "5m"}, imageValues()...)
	_, err = framework.Helm(ctx, env, c, append(args, values...)...)
	return err
}

// parentValues gives a parent's proxy a serving certificate from its
// cluster CA, publishes the proxy's nodePorts on its host's WAN address and
// returns the chart values that enable the proxy.
func parentValues(ctx context.Context, c *launcher.Cluster, node string) ([]string, error) {
	certPath, keyPath, err := c.IssueServingCertificate("chart-proxy-serving", "nestlet-proxy", net.ParseIP(c.Host.IP))
	if err != nil {
		return nil, err
	}
	crt, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	if err := c.EnsureNamespace(ctx, chartNamespace); err != nil {
		return nil, err
	}
	_, err = c.Client.CoreV1().Secrets(chartNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: proxyTLSSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	nodeIP, err := netip.ParseAddr(c.RealNode(node).IP)
	if err != nil {
		return nil, err
	}
	published := map[uint16]netip.AddrPort{
		kubeletNodePort: netip.AddrPortFrom(nodeIP, kubeletNodePort),
		tunnelNodePort:  netip.AddrPortFrom(nodeIP, tunnelNodePort),
	}
	for p := uint16(firstNodePort); p < firstNodePort+nodePorts; p++ {
		published[p] = netip.AddrPortFrom(nodeIP, p)
	}
	if err := c.Host.Publish("proxy", published); err != nil {
		return nil, err
	}
	// The gateway's UDP port too, where the working agent listens on the
	// node's network.
	if err := c.Host.PublishUDP("gateway", map[uint16]netip.AddrPort{
		launcher.GatewayPort: netip.AddrPortFrom(nodeIP, launcher.GatewayPort),
	}); err != nil {
		return nil, err
	}
	return []string{
		// Its children's pod CIDRs come from the launcher's range: the
		// pool it grants them shares of.
		"--set", "agent.podCIDRPool={" + launcher.PodCIDRRange + "}",
		"--set", fmt.Sprintf("agent.gateway.endpoint=%s:%d", c.Host.IP, launcher.GatewayPort),
		"--set", fmt.Sprintf("agent.gateway.listenPort=%d", launcher.GatewayPort),
		"--set", "proxy.enabled=true",
		"--set", fmt.Sprintf("proxy.replicas=%d", proxyReplicas),
		"--set", "proxy.advertiseAddress=" + c.Host.IP,
		"--set", fmt.Sprintf("proxy.kubeletPort=%d", kubeletNodePort),
		"--set", fmt.Sprintf("proxy.tunnelPort=%d", tunnelNodePort),
		"--set", "proxy.service.type=NodePort",
		"--set", fmt.Sprintf("proxy.service.kubeletNodePort=%d", kubeletNodePort),
		"--set", fmt.Sprintf("proxy.service.tunnelNodePort=%d", tunnelNodePort),
		"--set", fmt.Sprintf("proxy.nodePorts.first=%d", firstNodePort),
		"--set", fmt.Sprintf("proxy.nodePorts.count=%d", nodePorts),
		"--set", "proxy.tls.secretName=" + proxyTLSSecret,
	}, nil
}

// waitProxyPublished waits until c's proxy has published its endpoints for
// the children to find.
func waitProxyPublished(ctx context.Context, c *launcher.Cluster) error {
	want := net.JoinHostPort(c.Host.IP, fmt.Sprint(kubeletNodePort))
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data[api.ClusterInfoProxyKubeletEndpoint] == want, nil
	})
}

var joinFlag = regexp.MustCompile(`--(parent-url|token|ca-cert-hash|cluster-name) (\S+)`)

// installChild makes a bootstrap token in the parent for the child
// (`nestctl token create`, as the operator of the parent does), and
// installs the chart in the child with a Target built from what it
// printed, as the chart's values document.
func installChild(ctx context.Context, c, parent *launcher.Cluster, values ...string) error {
	// The parent's host lets its child in, as an operator opens a firewall
	// to the clusters that join.
	if err := parent.Host.Admit(c.Host); err != nil {
		return err
	}
	out, err := parent.Nestctl(ctx, "token", "create", "--cluster-name="+parent.Name, "--child-name="+c.Name, "--auto-approve")
	if err != nil {
		return err
	}
	flags := map[string]string{}
	for _, m := range joinFlag.FindAllStringSubmatch(out, -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) != 4 {
		return fmt.Errorf("token create printed no complete join command: %q", out)
	}
	target, err := yaml.Marshal(map[string]any{"targets": []map[string]any{{
		"name":            parent.Name,
		"parentURL":       flags["parent-url"],
		"clusterName":     flags["cluster-name"],
		"token":           flags["token"],
		"caCertHash":      flags["ca-cert-hash"],
		"reportFrequency": "3s",
	}}})
	if err != nil {
		return err
	}
	file := filepath.Join(env.Dir, c.Name+"-values.yaml")
	if err := os.WriteFile(file, target, 0o600); err != nil {
		return err
	}
	if err := helmInstall(ctx, c, append(values, "--values", file)...); err != nil {
		return err
	}
	if err := c.WaitTargetReady(ctx, parent.Name, 3*time.Minute); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := parent.Client.CoreV1().Nodes().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// dumpComponentLogs prints the last lines of every Nestlet pod's logs in
// every cluster (they run in containerd, not as processes the
// Environment's log tails cover).
func dumpComponentLogs() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range env.Clusters() {
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: listing %s: %v\n", c.Name, chartNamespace, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "==> %s: pods in %s <==\n%s\n", c.Name, chartNamespace, framework.DescribePods(pods.Items))
		if all, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
			var notReady []corev1.Pod
			for _, p := range all.Items {
				if p.Namespace != chartNamespace && !podutil.IsPodReady(&p) {
					notReady = append(notReady, p)
				}
			}
			fmt.Fprintf(os.Stderr, "==> %s: pods not Ready in other namespaces <==\n%s\n", c.Name, framework.DescribePods(notReady))
		}
		for _, p := range pods.Items {
			out, errOut, _ := framework.Kubectl(ctx, env, c, "", "-n", chartNamespace, "logs", p.Name, "--all-containers", "--tail=40")
			fmt.Fprintf(os.Stderr, "==> %s: pod %s (%s on %q) <==\n%s%s\n", c.Name, p.Name, p.Status.Phase, p.Spec.NodeName, out, errOut)
		}
	}
}
