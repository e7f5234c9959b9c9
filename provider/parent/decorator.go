package parent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/queue"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/provider/peers"
	"github.com/nestlet/nestlet/provider/summary"
)

// decorator is the parent's side: it gives the virtual nodes of this
// cluster's children what a node may not set on itself, the role label
// (so ROLES shows cluster) and changes of taints after registration, and
// what a child cannot see, whether its pod CIDRs overlap another node's or
// child's (api.AnnotationPodCIDROverlap).
type decorator struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	queue  *queue.Worker[string]
	cidrs  cidrCache
	clock  clock.PassiveClock
	held   sync.Map // node name -> time.Time it was first held back (holdForNLC)
	skewed sync.Map // node name -> true while its child's protocols do not meet ours
	// peers, when this cluster runs a gateway, gets each child's key
	// and pod CIDRs, and gives each child the parent's gateway.
	peers *peers.Peers
	// revoked are the children cut off: their virtual nodes are deleted.
	revoked *revoked.Watcher
	// quotas records and checks the children's capacity quotas.
	quotas *childQuotas
	// kids are the children this cluster knows (a node of a known name
	// is decorated whatever it says of itself).
	kids *children
	// grants decides what each child is granted of the pod CIDRs it
	// claims; recorder says what is refused, once per change
	// (refusedWarned: node name -> what was said).
	grants        *grants
	recorder      record.EventRecorder
	refusedWarned sync.Map
	// malformedWarned: node name -> what was said of an annotation of
	// its child's that does not parse.
	malformedWarned sync.Map
	// taintsWarned: node name -> the desired taint keys last refused.
	taintsWarned sync.Map
	// providerTaint is the taint every child's node carries here, with
	// the effect the operator chose (Config.ChildTaintEffect).
	providerTaint corev1.Taint
}

// childTaint is the provider taint the children's nodes carry here.
func (d *decorator) childTaint() corev1.Taint {
	if d.providerTaint.Key == "" {
		return api.ProviderTaint()
	}
	return d.providerTaint
}

// warnMalformed records a Warning event on n that what its child wrote
// does not parse, once per message.
func (d *decorator) warnMalformed(n *corev1.Node, why string) {
	if prev, ok := d.malformedWarned.Load(n.Name); ok && prev.(string) == why {
		return
	}
	d.malformedWarned.Store(n.Name, why)
	if d.recorder != nil {
		d.recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, corev1.EventTypeWarning, "NestletAnnotationInvalid", why)
	}
}

// warnTaints records a Warning event on n when the desired taints refused
// (keys, joined) change to some.
func (d *decorator) warnTaints(n *corev1.Node, keys string) {
	if prev, ok := d.taintsWarned.Load(n.Name); ok && prev.(string) == keys {
		return
	}
	d.taintsWarned.Store(n.Name, keys)
	if keys != "" && d.recorder != nil {
		d.recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, corev1.EventTypeWarning, "NestletTaintsRefused",
			"the child's desired taints "+keys+" are not applied: the node has a taint of each key that is not the child's "+
				"(an admin's, or Kubernetes' own); remove that taint to let the child set it")
	}
}

// warnRefused records a Warning event on n when what is refused of its
// pod CIDRs changes to something (not api.PodCIDROverlapNone).
func (d *decorator) warnRefused(n *corev1.Node, refused string) {
	if prev, ok := d.refusedWarned.Load(n.Name); ok && prev.(string) == refused {
		return
	}
	d.refusedWarned.Store(n.Name, refused)
	if refused != api.PodCIDROverlapNone && d.recorder != nil {
		d.recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, corev1.EventTypeWarning, "PodCIDRsRefused",
			"pod CIDRs the child claims are "+refused+"; they are routed nowhere, carried up nowhere and told to no other child")
	}
}

// enqueueAll queues every virtual node.
func (d *decorator) enqueueAll() {
	all, err := d.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range all {
		if isChild(n, d.kids) {
			d.queue.Add(n.Name)
		}
	}
}

