// Package vnode is the virtual node a child cluster runs in its parent: a
// virtual-kubelet NodeProvider whose Ping fails when the child's API server
// is not ready, and whose status is the summary of the child's subtree,
// pushed every report period and sooner, rate-limited, when it changes.
package vnode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/version"
	"github.com/nestlet/nestlet/provider/summary"
)

// Config of a Provider. Every field without a default is required.
type Config struct {
	// ClusterName is this cluster's name in the parent (the node name).
	ClusterName string
	// ClusterUID identifies this cluster (its kube-system UID).
	ClusterUID string
	// ChildPodCIDRs says whether a node of this cluster is a child's
	// virtual node and what this cluster grants it of the pod CIDRs it
	// claims (the parent's side, provider/parent): only that goes up in
	// the summary (summary.Input.ChildPodCIDRs). Nil: the claims as they
	// are.
	ChildPodCIDRs func(n *corev1.Node) ([]string, bool)
	// GatewayKey returns the public key of this cluster's gateway,
	// published on the node (api.AnnotationGatewayKey); nil or empty
	// without a gateway. PostStatus publishes a new one.
	GatewayKey func() string
	// GatewaySubtree and GatewayPaths return what the node publishes of
	// the direct paths of this cluster's gateway: its subtree's gateways
	// (api.AnnotationGatewaySubtree) and its own direct paths
	// (api.AnnotationGatewayPaths); nil or empty: nothing.
	GatewaySubtree, GatewayPaths func() string
	// ParentName is the parent's cluster name, for split horizon; may be
	// empty.
	ParentName string
	// GroupKeys group nodes in the summary (default api.DefaultGroupKeys).
	GroupKeys []string
	// SharePercent returns the share of the free capacity offered to the
	// parent (1..100), read at every report (optional: all of it).
	SharePercent func() int
	// Parents returns how many parents this cluster has (its Targets),
	// read at every report (optional: one).
	Parents func() int
	// Labels and Taints come from the Target, and so do Limits, the cap on
	// what the parent's pods may request here (summary.Input.Limits).
	Labels map[string]string
	Taints []corev1.Taint
	Limits corev1.ResourceList
	// ReportFrequency is the period of reports; MinReportInterval bounds
	// early reports on change (default 1s).
	ReportFrequency   time.Duration
	MinReportInterval time.Duration

	Nodes corelisters.NodeLister
	Pods  corelisters.PodLister
	// Changed receives a value when a node or pod of this cluster changes.
	Changed <-chan struct{}
	// Ready checks this cluster's API server.
	Ready func(context.Context) error
	// KubeletEndpoint returns the host and port the virtual node
	// advertises for its kubelet API (none when the host is empty).
	// Optional.
	KubeletEndpoint func() (host string, port int32)
	// Reserves says the agent answers reservations on the kubelet API
	// (api.AnnotationReserves).
	Reserves bool
	// Reported is called after each report is handed to the node
	// controller (optional).
	Reported func(time.Time)
	// Reconnected is called when writing the summary works again (or is
	// answered, even with an error) after getting no answer at all for at
	// least OutageThreshold (optional): the parent was out of reach long
	// enough for client-go's informers to back off (up to 30 s between
	// attempts), and the caller may rather start afresh.
	Reconnected func(outage time.Duration)
	// PatchSummary (optional) writes the summary annotation on the virtual
	// node itself, as a merge patch of that one annotation. The summary is
	// then kept out of what virtual-kubelet applies: virtual-kubelet copies
	// every annotation it applies into its last-applied annotation, which
	// would store the largest part of the node twice (and halve how many
	// children fit in the parent's 256 KiB annotation limit). A report
	// whose summary differs only in its time is then this one patch; the
	// node controller gets labels, annotations and status only when they
	// change (and refreshes the heartbeat itself every minute). When nil,
	// the summary goes through the node controller with the rest.
	PatchSummary func(ctx context.Context, summary string) error

	Clock clock.WithTicker
}

// OutageThreshold is how long writing to the parent must have failed for
// Config.Reconnected to be called once it works again.
const OutageThreshold = 5 * time.Second

