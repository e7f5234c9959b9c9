// Package treeaffinity is the TreeAffinity scheduler plugin: the built-in
// InterPodAffinity filter, with a virtual node judged as the many hosts it
// stands for. The built-in filter reads a virtual node's hostname label as
// one host, so a Deployment with required anti-affinity on
// kubernetes.io/hostname got one replica per child however many nodes the
// child has. Here, on a virtual node, every term on other keys is judged as
// the built-in filter judges it, and anti-affinity on the hostname admits
// the pod while the node's matching nodes outnumber the pods there that it
// may not share a host with; the child then keeps them apart among its own
// nodes, and so on down. The same holds for anti-affinity on any key whose
// domains lie inside the child (a zone, when the child spans several and
// its node has no zone label): the node's matching groups' values of the
// key must outnumber the pods there it excludes. Real nodes are judged by
// the built-in filter alone.
//
// A pod with required affinity on the hostname (to be on the host of
// another pod) keeps the built-in judgement of the virtual node as one
// host: the child then places it beside that pod. Required affinity on
// another key whose domains lie inside the child (a zone) holds on a
// virtual node where a pod it names runs (inside.go).
package treeaffinity

import (
	"context"
	"fmt"
	"maps"
	"slices"

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

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "TreeAffinity"

// ErrReasonHosts is the reason a virtual node is refused when each of its
// hosts the pod may run on already holds a pod it may not share one with.
const ErrReasonHosts = "node(s) didn't match pod anti-affinity rules (every host below holds a pod the anti-affinity excludes)"

// ErrReasonDomains is ErrReasonHosts for a topology key other than the
// hostname whose domains lie inside the child (a zone of a child spanning
// several).
const ErrReasonDomains = "node(s) didn't match pod anti-affinity rules (every domain below holds a pod the anti-affinity excludes)"

type builtIn interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

// TreeAffinity implements fwk.PreFilterPlugin and fwk.FilterPlugin.
type TreeAffinity struct {
	inner      builtIn
	namespaces corelisters.NamespaceLister
	summaries  virtualnode.SummaryCache
	snapshot   func() fwk.SharedLister
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
	return &TreeAffinity{inner: inner.(builtIn), namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		snapshot: h.SnapshotSharedLister}, nil
}

// Name returns the plugin's name.
func (*TreeAffinity) Name() string { return Name }

// PreFilter is the built-in one's, but where the built-in one has nothing
// to judge (the pod has no terms, and no pod's anti-affinity matches it on
// a key some node has) while a pod on a virtual node excludes it from a
// domain inside that node: then Filter judges alone.
func (pl *TreeAffinity) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	res, s := pl.inner.PreFilter(ctx, state, pod, nodes)
	if s.IsSuccess() && !affineToHost(pod) {
		if is := pl.preFilterInside(ctx, state, pod, nodes); !is.IsSuccess() {
			return nil, is
		}
		return res, s
	}
	if s.Code() != fwk.Skip || !pl.excludedInside(pod, nodes) {
		return res, s
	}
	state.Write(innerSkippedKey, innerSkipped{})
	return nil, nil
}

// innerSkippedKey marks a cycle whose built-in PreFilter skipped.
const innerSkippedKey fwk.StateKey = "TreeAffinity/innerSkipped"

type innerSkipped struct{}

func (innerSkipped) Clone() fwk.StateData { return innerSkipped{} }

func skippedInner(state fwk.CycleState) bool {
	_, err := state.Read(innerSkippedKey)
	return err == nil
}

// excludedInside reports whether a pod on a virtual node has required
// anti-affinity on a key whose domains lie inside that node that matches
// the pod.
func (pl *TreeAffinity) excludedInside(pod *corev1.Pod, nodes []fwk.NodeInfo) bool {
	podNSLabels := pl.namespaceLabels(pod.Namespace)
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil || !virtualnode.IsVirtual(n) {
			continue
		}
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			for _, t := range termsInside(pi.GetRequiredAntiAffinityTerms(), insideOf(n)) {
				if t.Matches(pod, podNSLabels) {
					return true
				}
			}
		}
	}
	return false
}

// PreFilterExtensions are the built-in one's (for preemption's what-ifs),
// which have nothing to update when it skipped.
func (pl *TreeAffinity) PreFilterExtensions() fwk.PreFilterExtensions {
	return extensions{pl.inner.PreFilterExtensions()}
}

type extensions struct{ inner fwk.PreFilterExtensions }

func (e extensions) AddPod(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, add fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	return e.update(ctx, state, pod, add, ni, e.inner.AddPod)
}

func (e extensions) RemovePod(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, remove fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	return e.update(ctx, state, pod, remove, ni, e.inner.RemovePod)
}

