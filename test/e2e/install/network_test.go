package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/provider/noderoutes"
	"github.com/nestlet/nestlet/test/framework"
)

// TestOnePodNetwork: the chart's gateway runs in every cluster (the
// working agent on its node's network; the parents' UDP port published on
// their hosts as an operator forwards a port). A pod on the root's own node
// and a pod made at the root that runs in east-1, two levels down behind
// two NATs, reach each other by pod IP, both ways, through the tunnels
// east-1 and east opened; each server sees the client's own pod IP. So does
// a pod on the root's other node, where no agent runs: its route agent
// sends the tree's CIDRs to the agent's node through VXLAN.
func TestOnePodNetwork(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root")
	atRoot := podOnNode(t, root, ns, "at-root", rootNode)
	atRoot2 := podOnNode(t, root, ns, "at-root-2", rootNode2)
	// The root's agent published its node for the route agents.
	cm, err := root.Client.CoreV1().ConfigMaps(chartNamespace).Get(ctx, noderoutes.ConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rootNode, cm.Data[noderoutes.KeyNode])
	routesOnNode(t, root.RealNode(rootNode2))
	inLeaf := webDeployment(t, ns, "in-east-1", 1)[0]

	// Each child's Targets say its tunnel is up.
	for _, c := range []string{"east", "east-1"} {
		targets, err := v1alpha1.NewTargetClient(env.Cluster(c).Config)
		require.NoError(t, err)
		framework.Eventually(t, time.Minute, c+"'s tunnel to its parent up", func(ctx context.Context) (bool, string) {
			list, err := targets.List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) == 0 {
				return false, fmt.Sprintf("no Target (%v)", err)
			}
			for i := range list.Items {
				if launcher.TargetCondition(&list.Items[i], v1alpha1.ConditionTunnel).Status != metav1.ConditionTrue {
					return false, fmt.Sprintf("%+v", list.Items)
				}
			}
			return true, ""
		})
	}
	for _, pair := range []struct{ client, server *corev1.Pod }{{&inLeaf, atRoot}, {atRoot, &inLeaf}, {&inLeaf, atRoot2}, {atRoot2, &inLeaf}} {
		path := fmt.Sprintf("/from-%s-%d", pair.client.Name, time.Now().UnixNano())
		url := "http://" + pair.server.Status.PodIP + ":8080" + path
		out, errOut, err := framework.Kubectl(ctx, env, root, "", "-n", ns, "exec", pair.client.Name, "--", "/demo-app", "until", url, "60")
		require.NoError(t, err, "%s does not reach %s at %s: %s %s", pair.client.Name, pair.server.Name, url, out, errOut)
		logs, errOut, err := framework.Kubectl(ctx, env, root, "", "-n", ns, "logs", pair.server.Name)
		require.NoError(t, err, errOut)
		want := "GET " + path + " from " + pair.client.Status.PodIP + ":"
		require.True(t, strings.Contains(logs, want), "%s's logs do not show the request from %s's own IP (%q): %s", pair.server.Name, pair.client.Name, want, logs)
	}
}

// podOnNode runs the demo app in a pod on node of c and returns it once it
// is ready.
func podOnNode(t *testing.T, c *launcher.Cluster, ns, name, node string) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(2)),
			Containers: []corev1.Container{{Name: "app", Image: launcher.DemoAppImage, ImagePullPolicy: corev1.PullIfNotPresent}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var pod *corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the pod on "+node+" ready", func(ctx context.Context) (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return podutil.IsPodReady(p) && p.Status.PodIP != "", fmt.Sprintf("phase %s, IP %q", p.Status.Phase, p.Status.PodIP)
	})
	return pod
}

// routesOnNode waits until the route agent of node n holds its VXLAN
// interface with routes and the nftables table that keeps the pods' source
// addresses.
func routesOnNode(t *testing.T, n *launcher.RealNode) {
	t.Helper()
	_ = vxlanOnNode(t, n, true)
}

// vxlanOnNode waits until node n has the route agents' VXLAN interface
// (with routes through it when routed) and their nftables table, and
// returns the interface's index: another index later is another interface.
func vxlanOnNode(t *testing.T, n *launcher.RealNode, routed bool) int {
	t.Helper()
	nl, nft := nodeNetwork(t, n)
	index := 0
	framework.Eventually(t, time.Minute, "the route agent's interface and table on "+n.Name, func(context.Context) (bool, string) {
		link, err := nl.LinkByName(noderoutes.Device)
		if err != nil {
			return false, err.Error()
		}
		index = link.Attrs().Index
		routes, err := nl.RouteList(link, netlink.FAMILY_V4)
		if routed && (err != nil || len(routes) == 0) {
			return false, fmt.Sprintf("no route through %s (%v)", noderoutes.Device, err)
		}
		tables, err := nft.ListTablesOfFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return false, err.Error()
		}
		for _, tb := range tables {
			if tb.Name != noderoutes.NATTable {
				continue
			}
			// VXLAN is accepted from the cluster's nodes only.
			set, err := nft.GetSetByName(tb, noderoutes.PeersSet)
			if err != nil {
				return false, fmt.Sprintf("no set %s: %v", noderoutes.PeersSet, err)
			}
			peers, err := nft.GetSetElements(set)
			if err != nil || len(peers) == 0 {
				return false, fmt.Sprintf("no address in set %s (%v)", noderoutes.PeersSet, err)
			}
			return true, ""
		}
		return false, "no nftables table " + noderoutes.NATTable
	})
	return index
}

// nodeNetwork returns netlink and nftables connections to node n's network
// namespace, closed when the test ends.
func nodeNetwork(t *testing.T, n *launcher.RealNode) (*netlink.Handle, *nftables.Conn) {
	t.Helper()
	h, err := netns.GetFromName(n.Netns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	nl, err := netlink.NewHandleAt(h)
	require.NoError(t, err)
	t.Cleanup(nl.Close)
	nft, err := nftables.New(nftables.WithNetNSFd(int(h)))
	require.NoError(t, err)
	return nl, nft
}

// noRoutesOnNode waits until node n has neither the route agents'
// interface nor their table.
func noRoutesOnNode(t *testing.T, n *launcher.RealNode) {
	t.Helper()
	nl, nft := nodeNetwork(t, n)
	framework.Eventually(t, time.Minute, "the route agent's interface and table gone from "+n.Name, func(context.Context) (bool, string) {
		if _, err := nl.LinkByName(noderoutes.Device); err == nil {
			return false, noderoutes.Device + " is still there"
		}
		tables, err := nft.ListTablesOfFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return false, err.Error()
		}
		for _, tb := range tables {
			if tb.Name == noderoutes.NATTable {
				return false, "table " + noderoutes.NATTable + " is still there"
			}
		}
		return true, ""
	})
}
