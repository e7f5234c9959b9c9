package forward

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/test/framework"
)

// Pods in different leaves, and on different nodes of one leaf, have
// distinct IPs at the root: each leaf node has its own pod CIDR, as the
// nodes of clusters meant to be joined must, and the root shows the IP the
// leaf gave.
func TestPodIPsDistinctAcrossLeaves(t *testing.T) {
	const replicas = 12
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	d := deployment(ns, "ips", replicas, "")
	d.Spec.Template.Spec.NodeSelector = nil
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	rootPods := waitPods(t, "root", ns, "app=ips", 2*time.Minute, func(ps []corev1.Pod) bool {
		return countRunning(ps) == replicas && len(ps) == replicas
	})

	atRoot := map[string]string{}
	for _, p := range rootPods {
		require.NotEmpty(t, p.Status.PodIP, p.Name)
		other, dup := atRoot[p.Status.PodIP]
		require.False(t, dup, "pods %s and %s both have IP %s at the root", other, p.Name, p.Status.PodIP)
		atRoot[p.Status.PodIP] = p.Name
	}
	// Where the pods run: the leaves, and the root's own (real) node.
	inLeaves := map[string]string{}
	var onRootNode []corev1.Pod
	for _, p := range rootPods {
		if p.Spec.NodeName == "root-node" {
			onRootNode = append(onRootNode, p)
		}
	}
	runs := map[string][]corev1.Pod{"root": onRootNode}
	for _, leaf := range []string{"east-1", "east-2", "west-1", "west-2"} {
		runs[leaf] = delegates(t, leaf, ns)
	}
	for leaf, ps := range runs {
		for _, d := range ps {
			node, err := env.Cluster(leaf).Client.CoreV1().Nodes().Get(t.Context(), d.Spec.NodeName, metav1.GetOptions{})
			require.NoError(t, err)
			cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
			require.NoError(t, err, "node %s/%s has a pod CIDR", leaf, node.Name)
			ip, err := netip.ParseAddr(d.Status.PodIP)
			require.NoError(t, err, "pod %s/%s has an IP", leaf, d.Name)
			require.True(t, cidr.Contains(ip), "pod %s/%s: IP %s outside its node's pod CIDR %s", leaf, d.Name, ip, cidr)
			inLeaves[d.Status.PodIP] = leaf
		}
	}
	require.Len(t, inLeaves, replicas, "one running pod per root pod, each with its own IP")
	leaves := map[string]bool{}
	for ip, name := range atRoot {
		leaf, ok := inLeaves[ip]
		require.True(t, ok, "root pod %s has IP %s, which no leaf pod has", name, ip)
		leaves[leaf] = true
	}
	t.Logf("%d pods over %d clusters, all with distinct IPs", replicas, len(leaves))
	require.GreaterOrEqual(t, len(leaves), 2, "the replicas spread over more than one cluster")
}
