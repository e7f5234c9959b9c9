// Package treespread is the TreeSpread scheduler plugin: a pod's required
// topology spread constraints judged over the whole tree. In place of the
// built-in PodTopologySpread filter, it counts the domains that live inside
// children (a child spanning two zones holds two zone domains, read from its
// summary's groups) and the matching pods in each, and a virtual node fits
// the pod when one of its domains does. When the pod is bound to a virtual
// node, the domains chosen are written on it (api.AnnotationDomains, in the
// Binding itself: no extra write); the agent then sends the delegate there
// with a nodeSelector and without those constraints, which no level below
// could judge, seeing only its own part. Pods bound to a virtual node are
// counted in the domain written on them.
//
// Real nodes are judged as the built-in filter judges them (maxSkew,
// minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys); the
// built-in plugin still scores, with the system's default constraints.
package treespread

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "TreeSpread"

// Messages, as the built-in plugin words them.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// TreeSpread implements the PreFilter, Filter, Reserve and Bind extension
// points.
type TreeSpread struct {
	handle    fwk.Handle
	summaries virtualnode.SummaryCache

	// chosen holds the domains reserved for pods being bound to virtual
	// nodes, until their binding (with the annotation) is seen: pods
	// scheduled meanwhile count them there.
	mu     sync.Mutex
	chosen map[types.UID]reservation
}

type reservation struct {
	domains map[string]string
	at      time.Time
}

// reservationTTL bounds how long a reservation is kept once made: its pod
// is bound, or forgotten, well before.
const reservationTTL = 10 * time.Minute

var (
	_ fwk.PreFilterPlugin = &TreeSpread{}
	_ fwk.FilterPlugin    = &TreeSpread{}
	_ fwk.ReservePlugin   = &TreeSpread{}
	_ fwk.BindPlugin      = &TreeSpread{}
)

// New returns the plugin; it takes no arguments.
func New(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return &TreeSpread{handle: h, chosen: map[types.UID]reservation{}}, nil
}

// Name returns the plugin's name.
func (*TreeSpread) Name() string { return Name }

// constraint is one topology spread constraint of the pod.
type constraint struct {
	key           string
	maxSkew       int
	minDomains    int
	hard          bool // DoNotSchedule
	selector      labels.Selector
	honorAffinity bool
	honorTaints   bool
	selfMatch     int // 1 when the pod matches its own selector
}

// constraintsOf returns the pod's topology spread constraints, each with its
// selector and matchLabelKeys merged.
func constraintsOf(pod *corev1.Pod) ([]constraint, error) {
	var out []constraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("topology spread constraint on %s: %w", c.TopologyKey, err)
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				r, err := labels.NewRequirement(k, selection.Equals, []string{v})
				if err != nil {
					return nil, fmt.Errorf("topology spread constraint on %s, matchLabelKeys: %w", c.TopologyKey, err)
				}
				sel = sel.Add(*r)
			}
		}
		k := constraint{
			key: c.TopologyKey, maxSkew: int(c.MaxSkew), minDomains: 1, selector: sel,
			hard:          c.WhenUnsatisfiable == corev1.DoNotSchedule,
			honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
			honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		}
		if c.MinDomains != nil {
			k.minDomains = int(*c.MinDomains)
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			k.selfMatch = 1
		}
		out = append(out, k)
	}
	return out, nil
}

const stateKey fwk.StateKey = Name + "/spread"

// spreadState is what PreFilter works out once per cycle; read-only after.
type spreadState struct {
	constraints []constraint
	// counts holds, per constraint, the matching pods in each domain the
	// constraint counts (every one of them, with 0 for none).
	counts []map[string]int
	mins   []int
	// hosts holds, per constraint on the hostname, the hostname domains
	// each virtual node stands for (hosts.go).
	hosts    []map[string][]string
	affinity nodeaffinity.RequiredNodeAffinity
	// tolerant is the pod tolerating every taint, to match a group's
	// labels alone.
	tolerant *corev1.Pod
}

// Clone copies the counts, which preemption's what-ifs change (AddPod,
// RemovePod) on its copy.
func (s *spreadState) Clone() fwk.StateData {
	c := *s
	c.counts = make([]map[string]int, len(s.counts))
	for i, m := range s.counts {
		c.counts[i] = maps.Clone(m)
	}
	c.mins = slices.Clone(s.mins)
	return &c
}

