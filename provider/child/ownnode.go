package child

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// reasonStatusUnknown is the reason kube-controller-manager's node
// lifecycle controller gives a node's Ready condition when the node's
// lease has lapsed.
const reasonStatusUnknown = "NodeStatusUnknown"

// repostEvery bounds how often a lapsed status is posted again.
const repostEvery = 5 * time.Second

// reregisterEvery bounds how often a virtual node deleted in the parent is
// registered again.
const reregisterEvery = 10 * time.Second

// watchOwnNode watches this Target's virtual node in the parent (a node
// may watch its own Node) and, when the parent's controller manager has
// marked it unknown (its lease lapsed: the parent unreachable for a while,
// or this agent starved), has its status posted again at once, as a
// kubelet does on its next status check. virtual-kubelet's node controller
// alone would post it only at its next periodic update. repost is the
// provider's status post; it does nothing while this cluster is not ready.
//
// onNode, when set, is also given every version of the node seen.
func watchOwnNode(ctx context.Context, nodeClient kubernetes.Interface, name string, clk clock.PassiveClock, repost func(), onNode func(*corev1.Node)) {
	factory := kubeclient.NewCoreFactory(nodeClient, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}, kubeclient.StripManagedFields)
	inf := factory.CoreV1().Nodes().Informer()
	var last time.Time
	check := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if ok && onNode != nil {
			onNode(n)
		}
		if !ok || !lapsed(n) || clk.Since(last) < repostEvery {
			return
		}
		last = clk.Now()
		klog.FromContext(ctx).Info("The parent marked the virtual node's status unknown; posting it again", "node", name)
		repost()
	}
	// A node deleted in the parent is registered again by the status
	// post after it (registration.go), at most once per reregisterEvery:
	// a child that was revoked, whose node the parent deletes each time,
	// comes back no more often than that, and once the revocation is
	// lifted it is back within that.
	var mu sync.Mutex
	var lastRegister time.Time
	pending := false
	deleted := func(any) {
		mu.Lock()
		defer mu.Unlock()
		if pending {
			return
		}
		pending = true
		wait := max(0, reregisterEvery-clk.Since(lastRegister))
		time.AfterFunc(wait, func() {
			mu.Lock()
			pending, lastRegister = false, clk.Now()
			mu.Unlock()
			if ctx.Err() == nil {
				klog.FromContext(ctx).Info("The virtual node was deleted in the parent; registering it again", "node", name)
				repost()
			}
		})
	}
	// One handler goroutine: last needs no lock.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
		DeleteFunc: deleted,
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Watching the virtual node")
		return
	}
	factory.Start(ctx.Done())
}

// lapsed reports whether the parent marked n's Ready condition unknown
// for a lapsed lease.
func lapsed(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionUnknown && c.Reason == reasonStatusUnknown
		}
	}
	return false
}