// Provider implements virtual-kubelet's node.NodeProvider.
type Provider struct {
	cfg Config

	mu    sync.Mutex
	last  summary.Result
	avoid map[types.UID]time.Time
	kick  chan struct{}
	// pingFailed is set while this cluster's API server is not ready.
	pingFailed atomic.Bool
}

// New validates cfg and fills its defaults.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.ClusterName == "":
		return nil, fmt.Errorf("vnode: ClusterName is required")
	case cfg.Nodes == nil || cfg.Pods == nil:
		return nil, fmt.Errorf("vnode: Nodes and Pods listers are required")
	case cfg.Ready == nil:
		return nil, fmt.Errorf("vnode: Ready is required")
	case cfg.ReportFrequency <= 0:
		return nil, fmt.Errorf("vnode: ReportFrequency must be positive")
	}
	if cfg.MinReportInterval == 0 {
		cfg.MinReportInterval = time.Second
	}
	if cfg.GroupKeys == nil {
		cfg.GroupKeys = api.DefaultGroupKeys
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Provider{cfg: cfg, avoid: map[types.UID]time.Time{}, kick: make(chan struct{}, 1)}, nil
}

// Avoid asks the parent's scheduler not to send pods of owner here until a
// time (published in the api.AnnotationAvoid annotation at once).
func (p *Provider) Avoid(owner types.UID, until time.Time) {
	p.mu.Lock()
	p.avoid[owner] = until
	p.mu.Unlock()
	p.kickReport()
}

// PostStatus has the node's status posted at once (the node controller
// posts it only if this cluster is ready).
func (p *Provider) PostStatus() { p.kickReport() }

// kickReport has the report loop send the node to the node controller,
// which posts its status, at once.
func (p *Provider) kickReport() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// avoidAnnotation returns the current, unexpired avoid list as JSON, or ""
// when empty.
func (p *Provider) avoidAnnotation() string {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[types.UID]string{}
	for owner, until := range p.avoid {
		if !until.After(now) {
			delete(p.avoid, owner)
			continue
		}
		out[owner] = until.UTC().Format(time.RFC3339)
	}
	if len(out) == 0 {
		return ""
	}
	data, _ := json.Marshal(out)
	return string(data)
}

// PingRecoveredDelay is how long after the first good ping following a
// failed one the node's status is posted again: time for virtual-kubelet
// to record the good result, which it checks before posting.
const PingRecoveredDelay = time.Second

// Ping fails when this cluster's API server is not ready, so that the
// parent sees the node go NotReady (virtual-kubelet stops renewing the
// lease). The first good ping after a failed one has the node's status
// posted again shortly after: the parent may have marked the node not
// ready meanwhile, and virtual-kubelet's node controller posts it on its
// own only once a minute.
func (p *Provider) Ping(ctx context.Context) error {
	if err := p.cfg.Ready(ctx); err != nil {
		p.pingFailed.Store(true)
		return err
	}
	if p.pingFailed.Swap(false) {
		go func() {
			<-p.cfg.Clock.After(PingRecoveredDelay)
			p.kickReport()
		}()
	}
	return nil
}

// Compute summarises this cluster now.
func (p *Provider) Compute() (summary.Result, error) {
	nodes, err := p.cfg.Nodes.List(labels.Everything())
	if err != nil {
		return summary.Result{}, err
	}
	pods, err := p.cfg.Pods.List(labels.Everything())
	if err != nil {
		return summary.Result{}, err
	}
	share, parents := 100, 1
	if p.cfg.SharePercent != nil {
		share = p.cfg.SharePercent()
	}
	if p.cfg.Parents != nil {
		parents = p.cfg.Parents()
	}
	return summary.Compute(summary.Input{
		Cluster: p.cfg.ClusterName, Parent: p.cfg.ParentName, GroupKeys: p.cfg.GroupKeys,
		Nodes: nodes, Pods: pods, Now: p.cfg.Clock.Now(), SharePercent: share, Parents: parents,
		ChildPodCIDRs: p.cfg.ChildPodCIDRs, Limits: p.cfg.Limits,
	}), nil
}