// update applies one of the built-in extensions (AddPod or RemovePod) to
// each built-in state of the cycle: the run without the terms set aside
// (inside.go), and the main one unless it skipped.
func (e extensions) update(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, pi fwk.PodInfo, ni fwk.NodeInfo,
	op func(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status) *fwk.Status {
	if a := readInsideAffinity(state); a != nil && !a.skipped {
		if s := op(ctx, a.state, a.pod, pi, ni); !s.IsSuccess() {
			return s
		}
	}
	if skippedInner(state) {
		return nil
	}
	return op(ctx, state, pod, pi, ni)
}

// Filter judges a real node as the built-in filter does, and a virtual node
// as the hosts and other domains it stands for.
func (pl *TreeAffinity) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	n := ni.Node()
	skipped := skippedInner(state)
	if a := readInsideAffinity(state); a != nil && n != nil && !virtualnode.IsVirtual(n) {
		return pl.filterInside(ctx, a, ni, n)
	}
	if n == nil || !virtualnode.IsVirtual(n) || affineToHost(pod) {
		if skipped {
			return nil
		}
		return pl.inner.Filter(ctx, state, pod, ni)
	}
	// Every term but those on the hostname, by the built-in filter: it
	// reads the node's labels alone, and this node then has no hostname.
	hostless := n.DeepCopy()
	delete(hostless.Labels, corev1.LabelHostname)
	if a := readInsideAffinity(state); a != nil {
		if s := pl.filterInside(ctx, a, ni, hostless); !s.IsSuccess() {
			return s
		}
	} else if !skipped {
		if s := pl.inner.Filter(ctx, state, pod, &withNode{NodeInfo: ni, node: hostless}); !s.IsSuccess() {
			return s
		}
	}
	excluded, err := pl.excludedHere(pod, n, ni)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(excluded) == 0 {
		return nil
	}
	sum, _, ok := pl.summaries.Get(n)
	if !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: no summary reported yet", n.Name))
	}
	groups := virtualnode.MatchingGroups(pod, n, sum)
	for _, key := range slices.Sorted(maps.Keys(excluded)) {
		if d, bounded := domains(key, groups); bounded && excluded[key] >= d {
			if key == corev1.LabelHostname {
				return fwk.NewStatus(fwk.Unschedulable, ErrReasonHosts)
			}
			return fwk.NewStatus(fwk.Unschedulable, ErrReasonDomains)
		}
	}
	return nil
}

// domains counts the domains of key among the nodes of groups: for the
// hostname, the nodes; for another key, its values (a folded key's listed
// values, and at most one more per node whose value is not listed).
// Unbounded when some group's nodes lack the key: anti-affinity does not
// hold a pod off a node without its topology key.
func domains(key string, groups []*api.Group) (int, bool) {
	if key == corev1.LabelHostname {
		hosts := 0
		for _, g := range groups {
			hosts += g.Nodes
		}
		return hosts, true
	}
	values := map[string]bool{}
	others := 0
	for _, g := range groups {
		switch {
		case g.Labels[key] != "":
			values[g.Labels[key]] = true
		case len(g.Values[key]) > 0:
			for v, count := range g.Values[key] {
				if count > 0 {
					values[v] = true
				}
			}
			others += g.Others[key]
		default:
			return 0, false
		}
	}
	return len(values) + others, true
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

// excludedHere counts, per topology key whose domains lie inside the
// virtual node n (the hostname, and any key n has no label for), the pods
// on n that the pod may not share a domain of that key with: those its
// required anti-affinity matches, and those whose own matches it.
func (pl *TreeAffinity) excludedHere(pod *corev1.Pod, n *corev1.Node, ni fwk.NodeInfo) (map[string]int, error) {
	incoming, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, err
	}
	inside := insideOf(n)
	mine := termsInside(incoming.GetRequiredAntiAffinityTerms(), inside)
	podNSLabels := pl.namespaceLabels(pod.Namespace)
	counts := map[string]int{}
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if p.DeletionTimestamp != nil {
			continue
		}
		keys := map[string]bool{}
		for i := range mine {
			if mine[i].Matches(p, pl.namespaceLabels(p.Namespace)) {
				keys[mine[i].TopologyKey] = true
			}
		}
		theirs := termsInside(pi.GetRequiredAntiAffinityTerms(), inside)
		for i := range theirs {
			if theirs[i].Matches(pod, podNSLabels) {
				keys[theirs[i].TopologyKey] = true
			}
		}
		for k := range keys {
			counts[k]++
		}
	}
	return counts, nil
}

// insideOf tells the topology keys whose domains lie inside virtual node
// n: the hostname, and every key n has no label for.
func insideOf(n *corev1.Node) func(string) bool {
	return func(key string) bool {
		_, labelled := n.Labels[key]
		return key == corev1.LabelHostname || !labelled
	}
}

func termsInside(terms []fwk.AffinityTerm, inside func(string) bool) []fwk.AffinityTerm {
	var out []fwk.AffinityTerm
	for _, t := range terms {
		if inside(t.TopologyKey) {
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
