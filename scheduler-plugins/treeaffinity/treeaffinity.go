// Package treeaffinity is the TreeAffinity scheduler plugin: the built-in
// InterPodAffinity filter, with a virtual node judged as the many hosts it
// stands for. The built-in filter reads a virtual node's hostname label as
// one host, so a Deployment with required anti-affinity on
// kubernetes.io/hostname got one replica per child however many nodes the
// child has. Here, on a virtual node, every term on other keys is judged as
// the built-in filter judges it, and anti-affinity on the hostname admits
// the pod while the node's matching nodes outnumber the pods there that it
// may not share a host with; the child then keeps them apart among its own
// nodes, and so on down. Real nodes are judged by the built-in filter alone.
//
// A pod with required affinity on the hostname (to be on the host of
// another pod) keeps the built-in judgement of the virtual node as one
// host: the child then places it beside that pod.
package treeaffinity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"

	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "TreeAffinity"

// ErrReasonHosts is the reason a virtual node is refused when each of its
// hosts the pod may run on already holds a pod it may not share one with.
const ErrReasonHosts = "node(s) didn't match pod anti-affinity rules (every host below holds a pod the anti-affinity excludes)"

type builtIn interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

// TreeAffinity implements fwk.PreFilterPlugin and fwk.FilterPlugin.
type TreeAffinity struct {
	inner      builtIn
	namespaces corelisters.NamespaceLister
	summaries  virtualnode.SummaryCache
}

var (
	_ fwk.PreFilterPlugin = &TreeAffinity{}
	_ fwk.FilterPlugin    = &TreeAffinity{}
)

// New returns the plugin, over the built-in one with its default
// arguments; it takes none.
func New(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	inner, err := interpodaffinity.New(ctx, &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}, h,
		feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	if err != nil {
		return nil, err
	}
	return &TreeAffinity{inner: inner.(builtIn), namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister()}, nil
}

// Name returns the plugin's name.
func (*TreeAffinity) Name() string { return Name }

// PreFilter is the built-in one's.
func (pl *TreeAffinity) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return pl.inner.PreFilter(ctx, state, pod, nodes)
}

// PreFilterExtensions are the built-in one's (for preemption's what-ifs).
func (pl *TreeAffinity) PreFilterExtensions() fwk.PreFilterExtensions {
	return pl.inner.PreFilterExtensions()
}

// Filter judges a real node as the built-in filter does, and a virtual node
// as the hosts it stands for.
func (pl *TreeAffinity) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	n := ni.Node()
	if n == nil || !virtualnode.IsVirtual(n) || affineToHost(pod) {
		return pl.inner.Filter(ctx, state, pod, ni)
	}
	// Every term but those on the hostname, by the built-in filter: it
	// reads the node's labels alone, and this node then has no hostname.
	hostless := n.DeepCopy()
	delete(hostless.Labels, corev1.LabelHostname)
	if s := pl.inner.Filter(ctx, state, pod, &withNode{NodeInfo: ni, node: hostless}); !s.IsSuccess() {
		return s
	}
	excluded, err := pl.excludedHere(pod, ni)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if excluded == 0 {
		return nil
	}
	sum, _, ok := pl.summaries.Get(n)
	if !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: no summary reported yet", n.Name))
	}
	hosts := 0
	for _, g := range virtualnode.MatchingGroups(pod, n, sum) {
		hosts += g.Nodes
	}
	if excluded >= hosts {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHosts)
	}
	return nil
}

// affineToHost reports whether the pod requires to share a host with
// other pods.
func affineToHost(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return false
	}
	for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey == corev1.LabelHostname {
			return true
		}
	}
	return false
}

// excludedHere counts the pods on the virtual node that the pod may not
// share a host with: those its required anti-affinity on the hostname
// matches, and those whose own matches it.
func (pl *TreeAffinity) excludedHere(pod *corev1.Pod, ni fwk.NodeInfo) (int, error) {
	incoming, err := framework.NewPodInfo(pod)
	if err != nil {
		return 0, err
	}
	mine := hostTerms(incoming.GetRequiredAntiAffinityTerms())
	podNSLabels := pl.namespaceLabels(pod.Namespace)
	count := 0
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if p.DeletionTimestamp != nil {
			continue
		}
		excluded := false
		for i := range mine {
			if mine[i].Matches(p, pl.namespaceLabels(p.Namespace)) {
				excluded = true
				break
			}
		}
		if !excluded {
			theirs := hostTerms(pi.GetRequiredAntiAffinityTerms())
			for i := range theirs {
				if theirs[i].Matches(pod, podNSLabels) {
					excluded = true
					break
				}
			}
		}
		if excluded {
			count++
		}
	}
	return count, nil
}

func hostTerms(terms []fwk.AffinityTerm) []fwk.AffinityTerm {
	var out []fwk.AffinityTerm
	for _, t := range terms {
		if t.TopologyKey == corev1.LabelHostname {
			out = append(out, t)
		}
	}
	return out
}

func (pl *TreeAffinity) namespaceLabels(name string) labels.Set {
	if pl.namespaces == nil {
		return nil
	}
	ns, err := pl.namespaces.Get(name)
	if err != nil {
		return nil
	}
	return ns.Labels
}

// withNode is a node's info with another node object.
type withNode struct {
	fwk.NodeInfo
	node *corev1.Node
}

func (w *withNode) Node() *corev1.Node { return w.node }