// PreFilter counts, for each constraint, the matching pods of the pod's
// namespace in every domain of the tree this level sees.
func (pl *TreeSpread) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	cs, err := constraintsOf(pod)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(cs) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &spreadState{constraints: cs, affinity: nodeaffinity.GetRequiredNodeAffinity(pod), tolerant: pod.DeepCopy()}
	s.tolerant.Spec.Tolerations = append(s.tolerant.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	s.counts = make([]map[string]int, len(cs))
	s.hosts = make([]map[string][]string, len(cs))
	for i := range cs {
		s.counts[i] = map[string]int{}
		s.hosts[i] = map[string][]string{}
	}
	for _, ni := range nodes {
		pl.count(s, pod, ni)
	}
	s.mins = make([]int, len(cs))
	hard := false
	for i, c := range cs {
		s.mins[i] = minCount(s.counts[i], c.minDomains)
		hard = hard || c.hard
	}
	state.Write(stateKey, s)
	if !hard {
		// Only ScheduleAnyway: nothing to filter (the built-in plugin
		// scores); Reserve still chooses the domains inside a child.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions lets preemption ask what removing its victims (and
// adding the nominated pods) changes: the counts are updated as PreFilter
// would have counted those pods.
func (pl *TreeSpread) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod counts p on node ni in the cycle's state, as PreFilter would.
func (pl *TreeSpread) AddPod(_ context.Context, state fwk.CycleState, pod *corev1.Pod, p fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	return pl.update(state, pod, p.GetPod(), ni, 1)
}

// RemovePod takes p on node ni out of the cycle's counts.
func (pl *TreeSpread) RemovePod(_ context.Context, state fwk.CycleState, pod *corev1.Pod, p fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	return pl.update(state, pod, p.GetPod(), ni, -1)
}

func (pl *TreeSpread) update(state fwk.CycleState, pod, p *corev1.Pod, ni fwk.NodeInfo, delta int) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return nil // PreFilter skipped: nothing is counted
	}
	n := ni.Node()
	if n == nil {
		return nil
	}
	changed := pl.add(s, pod, p, n, pl.countedDomains(s, pod, n), delta)
	if changed {
		for i, c := range s.constraints {
			s.mins[i] = minCount(s.counts[i], c.minDomains)
		}
	}
	return nil
}

// count adds node ni's domains and its matching pods to s.
func (pl *TreeSpread) count(s *spreadState, pod *corev1.Pod, ni fwk.NodeInfo) {
	n := ni.Node()
	if n == nil {
		return
	}
	eligible := pl.countedDomains(s, pod, n)
	for i := range s.constraints {
		for v := range eligible[i] {
			s.counts[i][v] += 0
		}
	}
	for i := range s.constraints {
		if perNode(s.constraints[i].key) && virtualnode.IsVirtual(n) {
			s.hosts[i][n.Name] = slices.Sorted(maps.Keys(eligible[i]))
		}
	}
	for _, pi := range ni.GetPods() {
		pl.add(s, pod, pi.GetPod(), n, eligible, 1)
	}
}

// add counts p, on node n whose domains eligible the constraints count,
// delta times in the domains it is in; it reports whether a count changed.
func (pl *TreeSpread) add(s *spreadState, pod, p *corev1.Pod, n *corev1.Node, eligible []map[string]bool, delta int) bool {
	if p.Namespace != pod.Namespace || p.DeletionTimestamp != nil {
		return false
	}
	var chosen map[string]string
	changed := false
	for i, c := range s.constraints {
		if !c.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		if perNode(c.key) && virtualnode.IsVirtual(n) {
			if v := s.hostFor(i, n.Name, delta); v != "" {
				s.counts[i][v] += delta
				changed = true
			}
			continue
		}
		if chosen == nil {
			chosen = pl.domainsOf(p)
		}
		v, ok := chosen[c.key]
		if !ok {
			v = n.Labels[c.key]
		}
		if v != "" && eligible[i][v] {
			s.counts[i][v] += delta
			changed = true
		}
	}
	return changed
}

// minCount is the least count among the domains, or 0 when there are
// fewer domains than minDomains.
func minCount(counts map[string]int, minDomains int) int {
	if len(counts) < minDomains {
		return 0
	}
	first, lowest := true, 0
	for _, n := range counts {
		if first || n < lowest {
			first, lowest = false, n
		}
	}
	return lowest
}

// Filter admits a node when one of its domains keeps every required
// constraint within its maxSkew.
func (pl *TreeSpread) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	n := ni.Node()
	if n == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	labelled := false
	for _, c := range pl.placements(s, pod, n) {
		if !s.labelled(c.values) {
			continue
		}
		labelled = true
		if s.fits(c.values) {
			return nil
		}
	}
	if !labelled {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
	}
	return fwk.NewStatus(fwk.Unschedulable, ErrReasonConstraintsNotMatch)
}

// labelled reports whether values has a domain for every required
// constraint.
func (s *spreadState) labelled(values []string) bool {
	for i, c := range s.constraints {
		if c.hard && values[i] == "" {
			return false
		}
	}
	return true
}

func readState(state fwk.CycleState) (*spreadState, error) {
	v, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from the cycle state: %w", stateKey, err)
	}
	s, ok := v.(*spreadState)
	if !ok {
		return nil, fmt.Errorf("%+v is not a %s state", v, Name)
	}
	return s, nil
}

// fits reports whether a pod placed in the domains values (one per
// constraint) keeps every required constraint within its maxSkew.
func (s *spreadState) fits(values []string) bool {
	for i, c := range s.constraints {
		if !c.hard {
			continue
		}
		if values[i] == "" {
			return false
		}
		if s.counts[i][values[i]]+c.selfMatch-s.mins[i] > c.maxSkew {
			return false
		}
	}
	return true
}

// load is how many matching pods the domains values hold, required
// constraints first: the lower, the better a place.
func (s *spreadState) load(values []string) (hard, soft int) {
	for i, c := range s.constraints {
		n := s.counts[i][values[i]]
		if c.hard {
			hard += n
		} else {
			soft += n
		}
	}
	return hard, soft
}