func newDecorator(client kubernetes.Interface, nodes coreinformers.NodeInformer, clk clock.PassiveClock, p *peers.Peers, kids *children, effect corev1.TaintEffect) (*decorator, error) {
	d := &decorator{
		client:        client,
		nodes:         nodes.Lister(),
		clock:         clk,
		peers:         p,
		kids:          kids,
		providerTaint: api.ProviderTaint(),
	}
	d.providerTaint.Effect = effect
	d.queue = queue.New(queue.Config[string]{Name: "virtual-nodes", Reconcile: d.sync, Failure: "Decorating virtual node", KeyName: "node"})
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && isChild(n, d.kids) {
			d.queue.Add(n.Name)
		}
	}
	if p != nil {
		// What this cluster carries changed: every child is told.
		p.OnCarriedChange(d.enqueueAll)
	}
	// A node whose pod CIDRs come, change or go may change the overlap of
	// the children whose pod CIDRs overlap them, and only theirs.
	overlapping := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if n, ok := obj.(*corev1.Node); ok {
			own, _ := d.cidrs.of(n)
			if deleted {
				d.cidrs.m.Delete(n.Name)
			}
			d.enqueueOverlapping(n.Name, own)
		}
	}
	_, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueue(obj); overlapping(obj, false) },
		UpdateFunc: func(old, obj any) {
			enqueue(obj)
			a, _ := d.cidrs.of(old.(*corev1.Node))
			b, _ := d.cidrs.of(obj.(*corev1.Node))
			if !slices.Equal(a, b) {
				d.enqueueOverlapping(obj.(*corev1.Node).Name, append(slices.Clone(a), b...))
			}
		},
		DeleteFunc: func(obj any) { overlapping(obj, true) },
	})
	return d, err
}

// enqueueOverlapping queues every virtual node of this cluster but name
// whose pod CIDRs overlap cidrs: a join costs the decorator one look at
// each node, not a new description of every child (which compares it with
// every node again).
func (d *decorator) enqueueOverlapping(name string, cidrs []string) {
	if len(cidrs) == 0 {
		return
	}
	nodes, _ := d.nodes.List(labels.Everything())
	for _, n := range nodes {
		if n.Name == name || !isChild(n, d.kids) {
			continue
		}
		if theirs, _ := d.cidrs.of(n); len(summary.Overlaps(cidrs, theirs)) > 0 {
			d.queue.Add(n.Name)
		}
	}
}

// nlcGrace bounds how long a new virtual node waits for the node lifecycle
// controller (holdForNLC) before it is decorated anyway: a parent whose
// controller manager is down gets its role labels 5 s late.
const nlcGrace = 5 * time.Second

// holdForNLC returns how long to leave a new virtual node alone. Admission
// gives every new node the not-ready taint, and once the node is Ready the
// node lifecycle controller removes it with a read and a patch that
// carries the version it read: a write of ours in between makes that
// patch conflict, and the controller reads and patches again. So a new,
// Ready node that still has the taint waits for the controller's patch,
// whose update event brings it back here, for nlcGrace at most.
func (d *decorator) holdForNLC(n *corev1.Node) time.Duration {
	_, decorated := n.Labels[api.LabelNodeRoleCluster]
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
	})
	if decorated || !tainted || !summary.NodeReady(n) {
		d.held.Delete(n.Name)
		return 0
	}
	now := d.clock.Now()
	first, _ := d.held.LoadOrStore(n.Name, now)
	if left := nlcGrace - now.Sub(first.(time.Time)); left > 0 {
		return left
	}
	d.held.Delete(n.Name)
	return 0
}

