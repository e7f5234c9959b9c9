// Package reservation is the Reservation scheduler plugin: a pod is bound
// to a virtual node only once the child has a place for it, as a pod in one
// cluster is bound only to a node with room, so that a pod the child cannot
// place stays Pending here, with the child's reason, instead of failing
// below.
//
// At Permit, for a virtual node, the plugin asks the child's agent for a
// place (api.ReservePath through this API server's nodes/proxy) and waits:
// the agent creates the delegate held, the child's scheduler (this plugin
// again) holds it at the node it chose, reserving below first when that
// node is virtual too, and says where (api.AnnotationReservedOn). A child
// with no place answers with its scheduler's reason: Permit rejects with
// "<node>: <reason>", and Filter keeps refusing that node to the pod with
// the same reason until the node's summary changes (a node added below,
// a pod gone), so the pod's message names every level it tried, as one
// cluster's scheduler names every node. Unreserve withdraws a reservation
// the pod did not use.
//
// For a pod held from above (api.AnnotationHold "held"), Permit says where
// it holds it and waits for the release the agent writes once the parent
// pod is bound.
package reservation

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name is the plugin's name in the scheduler profile.
const Name = "Reservation"

const (
	// reserveWait bounds the wait for a child's answer.
	reserveWait = 30 * time.Second
	// holdWait bounds how long a pod held from above waits for its release.
	holdWait = 60 * time.Second
)

// Reservation implements the Filter, Permit, Reserve (for Unreserve) and
// PostBind extension points.
type Reservation struct {
	handle fwk.Handle
	// reserve asks node's child for a place for pod (reserveBelow, or a
	// fake in tests).
	reserve  func(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (api.Reservation, error)
	withdraw func(ctx context.Context, pod *corev1.Pod, node string)

	mu sync.Mutex
	// refused holds, per pod, the virtual nodes whose child had no place,
	// with the node's summary then and the child's reason.
	refused map[types.UID]map[string]refusal
	// pending are the reservations asked for (or made) and not yet bound
	// or withdrawn, by pod: the node and the cancel of the request.
	pending map[types.UID]*request
	// waitingIn are, by pod, the virtual nodes whose child keeps the pod
	// waiting for room (api.Reservation.Waiting): withdrawn once the pod
	// is bound elsewhere or deleted.
	waitingIn map[types.UID]map[string]bool
}

type refusal struct {
	summary string
	reason  string
	// waiting: the child keeps the pod waiting for room; it is asked
	// again after api.RenewWaiting (at is when it answered).
	waiting bool
	at      time.Time
	// failed: the child could not be asked (its agent or tunnel down);
	// asked again after errorBackoff.
	failed bool
}

// errorBackoff is how long a child that could not be asked is refused to
// the pod: the scheduler would otherwise ask again at once, as often as it
// is idle.
const errorBackoff = 5 * time.Second

type request struct {
	node   string
	cancel context.CancelFunc
	held   bool // the child holds a place
	// virtual: the node is a virtual node, whose child is asked.
	virtual bool
	// keep: the child keeps the pod waiting for room; Unreserve leaves it.
	keep bool
}

var (
	_ fwk.FilterPlugin   = &Reservation{}
	_ fwk.PermitPlugin   = &Reservation{}
	_ fwk.ReservePlugin  = &Reservation{}
	_ fwk.PostBindPlugin = &Reservation{}
)

// New builds the plugin and subscribes it to pod updates (for releases).
func New(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	pl := &Reservation{handle: h, refused: map[types.UID]map[string]refusal{}, pending: map[types.UID]*request{},
		waitingIn: map[types.UID]map[string]bool{}}
	pl.reserve, pl.withdraw = pl.reserveBelow, pl.withdrawBelow
	if h == nil {
		return pl, nil // a profile check builds plugins without a scheduler
	}
	if f := h.SharedInformerFactory(); f != nil {
		_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				if pod, ok := obj.(*corev1.Pod); ok && pod.Annotations[api.AnnotationHold] == api.HoldReleased {
					// Not waited for: most such updates are of pods bound
					// already.
					if wp := h.GetWaitingPod(pod.UID); wp != nil {
						wp.Allow(Name)
					}
				}
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if pod, ok := obj.(*corev1.Pod); ok {
					pl.deleted(pod)
				}
			},
		})
		if err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// Name returns the plugin's name.
func (*Reservation) Name() string { return Name }

// Filter refuses a virtual node whose child had no place for the pod, for
// as long as the node's summary says what it said then, and a real node
// whose host ports the pod's clash with.
func (pl *Reservation) Filter(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if node == nil {
		return nil
	}
	if !virtualnode.IsVirtual(node) {
		// The built-in NodePorts filter, which the profile disables:
		// host ports are one host's, and a virtual node's child answers
		// for its own hosts' when asked for a place.
		if !nodeports.Fits(pod, nodeInfo) {
			return fwk.NewStatus(fwk.Unschedulable, nodeports.ErrReason)
		}
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	r, ok := pl.refused[pod.UID][node.Name]
	if !ok {
		return nil
	}
	if (r.waiting && time.Since(r.at) >= api.RenewWaiting) || (r.failed && time.Since(r.at) >= errorBackoff) {
		// Asked again: the child keeps the pod for as long as it is.
		delete(pl.refused[pod.UID], node.Name)
		return nil
	}
	if r.summary != summaryKey(node) {
		klog.FromContext(ctx).V(4).Info("Node's summary changed since its child had no place: asking again", "pod", klog.KObj(pod), "node", node.Name)
		delete(pl.refused[pod.UID], node.Name)
		return nil
	}
	// Unresolvable: preempting pods of this node would not change the
	// child's answer.
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, r.reason)
}