// PodCIDRs returns the pod CIDRs this cluster's summary covers, now
// (summary.PodCIDRs: nodes only, no pods).
func (p *Provider) PodCIDRs() ([]string, error) {
	nodes, err := p.cfg.Nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return summary.PodCIDRs(summary.Input{Cluster: p.cfg.ClusterName, Parent: p.cfg.ParentName, Nodes: nodes, ChildPodCIDRs: p.cfg.ChildPodCIDRs}), nil
}

// Node returns the node object for a summary.
func (p *Provider) Node(r summary.Result) (*corev1.Node, error) {
	sum, err := api.FormatSummary(r.Summary)
	if err != nil {
		return nil, err
	}
	nodeLabels := map[string]string{}
	maps.Copy(nodeLabels, r.Labels)
	maps.Copy(nodeLabels, p.cfg.Labels)
	maps.Copy(nodeLabels, map[string]string{
		api.LabelNodeType:      api.NodeTypeVirtualKubelet,
		api.LabelCluster:       p.cfg.ClusterName,
		corev1.LabelHostname:   p.cfg.ClusterName,
		corev1.LabelOSStable:   valueOr(r.Labels[corev1.LabelOSStable], "linux"),
		corev1.LabelArchStable: valueOr(r.Labels[corev1.LabelArchStable], "amd64"),
	})
	// The beta os and arch labels, equal to the stable ones, as a kubelet
	// sets them: the node lifecycle controller otherwise reads and patches
	// every new node that lacks them (nodes of simulated or mixed subtrees).
	nodeLabels[kubeletapis.LabelOS] = nodeLabels[corev1.LabelOSStable]
	nodeLabels[kubeletapis.LabelArch] = nodeLabels[corev1.LabelArchStable]
	desired, err := json.Marshal(p.cfg.Taints)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{
		api.AnnotationSummary:       sum,
		api.AnnotationClusterUID:    p.cfg.ClusterUID,
		api.AnnotationDesiredTaints: string(desired),
		// Which build this is and which protocols it reads: the parent
		// taints the node when they do not meet its own (version skew).
		api.AnnotationAgentVersion: version.String(),
		api.AnnotationProtocols:    api.OwnProtocols().String(),
	}
	if p.cfg.GatewayKey != nil {
		if key := p.cfg.GatewayKey(); key != "" {
			annotations[api.AnnotationGatewayKey] = key
		}
	}
	for key, f := range map[string]func() string{api.AnnotationGatewaySubtree: p.cfg.GatewaySubtree, api.AnnotationGatewayPaths: p.cfg.GatewayPaths} {
		if f != nil {
			if v := f(); v != "" {
				annotations[key] = v
			}
		}
	}
	if avoid := p.avoidAnnotation(); avoid != "" {
		annotations[api.AnnotationAvoid] = avoid
	}
	if p.cfg.Reserves {
		annotations[api.AnnotationReserves] = "true"
		annotations[api.AnnotationReserveEncodings] = api.EncodingProtobuf
	}
	now := metav1.NewTime(p.cfg.Clock.Now())
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.cfg.ClusterName,
			Labels:      nodeLabels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: append([]corev1.Taint{api.ProviderTaint()}, p.cfg.Taints...)},
		Status: corev1.NodeStatus{
			Capacity:    r.Allocatable.DeepCopy(),
			Allocatable: r.Allocatable.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				readyCondition(r, cond),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "ChildCluster", "summarised by the child cluster"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "ChildCluster", "summarised by the child cluster"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "ChildCluster", "summarised by the child cluster"),
			},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: nodeLabels[corev1.LabelOSStable],
				Architecture:    nodeLabels[corev1.LabelArchStable],
				KubeletVersion:  "v1.35.4",
			},
		},
	}
	if p.cfg.KubeletEndpoint != nil {
		if host, port := p.cfg.KubeletEndpoint(); host != "" {
			typ := corev1.NodeInternalIP
			if net.ParseIP(host) == nil {
				typ = corev1.NodeInternalDNS
			}
			n.Status.Addresses = []corev1.NodeAddress{{Type: typ, Address: host}}
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		}
	}
	return n, nil
}