// sync decorates node name, or returns how long to wait before it does.
func (d *decorator) sync(ctx context.Context, name string) (time.Duration, error) {
	n, err := d.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		d.held.Delete(name)
		d.refusedWarned.Delete(name)
		d.malformedWarned.Delete(name)
		d.taintsWarned.Delete(name)
		if d.peers != nil {
			d.peers.SetChild(ctx, name, "", nil)
		}
		d.grants.forget(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if d.revoked.Has(name) {
		return 0, deleteRevoked(ctx, d.client, n)
	}
	if api.Leaving(n) {
		return 0, deleteChildNode(ctx, d.client, n, "Deleted the virtual node of a child that left")
	}
	if wait := d.holdForNLC(n); wait > 0 {
		return wait, nil
	}
	d.quotas.check(n)
	want := n.DeepCopy()
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[api.LabelNodeRoleCluster] = ""
	// A node names itself: a child may not take another node's name
	// (pods pinned to that node would come here).
	want.Labels[corev1.LabelHostname] = name
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	// Until the children's shares are read, everything but the
	// addresses is decorated, and the node looked at again soon.
	var retry time.Duration
	patchAnnotations, err := d.addresses(ctx, n, want.Annotations)
	if errors.Is(err, errNotLoaded) {
		patchAnnotations, retry = map[string]string{}, time.Second
	} else if err != nil {
		return 0, err
	}
	// The provider taint always (a node that registered again without it
	// gets it back), the child's desired taints, and every other taint
	// (an admin's) as it is.
	// Which taints are ours to remove: those applied before (none
	// known on a node decorated before this was recorded).
	var applied []string
	raw, recorded := n.Annotations[api.AnnotationAppliedTaints]
	if recorded {
		_ = json.Unmarshal([]byte(raw), &applied)
	}
	var desired []corev1.Taint
	if raw, ok := api.ChildAnnotation(n, api.AnnotationDesiredTaints); ok {
		if err := json.Unmarshal([]byte(raw), &desired); err != nil {
			// Fails closed: the taints applied before stay as they are,
			// and the provider taint and the rest are restored below.
			desired = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return !slices.Contains(applied, t.Key) })
			d.warnMalformed(n, fmt.Sprintf("%s does not parse (%v): the taints applied before are kept", api.AnnotationDesiredTaints, err))
		}
	}
	// A key someone else set (an admin, the node lifecycle controller) is
	// theirs: the child's taint of that key is not applied.
	desired, refused := othersKeys(n.Spec.Taints, desired, applied, recorded)
	d.warnTaints(n, strings.Join(refused, ", "))
	desired = d.versions(ctx, n, desired, want.Annotations, patchAnnotations)
	want.Spec.Taints = mergeTaints(d.childTaint(), n.Spec.Taints, desired, applied)
	keys := []string{}
	for _, t := range desired {
		keys = append(keys, t.Key)
	}
	slices.Sort(keys)
	appliedNow, err := json.Marshal(slices.Compact(keys))
	if err != nil {
		return 0, err
	}
	want.Annotations[api.AnnotationAppliedTaints] = string(appliedNow)
	patchAnnotations[api.AnnotationAppliedTaints] = string(appliedNow)
	return retry, d.write(ctx, n, want, patchAnnotations)
}

// write makes node n what want is, when it differs: a merge patch of the
// labels and of the annotations in patchAnnotations when the taints are
// the same, else an update of the whole node.
func (d *decorator) write(ctx context.Context, n, want *corev1.Node, patchAnnotations map[string]string) error {
	if reflect.DeepEqual(want.Labels, n.Labels) && reflect.DeepEqual(want.Spec.Taints, n.Spec.Taints) && reflect.DeepEqual(want.Annotations, n.Annotations) {
		return nil
	}
	if reflect.DeepEqual(want.Spec.Taints, n.Spec.Taints) {
		// Labels and annotations only: a merge patch of those keys, which
		// the child's own patches of its summary cannot conflict with.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels":      map[string]string{api.LabelNodeRoleCluster: "", corev1.LabelHostname: n.Name},
			"annotations": patchAnnotations,
		}})
		if err != nil {
			return err
		}
		_, err = d.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager})
		return err
	}
	// Taints: the whole node, from this version (a concurrent change of
	// its taints, by the node lifecycle controller, is retried).
	_, err := d.client.CoreV1().Nodes().Update(ctx, want, metav1.UpdateOptions{FieldManager: api.FieldManager})
	return err
}

