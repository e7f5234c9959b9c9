package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/summary"
	"github.com/nestlet/nestlet/provider/vnode"
)

// Pod CIDR overlaps are found by the parent, which alone sees all its
// nodes (a node identity may read only its own Node): its agent compares
// each child's pod CIDRs (from the summary) with every other node's and
// child's, and writes the result on the child's virtual node
// (api.AnnotationPodCIDROverlap). The child reads it back from its own
// node and reports it as ConditionPodCIDRsDistinct on its Target.

// maxClashes is how many overlaps a description names.
const maxClashes = 5

// podCIDROverlap returns what the pod CIDRs of node n (a child's virtual
// node) overlap among the other nodes of this cluster: api.PodCIDROverlapNone,
// or a description. Children that share a cluster with n (a diamond), and
// other Targets of n's own cluster (the same cluster under another name),
// run the same pods: no conflict.
func podCIDROverlap(n *corev1.Node, nodes corelisters.NodeLister, cache *cidrCache) string {
	desc, _ := podCIDRClashes(n, nodes, cache)
	return desc
}

// podCIDRClashes is podCIDROverlap, and the other nodes' pod CIDRs that
// overlap n's (every one of them, however many the description names):
// the gateway routes to n what its pod CIDRs cover but those
// (routableCIDRs).
func podCIDRClashes(n *corev1.Node, nodes corelisters.NodeLister, cache *cidrCache) (string, []string) {
	own, ownSum := cache.of(n)
	if len(own) == 0 {
		return api.PodCIDROverlapNone, nil
	}
	all, err := nodes.List(labels.Everything())
	if err != nil {
		return api.PodCIDROverlapNone, nil
	}
	// The oldest first, and at most maxClashes of them with no count of
	// the rest: a node that joins later changes no description that is
	// full already. Many children with the same default pod CIDR (kind's,
	// say) joining one after another would otherwise each rewrite every
	// other's.
	slices.SortFunc(all, func(a, b *corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	uid := n.Annotations[api.AnnotationClusterUID]
	var clashes, clashing []string
	for _, o := range all {
		if o.Name == n.Name || uid != "" && o.Annotations[api.AnnotationClusterUID] == uid {
			continue
		}
		theirs, theirSum := cache.of(o)
		if ownSum != nil && theirSum != nil && api.SharesBranch(ownSum, theirSum) {
			continue
		}
		what := "node " + o.Name
		if theirSum != nil {
			what = "cluster " + o.Name
		}
		for _, pair := range summary.Overlaps(own, theirs) {
			clashes = append(clashes, fmt.Sprintf("%s overlaps %s of %s", pair[0], pair[1], what))
			if !slices.Contains(clashing, pair[1]) {
				clashing = append(clashing, pair[1])
			}
		}
	}
	if len(clashes) == 0 {
		return api.PodCIDROverlapNone, nil
	}
	if len(clashes) > maxClashes {
		clashes = append(clashes[:maxClashes], "and more")
	}
	return strings.Join(clashes, "; "), clashing
}

// routableCIDRs is what own covers but taken: the addresses of a child
// that no other node of this cluster claims too, as prefixes. A summary's
// merged prefix that a sibling's overlaps loses that part only.
func routableCIDRs(own, taken []string) []string {
	var out []string
	for _, p := range subtract(prefixes(own), prefixes(taken)) {
		out = append(out, p.String())
	}
	return out
}

// cidrCache keeps, by node, the pod CIDRs and covered clusters of its
// summary, parsed again only when the summary annotation changes: the
// decorator compares every child with every other node on each report.
type cidrCache struct{ m sync.Map } // node name -> cidrEntry

type cidrEntry struct {
	raw   string
	cidrs []string
	sum   *api.Summary
}

// of returns a node's pod CIDRs: a virtual node's from its summary (which
// it returns too, with only what says which clusters it covers); a real
// node's from its spec.
func (c *cidrCache) of(n *corev1.Node) (cidrs []string, sum *api.Summary) {
	raw, ok := n.Annotations[api.AnnotationSummary]
	if ok && len(raw) > api.MaxSummaryBytes {
		return nil, nil // not read at all (api.ParseSummary)
	}
	if !ok {
		if len(n.Spec.PodCIDRs) > 0 {
			return n.Spec.PodCIDRs, nil
		}
		if n.Spec.PodCIDR != "" {
			return []string{n.Spec.PodCIDR}, nil
		}
		return nil, nil
	}
	if v, ok := c.m.Load(n.Name); ok && v.(cidrEntry).raw == raw {
		e := v.(cidrEntry)
		return e.cidrs, e.sum
	}
	// Only these fields, not the whole summary.
	var part struct {
		Version      int      `json:"version"`
		Covered      []string `json:"covered"`
		Branches     []string `json:"branches"`
		BranchFilter string   `json:"branchFilter"`
		PodCIDRs     []string `json:"podCIDRs"`
	}
	if err := json.Unmarshal([]byte(raw), &part); err != nil {
		return nil, nil
	}
	sum = &api.Summary{Version: part.Version, Covered: part.Covered, Branches: part.Branches, BranchFilter: part.BranchFilter}
	c.m.Store(n.Name, cidrEntry{raw: raw, cidrs: part.PodCIDRs, sum: sum})
	return part.PodCIDRs, sum
}

// checkPodCIDRs keeps ConditionPodCIDRsDistinct of the Target in step with
// what the parent found (see above), reading this cluster's virtual node
// (prov's, named name) every few report periods, until ctx ends.
func checkPodCIDRs(ctx context.Context, clk clock.WithTicker, nodeClient kubernetes.Interface, name string, prov *vnode.Provider, status *runStatus) {
	every := max(3*reportFrequency(status.target), 15*time.Second)
	tick := clk.NewTicker(every)
	defer tick.Stop()
	// The Ready write of the run recorded the check as pending (or
	// impossible): the parent's agent answers within a report or two.
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		if cond, err := podCIDRCondition(ctx, nodeClient, name, prov); err == nil {
			status.set(ctx, cond)
		} else if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Reading the parent's pod CIDR check", "err", err)
		}
	}
}