// readyCondition is True while the child cluster can run pods: its API
// server answers (else Ping fails and the lease lapses) and, when it has
// nodes, one of them is Ready. A cluster whose every node is down (its
// only child cut off, say) runs nothing, and its own controller manager
// evicts nothing then: it takes every node down for its own network
// failing. Saying NotReady here lets the parent evict and replace the
// pods one level up, as from any lost node.
func readyCondition(r summary.Result, cond func(corev1.NodeConditionType, corev1.ConditionStatus, string, string) corev1.NodeCondition) corev1.NodeCondition {
	if !summary.CanRun(r) {
		return cond(corev1.NodeReady, corev1.ConditionFalse, ReasonNoReadyNode,
			fmt.Sprintf("none of the child cluster's %d nodes is Ready, so it cannot run pods; check its nodes (kubectl get nodes in the child)", r.Nodes))
	}
	return cond(corev1.NodeReady, corev1.ConditionTrue, "ChildClusterReady", "the child cluster's API server is ready")
}

// ReasonNoReadyNode is the reason of a virtual node's Ready condition when
// the child has nodes and none of them is Ready.
const ReasonNoReadyNode = "NoReadyNodeInChildCluster"

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// virtual-kubelet's node controller patches the node with a three-way
// merge against what it last applied, recorded in these annotations. It
// writes them only when it patches, not when it creates the node, so a
// label present at registration could never be removed (a child whose
// region becomes mixed would keep claiming one region). The node is
// registered with them already set.
const (
	vkLastAppliedObjectMeta = "virtual-kubelet.io/last-applied-object-meta"
	vkLastAppliedNodeStatus = "virtual-kubelet.io/last-applied-node-status"
)

// InitialNode returns the node to register, from a first summary.
func (p *Provider) InitialNode() (*corev1.Node, error) {
	r, err := p.Compute()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.last = r
	p.mu.Unlock()
	n, err := p.Node(r)
	if err != nil {
		return nil, err
	}
	return p.withLastApplied(n)
}

// ControllerNode returns what the node controller is to apply of n: n
// without the summary when PatchSummary writes it.
func (p *Provider) ControllerNode(n *corev1.Node) *corev1.Node {
	out := n.DeepCopy()
	if p.cfg.PatchSummary != nil {
		delete(out.Annotations, api.AnnotationSummary)
	}
	return out
}

// withLastApplied records what the node controller applies of n (its
// labels, annotations and status) as the node controller would after
// applying them.
func (p *Provider) withLastApplied(n *corev1.Node) (*corev1.Node, error) {
	applied := p.ControllerNode(n)
	meta, err := json.Marshal(metav1.ObjectMeta{Name: n.Name, Labels: applied.Labels, Annotations: applied.Annotations})
	if err != nil {
		return nil, err
	}
	status, err := json.Marshal(n.Status)
	if err != nil {
		return nil, err
	}
	n.Annotations[vkLastAppliedObjectMeta] = string(meta)
	n.Annotations[vkLastAppliedNodeStatus] = string(status)
	return n, nil
}

// AdoptPatch returns the merge patch that readies an existing virtual node
// (registered by an earlier run, maybe of an earlier version) for a
// restart: the summary of initial, and, when PatchSummary writes the
// summary, virtual-kubelet's last-applied metadata without it, so that the
// node controller's next patch does not delete it.
func (p *Provider) AdoptPatch(existing, initial *corev1.Node) ([]byte, error) {
	annotations := map[string]string{api.AnnotationSummary: initial.Annotations[api.AnnotationSummary]}
	if raw, ok := existing.Annotations[vkLastAppliedObjectMeta]; ok && p.cfg.PatchSummary != nil {
		var meta metav1.ObjectMeta
		if err := json.Unmarshal([]byte(raw), &meta); err == nil {
			if _, has := meta.Annotations[api.AnnotationSummary]; has {
				delete(meta.Annotations, api.AnnotationSummary)
				b, err := json.Marshal(meta)
				if err != nil {
					return nil, err
				}
				annotations[vkLastAppliedObjectMeta] = string(b)
			}
		}
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
}