// summaryKey is what of a virtual node's summary a refusal holds for: all
// of it but the time it was computed at.
func summaryKey(node *corev1.Node) string {
	s, ok := api.ParseSummary(node)
	if !ok {
		return node.Annotations[api.AnnotationSummary]
	}
	s.Time = ""
	b, _ := json.Marshal(s)
	return string(b)
}

// Permit waits, for a pod going to a virtual node, for the child's place,
// and, for a pod held from above, for its release.
func (pl *Reservation) Permit(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	nodeInfo, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	// A virtual node whose agent answers no reservations (it serves no
	// kubelet API, or predates them), or a pod that asks so, is bound
	// first, as before.
	virtual := virtualnode.IsVirtual(nodeInfo.Node()) && nodeInfo.Node().Annotations[api.AnnotationReserves] == "true" &&
		pod.Annotations[api.AnnotationBindFirst] != "true"
	held := pod.Annotations[api.AnnotationHold] == api.HoldHeld
	if !virtual && !held {
		return nil, 0
	}
	timeout := time.Duration(0)
	if virtual {
		timeout += reserveWait
	}
	if held {
		timeout += holdWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	pl.mu.Lock()
	if old := pl.pending[pod.UID]; old != nil {
		old.cancel()
	}
	req := &request{node: nodeName, cancel: cancel, virtual: virtual}
	pl.pending[pod.UID] = req
	pl.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Waiting for a place", "pod", klog.KObj(pod), "node", nodeName, "virtual", virtual, "held", held)
	asked := pod.DeepCopy()
	if d, err := state.Read(virtualnode.DomainsStateKey); err == nil && virtual {
		// The domains TreeSpread chose inside the child, which the
		// Binding carries too: the held delegate goes there.
		if domains, ok := d.(virtualnode.ChosenDomains); ok && len(domains) > 0 {
			if asked.Annotations == nil {
				asked.Annotations = map[string]string{}
			}
			asked.Annotations[api.AnnotationDomains] = api.FormatDomains(domains)
		}
	}
	go pl.run(ctx, asked, nodeName, virtual, held, nodeInfo.Node())
	return fwk.NewStatus(fwk.Wait), timeout
}

// refuseLocked records that node refused pod's reservation. Caller holds
// pl.mu.
func (pl *Reservation) refuseLocked(pod types.UID, node string, r refusal) {
	if pl.refused[pod] == nil {
		pl.refused[pod] = map[string]refusal{}
	}
	pl.refused[pod][node] = r
}

// activateAfter moves pod back to the active queue after d, to be
// scheduled again.
func (pl *Reservation) activateAfter(logger klog.Logger, pod *corev1.Pod, d time.Duration) {
	time.AfterFunc(d, func() {
		pl.handle.Activate(logger, map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
	})
}

// run reserves below (virtual) and then allows the pod, or, held from
// above, says where it is held and lets the release allow it.
func (pl *Reservation) run(ctx context.Context, pod *corev1.Pod, nodeName string, virtual, held bool, node *corev1.Node) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "node", nodeName)
	if virtual {
		res, err := pl.reserve(ctx, pod, node)
		switch {
		case err != nil:
			reason := fmt.Sprintf("%s: %s%v", nodeName, api.NoAnswerYet, err)
			pl.mu.Lock()
			pl.refuseLocked(pod.UID, nodeName, refusal{summary: summaryKey(node), reason: reason, failed: true, at: time.Now()})
			pl.mu.Unlock()
			pl.reject(pod.UID, reason)
			pl.activateAfter(logger, pod, errorBackoff)
			return
		case res.Unschedulable != "":
			reason := fmt.Sprintf("%s: %s", nodeName, res.Unschedulable)
			if res.Waiting {
				reason = fmt.Sprintf("%s: waits there for room: %s", nodeName, res.Unschedulable)
			}
			pl.mu.Lock()
			// A child that could not ask below (Retry) is asked again
			// after errorBackoff, as one that could not be asked.
			pl.refuseLocked(pod.UID, nodeName, refusal{summary: summaryKey(node), reason: reason, waiting: res.Waiting, failed: res.Retry, at: time.Now()})
			if res.Waiting {
				if r := pl.pending[pod.UID]; r != nil && r.node == nodeName {
					r.keep = true
				}
				if pl.waitingIn[pod.UID] == nil {
					pl.waitingIn[pod.UID] = map[string]bool{}
				}
				pl.waitingIn[pod.UID][nodeName] = true
			}
			pl.mu.Unlock()
			switch {
			case res.Waiting:
				// Asked again while it waits, which keeps it there.
				pl.activateAfter(logger, pod, api.RenewWaiting)
			case res.Retry:
				pl.activateAfter(logger, pod, errorBackoff)
			}
			logger.V(2).Info("Child has no place for the pod", "reason", res.Unschedulable)
			if held {
				reason = api.TryingOtherNodes + reason
			}
			pl.reject(pod.UID, reason)
			// Tried again at once, not after a back-off: Filter now
			// refuses this node with the child's reason, so the next
			// cycle goes to another node or says why none fits.
			pl.activateAfter(logger, pod, 50*time.Millisecond)
			return
		case res.Held:
			pl.mu.Lock()
			if r := pl.pending[pod.UID]; r != nil && r.node == nodeName {
				r.held = true
			}
			pl.mu.Unlock()
			logger.V(3).Info("Child holds a place", "at", res.Node)
		}
	}
	if !held {
		pl.allow(pod.UID)
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, api.AnnotationReservedOn, nodeName)
	cur, err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		pl.reject(pod.UID, fmt.Sprintf("saying where pod %s/%s is held: %v", pod.Namespace, pod.Name, err))
		return
	}
	if cur.Annotations[api.AnnotationHold] == api.HoldReleased {
		pl.allow(pod.UID)
	}
}