// addresses decides what child n is granted of the pod CIDRs it claims
// (grants.go), makes it a peer routed that much when it has a gateway key,
// and sets in annotations (and returns, as the patch of them) what n is
// told: the overlaps of its claim, what is refused, the parent's gateway.
func (d *decorator) addresses(ctx context.Context, n *corev1.Node, annotations map[string]string) (map[string]string, error) {
	overlap := podCIDROverlap(n, d.nodes, &d.cidrs)
	// The child is routed, carried up and told to its siblings what this
	// cluster grants of its claim, no more.
	claimed, sum := d.cidrs.of(n)
	granted, err := d.grants.decide(n.Name, podcidrs.Strings(claimed), d.coversSame(n, sum))
	if err != nil {
		return nil, err
	}
	d.warnRefused(n, granted.refused)
	patch := map[string]string{api.AnnotationPodCIDROverlap: overlap, api.AnnotationPodCIDRsRefused: granted.refused}
	if key, _ := api.ChildAnnotation(n, api.AnnotationGatewayKey); d.peers != nil && key != "" {
		subtree, _ := api.ChildAnnotation(n, api.AnnotationGatewaySubtree)
		d.peers.SetChildSubtree(ctx, n.Name, subtree)
		d.peers.SetChild(ctx, n.Name, key, granted.routedStrings())
		patch[api.AnnotationGatewayParent] = d.peers.ParentAnnotation(n.Name)
	}
	maps.Copy(annotations, patch)
	return patch, nil
}

// coversSame returns whether another child covers the same pods as n
// (whose summary is sum): the same cluster under another name (its
// cluster UID), or a cluster both cover (a diamond), as their summaries
// say. It only spares the other's ranges being called a refusal: it
// grants nothing.
func (d *decorator) coversSame(n *corev1.Node, sum *api.Summary) func(string) bool {
	uid := n.Annotations[api.AnnotationClusterUID]
	return func(other string) bool {
		o, err := d.nodes.Get(other)
		if err != nil {
			return false
		}
		if uid != "" && o.Annotations[api.AnnotationClusterUID] == uid {
			return true
		}
		_, theirs := d.cidrs.of(o)
		return sum != nil && theirs != nil && api.SharesBranch(sum, theirs)
	}
}

// othersKeys returns the desired taints but those of a key that a current
// taint of someone else's has (the provider taint's, Kubernetes' own
// node.kubernetes.io/..., or, when the keys applied are recorded, any key
// not among them: an admin's), and the keys of those left out. Without a
// record (a node decorated before it was kept), only Kubernetes' own keys
// are told apart.
func othersKeys(current, desired []corev1.Taint, applied []string, recorded bool) (kept []corev1.Taint, refused []string) {
	others := map[string]bool{api.TaintKeyProvider: true}
	for _, t := range current {
		if isSystemTaint(t) || (recorded && !slices.Contains(applied, t.Key)) {
			others[t.Key] = true
		}
	}
	for _, t := range desired {
		if others[t.Key] {
			if !slices.Contains(refused, t.Key) {
				refused = append(refused, t.Key)
			}
			continue
		}
		kept = append(kept, t)
	}
	return kept, refused
}

// mergeTaints returns the provider taint, the desired taints, and every
// current taint of another owner (node lifecycle taints such as
// node.kubernetes.io/unreachable, an admin's), in that order. applied are
// the keys of the taints applied from an earlier desired list: those the
// child asks for no more are dropped.
func mergeTaints(provider corev1.Taint, current, desired []corev1.Taint, applied []string) []corev1.Taint {
	out := append([]corev1.Taint{provider}, desired...)
	managed := map[string]bool{api.TaintKeyProvider: true}
	for _, t := range desired {
		managed[t.Key] = true
	}
	for _, t := range current {
		if managed[t.Key] || (!isSystemTaint(t) && slices.Contains(applied, t.Key)) {
			continue
		}
		out = append(out, t)
	}
	if len(out) == len(current) {
		same := true
		for i := range out {
			if !out[i].MatchTaint(&current[i]) || out[i].Value != current[i].Value {
				same = false
				break
			}
		}
		if same {
			return current
		}
	}
	return out
}

func isSystemTaint(t corev1.Taint) bool {
	for _, prefix := range []string{"node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "node-role.kubernetes.io/"} {
		if len(t.Key) >= len(prefix) && t.Key[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}
