package launcher

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/knftables"
)

// kubeProxyTable is the nftables table kube-proxy's nftables mode owns, in
// the ip and ip6 families. Its name is fixed, so only one kube-proxy can
// run in a network namespace: real nodes share the host's, hence at most
// one real node per host runs kube-proxy.
const kubeProxyTable = "kube-proxy"

// startKubeProxy starts kube-proxy for the node, in nftables mode, so that
// its pods reach Services by ClusterIP, and waits until it is healthy.
// NodePorts are served on the node's address only (never on 127.0.0.1,
// where the control planes listen).
func (n *RealNode) startKubeProxy(ctx context.Context, rt *NodeRuntime) error {
	if _, err := os.Stat(rt.KubeProxy); err != nil {
		return fmt.Errorf("%w: %s is missing: run make node-runtime (hack/install-node-runtime.sh) to build it", ErrRealNodesUnavailable, rt.KubeProxy)
	}
	if n.Netns == "" {
		unlock, err := hostLock()
		if err != nil {
			return err
		}
		records, err := readHostRecords()
		unlock()
		if err != nil {
			return err
		}
		for _, r := range records {
			if r.Index != n.record.Index && r.KubeProxy != nil && r.Netns == "" && !r.stale() {
				return fmt.Errorf("real node %s already runs kube-proxy on this machine's network: its nftables table %q is host-wide, so only one real node sharing this machine's network may have KubeProxy (give clusters hosts of their own: NetworkHosts)", r.Node, kubeProxyTable)
			}
		}
	}
	c := n.cluster
	pkiDir := filepath.Join(n.Dir, "pki")
	client, err := c.ca.issue(pkiDir, "kube-proxy", pkix.Name{CommonName: "system:kube-proxy"}, nil, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := c.writeKubeconfig(filepath.Join("nodes", n.Name, "kube-proxy"), client)
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	healthz := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcessIn(n.Netns, n.Dir, "kube-proxy", rt.KubeProxy, nil,
		"--kubeconfig="+kubeconfig,
		"--hostname-override="+n.Name,
		"--proxy-mode=nftables",
		"--cluster-cidr="+n.PodCIDR,
		"--nodeport-addresses="+n.IP+"/32",
		"--healthz-bind-address="+healthz,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		// Leave the host's conntrack sysctls as they are.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--v=1",
	)
	if err != nil {
		return err
	}
	c.track(p)
	n.KubeProxy = p
	if err := n.recordProcess(p, &n.record.KubeProxy); err != nil {
		return err
	}
	err = waitHealthy(ctx, p, time.Minute, func(ctx context.Context) bool { return httpOKIn(ctx, n.Netns, "http://"+healthz+"/healthz") })
	if err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	return nil
}

// deleteKubeProxyTables removes kube-proxy's tables once it is stopped (it
// leaves them behind, as every Service rule would keep applying).
func deleteKubeProxyTables() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		nft, err := knftables.New(family, kubeProxyTable)
		if err != nil {
			return nil //nolint:nilerr // nftables unusable here: nothing was made
		}
		tx := nft.NewTransaction()
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil && !knftables.IsNotFound(err) {
			return fmt.Errorf("nftables table %s %s: %w", family, kubeProxyTable, err)
		}
	}
	return nil
}