// waiting returns the waiting pod uid, once the framework has registered
// it (Permit returns before it does), or nil.
func (pl *Reservation) waiting(uid types.UID) fwk.WaitingPod {
	for range 200 {
		if wp := pl.handle.GetWaitingPod(uid); wp != nil {
			return wp
		}
		pl.mu.Lock()
		_, asked := pl.pending[uid]
		pl.mu.Unlock()
		if !asked {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (pl *Reservation) allow(uid types.UID) {
	if wp := pl.waiting(uid); wp != nil {
		wp.Allow(Name)
	}
}

func (pl *Reservation) reject(uid types.UID, msg string) {
	if wp := pl.waiting(uid); wp != nil {
		wp.Reject(Name, msg)
	}
}

// Reserve does nothing: the plugin implements ReservePlugin for Unreserve.
func (*Reservation) Reserve(context.Context, fwk.CycleState, *corev1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve stops waiting for the child and withdraws what it holds.
func (pl *Reservation) Unreserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeName string) {
	pl.mu.Lock()
	r := pl.pending[pod.UID]
	if r != nil && r.node == nodeName {
		delete(pl.pending, pod.UID)
	} else {
		r = nil
	}
	pl.mu.Unlock()
	if r != nil {
		r.cancel()
	}
	if pod.Annotations[api.AnnotationHold] != "" {
		// Where it was held is no longer true: the agent above must not
		// read it as a place.
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, api.AnnotationReservedOn)
		_, err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Clearing where a held pod was held", "pod", klog.KObj(pod))
		}
	}
	if r == nil || !r.virtual || r.keep {
		return
	}
	// Withdrawn whether or not the child said it holds a place: its
	// answer may be on its way. Before the pod is tried again (Unreserve
	// runs in the pod's own binding goroutine), so that a late
	// withdrawal never takes the place of the next attempt.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	pl.withdraw(wctx, pod, nodeName)
}

// PostBind forgets the pod's reservation (it is the child's now), and
// withdraws it from the children that kept it waiting for room.
func (pl *Reservation) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeName string) {
	pl.withdrawWaiting(pod, nodeName)
	pl.forget(pod.UID)
}

// withdrawWaiting withdraws pod from the children that keep it waiting for
// room, but the one it is bound to.
func (pl *Reservation) withdrawWaiting(pod *corev1.Pod, boundTo string) {
	pl.mu.Lock()
	nodes := pl.waitingIn[pod.UID]
	delete(pl.waitingIn, pod.UID)
	pl.mu.Unlock()
	for node := range nodes {
		if node == boundTo {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pl.withdraw(ctx, pod, node)
		}()
	}
}

// deleted withdraws what the children hold or keep waiting for a deleted
// pod. A pod deleted while it waits at Permit is rejected by the
// framework, whose Unreserve would withdraw its reservation; but this
// handler may run first, and the child's place must not be kept (until
// its agent collects it, api.HeldMaxAge) for a pod that is gone.
// The request is taken from pending under the lock, as Unreserve takes
// it: whichever runs first withdraws, once.
func (pl *Reservation) deleted(pod *corev1.Pod) {
	pl.mu.Lock()
	r := pl.pending[pod.UID]
	delete(pl.pending, pod.UID)
	pl.mu.Unlock()
	if r != nil {
		r.cancel()
	}
	pl.withdrawWaiting(pod, "")
	pl.forget(pod.UID)
	if r == nil || !r.virtual || r.keep {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pl.withdraw(ctx, pod, r.node)
	}()
}

func (pl *Reservation) forget(uid types.UID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if r := pl.pending[uid]; r != nil {
		r.cancel()
		delete(pl.pending, uid)
	}
	delete(pl.refused, uid)
}