// podCIDRCondition reads what the parent found about prov's pod CIDRs on
// virtual node name.
func podCIDRCondition(ctx context.Context, nodeClient kubernetes.Interface, name string, prov *vnode.Provider) (metav1.Condition, error) {
	own, err := prov.PodCIDRs()
	if err != nil {
		return metav1.Condition{}, err
	}
	cond := podCIDRPending(own)
	if len(own) == 0 {
		return cond, nil
	}
	n, err := nodeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return cond, err
	}
	switch found, ok := n.Annotations[api.AnnotationPodCIDROverlap]; {
	case !ok:
	case found == api.PodCIDROverlapNone:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPodCIDRsDistinct
		cond.Message = fmt.Sprintf("pod CIDRs %s overlap no other node or cluster of the parent", strings.Join(own, ", "))
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonPodCIDROverlap
		cond.Message = fmt.Sprintf("pod CIDRs collide in the parent: %s. Pods in both places may get the same IP, so pod IPs and the endpoints of Services seen from the parent are ambiguous, and the parent's gateway routes none of the colliding ranges (the others still are); give every joined cluster its own pod CIDR (kube-controller-manager --cluster-cidr, or the CNI's IP pool)", found)
	}
	return cond, nil
}

// podCIDRPending is the pod CIDR condition before the parent has answered:
// pending, or impossible without pod CIDRs.
func podCIDRPending(own []string) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionPodCIDRsDistinct, Status: metav1.ConditionUnknown}
	if len(own) == 0 {
		cond.Reason = v1alpha1.ReasonNoPodCIDRs
		cond.Message = "no node of this cluster's subtree has spec.podCIDR set, so overlaps with the parent's other clusters cannot be checked"
		return cond
	}
	cond.Reason = v1alpha1.ReasonPodCIDRCheckPending
	cond.Message = fmt.Sprintf("pod CIDRs %s: the parent's Nestlet agent has not compared them with its other clusters yet", strings.Join(own, ", "))
	return cond
}
