package forward

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"

	"github.com/nestlet/nestlet/api"
)

// reserving runs a Provider whose parent pods are those in parentPods.
func reserving(t *testing.T) (*Provider, *fake.Clientset, cache.Indexer) {
	t.Helper()
	return runProvider(t, nil)
}

// runProvider runs a Provider of leaf under root whose parent pods are
// those in the indexer returned, with change (optional) applied to its
// Config.
func runProvider(t *testing.T, change func(*Config)) (*Provider, *fake.Clientset, cache.Indexer) {
	t.Helper()
	child := fake.NewClientset()
	// As an API server does, every pod created gets a UID (the release's
	// patch applies only to the delegate of that UID).
	child.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if pod, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod); ok && pod.UID == "" {
			pod.UID = uuid.NewUUID()
		}
		return false, nil, nil
	})
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	cfg := Config{TargetName: "t", TargetUID: "target-uid", ClusterName: "leaf", ParentName: "root",
		Parent: fake.NewClientset(), ParentPods: corelisters.NewPodLister(parentPods), Child: child}
	if change != nil {
		change(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	p.NotifyPods(t.Context(), func(*corev1.Pod) {})
	return p, child, parentPods
}

// unboundPod is a parent pod the parent's scheduler has not bound yet.
func unboundPod() *corev1.Pod {
	pod := neverPod()
	pod.Spec.NodeName = ""
	return pod
}

// heldDelegate waits for the delegate of pod to appear in the informer.
func heldDelegate(t *testing.T, p *Provider, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var d *corev1.Pod
	require.Eventually(t, func() bool {
		d = p.delegateOf(pod.Namespace, pod.Name, pod.UID)
		return d != nil
	}, 10*time.Second, 5*time.Millisecond, "the held delegate")
	return d
}

// holdOn does what this cluster's Reservation plugin does for the held
// delegate d: it writes the node it holds d on.
func holdOn(t *testing.T, child *fake.Clientset, d *corev1.Pod, node string) {
	t.Helper()
	d = d.DeepCopy()
	d.Annotations[api.AnnotationReservedOn] = node
	_, err := child.CoreV1().Pods(d.Namespace).Update(t.Context(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// boundHere returns pod bound to this cluster's virtual node (leaf), as
// the parent's informer then has it.
func boundHere(t *testing.T, parentPods cache.Indexer, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "leaf"
	require.NoError(t, parentPods.Add(bound))
	return bound
}

// A reservation creates the delegate held and answers with the node this
// cluster's scheduler holds it on; until the parent pod is bound here it
// is not the pod's (virtual-kubelet then creates, which releases it).
func TestReserveHoldsThenCreateReleases(t *testing.T) {
	p, child, parentPods := reserving(t)
	pod := unboundPod()
	pod.Spec.ServiceAccountName = "mount-test"
	done := reserveInBackground(t, p, pod)
	d := heldDelegate(t, p, pod)
	require.Equal(t, api.HoldHeld, d.Annotations[api.AnnotationHold])
	// This cluster's admission refuses a pod whose service account it
	// does not have: the held delegate's is made first.
	_, err := child.CoreV1().ServiceAccounts(pod.Namespace).Get(t.Context(), "mount-test", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, d.Spec.NodeName)
	// This cluster's scheduler holds it (the Reservation plugin).
	holdOn(t, child, d, "node-1")
	a := <-done
	require.NoError(t, a.err)
	require.Equal(t, api.Reservation{Held: true, Node: "node-1"}, a.res)

	_, err = p.GetPod(t.Context(), pod.Namespace, pod.Name)
	require.True(t, errdefs.IsNotFound(err), "a held delegate is not yet the pod's: %v", err)
	listed, err := p.GetPods(t.Context())
	require.NoError(t, err)
	require.Empty(t, listed, "nor is it listed as a pod to remove")

	// Bound here: CreatePod releases it rather than making another.
	require.NoError(t, p.CreatePod(t.Context(), boundHere(t, parentPods, pod)))
	got, err := child.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, api.HoldReleased, got.Annotations[api.AnnotationHold])
	require.Equal(t, d.UID, got.UID)
	all, err := child.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, all.Items, 1, "one delegate")
}

// A release that fails for a passing reason (the parent's Node authorizer
// not yet knowing the pod is bound here, this cluster's API server out) is
// retried until the held delegate is released, not left held for ever.
func TestReleaseRetried(t *testing.T) {
	p, child, parentPods := reserving(t)
	pod := unboundPod()
	done := reserveInBackground(t, p, pod)
	holdOn(t, child, heldDelegate(t, p, pod), "node-1")
	require.NoError(t, (<-done).err)

	// The release's write fails once, and so does the read-and-write
	// that follows a failed patch.
	var failed atomic.Int32
	child.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if (a.GetVerb() != "patch" && a.GetVerb() != "get") || failed.Load() >= 2 {
			return false, nil, nil
		}
		failed.Add(1)
		return true, nil, apierrors.NewServiceUnavailable("restarting")
	})
	require.NoError(t, p.CreatePod(t.Context(), boundHere(t, parentPods, pod)), "a passing error is retried, not returned")
	require.Eventually(t, func() bool {
		got, err := child.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		return err == nil && got.Annotations[api.AnnotationHold] == api.HoldReleased
	}, 10*time.Second, 20*time.Millisecond, "the retry releases the held delegate")
	require.Equal(t, int32(2), failed.Load())
}

// A cluster with no place says why, once its scheduler has tried every
// node: a failure that says it tries the others is not the answer. The
// delegate is withdrawn.
func TestReserveAnswersTheLastUnschedulable(t *testing.T) {
	p, child, _ := reserving(t)
	pod := unboundPod()
	done := reserveInBackground(t, p, pod)
	d := heldDelegate(t, p, pod)
	unschedulableBy := func(msg string) {
		cur, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
		require.NoError(t, err)
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}}
		_, err = child.CoreV1().Pods(d.Namespace).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	unschedulableBy("0/1 nodes are available: 1 " + api.TryingOtherNodes + "mid-1: no room")
	select {
	case a := <-done:
		t.Fatalf("answered before the last word: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}
	unschedulableBy("0/2 nodes are available: 1 mid-1: no room, 1 mid-2: no room.")
	a := <-done
	require.NoError(t, a.err)
	res := a.res
	require.False(t, res.Held)
	require.Equal(t, "0/2 nodes are available: 1 mid-1: no room, 1 mid-2: no room.", res.Unschedulable)
	require.Eventually(t, func() bool {
		_, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 5*time.Second, 10*time.Millisecond, "the held delegate is withdrawn")
}

// A reason that holds api.NoAnswerYet (a cluster below could not be
// asked) is answered as such, for the parent to ask again shortly rather
// than refuse this cluster until its summary changes; with wait for room
// too: the pod does not wait here for a cluster that did not answer.
func TestReserveSaysWhenBelowDidNotAnswer(t *testing.T) {
	p, child, _ := runProvider(t, func(c *Config) { c.WaitForRoom = true })
	pod := unboundPod()
	done := reserveInBackground(t, p, pod)
	d := heldDelegate(t, p, pod)
	cur, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.NoError(t, err)
	msg := "0/1 nodes are available: 1 mid-1: " + api.NoAnswerYet + "asking for a place (HTTP 503): not ready."
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}}
	_, err = child.CoreV1().Pods(d.Namespace).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	a := <-done
	require.NoError(t, a.err)
	require.Equal(t, api.Reservation{Unschedulable: msg, Retry: true}, a.res)
	require.Eventually(t, func() bool {
		_, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 5*time.Second, 10*time.Millisecond, "the held delegate is withdrawn")
}

// Withdraw deletes a held delegate, of the right pod only; a pod whose
// volumes this cluster makes at binding is not held; a bound pod is a bad
// request.
func TestReserveWithdrawAndRefusals(t *testing.T) {
	p, child, _ := reserving(t)
	pod := unboundPod()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, _ = p.Reserve(ctx, pod.DeepCopy(), 10*time.Second) }()
	d := heldDelegate(t, p, pod)
	p.Withdraw(pod.Namespace, pod.Name, "another-uid")
	_, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.NoError(t, err, "another pod's withdrawal leaves it")
	p.Withdraw(pod.Namespace, pod.Name, pod.UID)
	_, err = child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "withdrawn: %v", err)
	cancel()

	claimed := unboundPod()
	claimed.Name, claimed.UID = "with-claim", "u2"
	claimed.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	res, err := p.Reserve(t.Context(), claimed, time.Second)
	require.NoError(t, err)
	require.Equal(t, api.Reservation{}, res, "bound first, placed after")
	_, err = child.CoreV1().Pods(claimed.Namespace).Get(t.Context(), claimed.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))

	_, err = p.Reserve(t.Context(), neverPod(), time.Second)
	require.ErrorIs(t, err, api.ErrBadReservation)
}

// A cluster that can grow (Target spec.waitForRoom) keeps a pod it has no
// place for, held and Pending, and says so; asking again renews it.
func TestReserveWaitsForRoom(t *testing.T) {
	p, child, _ := reserving(t)
	p.cfg.WaitForRoom = true
	pod := unboundPod()
	done := reserveInBackground(t, p, pod)
	d := heldDelegate(t, p, pod)
	cur := d.DeepCopy()
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu.", LastTransitionTime: metav1.Now()}}
	_, err := child.CoreV1().Pods(d.Namespace).UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	a := <-done
	require.NoError(t, a.err)
	require.Equal(t, api.Reservation{Unschedulable: "0/2 nodes are available: 2 Insufficient cpu.", Waiting: true}, a.res)
	_, err = child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.NoError(t, err, "kept, Pending, for the autoscaler")
	first := p.held.asked.get(pod.UID)
	require.False(t, first.IsZero())

	// Asked again: the same delegate, the same answer, a later ask.
	time.Sleep(10 * time.Millisecond)
	require.Eventually(t, func() bool {
		d := p.delegateOf(pod.Namespace, pod.Name, pod.UID)
		_, _, stuck := unschedulable(d)
		return stuck
	}, 5*time.Second, 5*time.Millisecond)
	res, err := p.Reserve(t.Context(), pod.DeepCopy(), 10*time.Second)
	require.NoError(t, err)
	require.True(t, res.Waiting)
	require.True(t, p.held.asked.get(pod.UID).After(first))
	again, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, d.UID, again.UID)
}

// answer is what Reserve returned.
type answer struct {
	res api.Reservation
	err error
}

// reserveInBackground asks p to reserve a place for pod (10 s at most) and
// returns where its answer comes, so that the test can play the child's
// scheduler meanwhile; the answer is checked by the test itself.
func reserveInBackground(t *testing.T, p *Provider, pod *corev1.Pod) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		res, err := p.Reserve(t.Context(), pod.DeepCopy(), 10*time.Second)
		done <- answer{res, err}
	}()
	return done
}

// A reservation whose withdrawal was lost (the tunnel dropped as the
// parent's scheduler gave up) stays held here while the parent pod is
// replaced by one of the same name. Asked for the new pod, the agent
// withdraws the stale one at once (the parent's pod it was held for is
// gone: the name is another's). Should that withdrawal fail too, the new
// pod is held under the name's second form, and binding it here releases
// its own held delegate, not the stale one (whichever of the two the
// informer lists first), which is left to collection. Before, the new
// pod's delegate was taken for "made by an earlier attempt" and stayed
// held until this cluster's scheduler gave up on it and it bounced.
func TestCreateReleasesItsOwnReservationBesideAStaleOne(t *testing.T) {
	p, child, parentPods := reserving(t)
	var refuse sync.Map // names whose delete fails
	child.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if _, ok := refuse.Load(a.(k8stesting.DeleteAction).GetName()); ok {
			return true, nil, apierrors.NewServiceUnavailable("the tunnel dropped")
		}
		return false, nil, nil
	})
	for i := range 8 { // the informer's order is a map's: try both
		stale := unboundPod()
		stale.Name, stale.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("stale-%d", i))
		withdrawalLost := i%4 != 0
		if withdrawalLost {
			refuse.Store(stale.Name, true)
		}
		done := reserveInBackground(t, p, stale)
		holdOn(t, child, heldDelegate(t, p, stale), "node-1")
		require.NoError(t, (<-done).err)

		pod := stale.DeepCopy()
		pod.UID = types.UID(fmt.Sprintf("new-%d", i))
		done = reserveInBackground(t, p, pod)
		d := heldDelegate(t, p, pod)
		holdOn(t, child, d, "node-2")
		require.NoError(t, (<-done).err)
		old, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), stale.Name, metav1.GetOptions{})
		if !withdrawalLost {
			// Withdrawn: the name is free again, and the new pod's.
			require.NoError(t, err)
			require.Equal(t, pod.UID, originUID(old), "the stale reservation is withdrawn once a pod of its name is asked for")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, stale.UID, originUID(old), "the stale reservation's withdrawal failed again")
		require.Equal(t, delegateName(pod, true), d.Name, "the name's second form")

		require.NoError(t, p.CreatePod(t.Context(), boundHere(t, parentPods, pod)))
		got, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, api.HoldReleased, got.Annotations[api.AnnotationHold], "the bound pod's own reservation is released")
		require.Eventually(t, func() bool {
			cur, err := p.GetPod(t.Context(), pod.Namespace, pod.Name)
			return err == nil && cur.UID == pod.UID
		}, 10*time.Second, 5*time.Millisecond, "the kubelet API reads the bound pod's delegate")
	}
}

// A pod deleted at the parent is removed there, once its delegate is gone,
// only after it shows its terminal status, as a kubelet removes a pod: one
// that keeps a finalizer (a Job's, until its controller has seen the pod
// end) would otherwise stay Running for ever. The status goes through
// virtual-kubelet; if it has not arrived within terminalWait, the agent
// writes it itself before the removal.
func TestDeletedPodRemovedOnlyOnceTerminal(t *testing.T) {
	defer func(w time.Duration) { terminalWait = w }(terminalWait)
	terminalWait = 300 * time.Millisecond
	for _, delivered := range []bool{true, false} {
		p, child, parentPods := reserving(t)
		parentClient := p.cfg.Parent.(*fake.Clientset)
		pod := neverPod()
		pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
		_, err := parentClient.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, parentPods.Add(pod))
		require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
		require.Eventually(t, func() bool { return p.delegateOf(pod.Namespace, pod.Name, pod.UID) != nil }, 10*time.Second, 5*time.Millisecond)

		// virtual-kubelet: a status it is given lands at the parent
		// (unless not delivered).
		p.NotifyPods(t.Context(), func(up *corev1.Pod) {
			if delivered && terminal(up) {
				require.NoError(t, parentPods.Update(up.DeepCopy()))
			}
		})
		deleting := pod.DeepCopy()
		deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = ptr.To(metav1.Now()), ptr.To[int64](2)
		require.NoError(t, parentPods.Update(deleting))
		parentClient.ClearActions()
		require.NoError(t, p.DeletePod(t.Context(), deleting.DeepCopy()))
		_, err = child.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the delegate is gone")

		var verbs []string
		require.Eventually(t, func() bool {
			verbs = nil
			for _, a := range parentClient.Actions() {
				verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
			}
			return slices.Contains(verbs, "delete pods/")
		}, 10*time.Second, 5*time.Millisecond, "the parent pod removed")
		if delivered {
			require.Equal(t, []string{"delete pods/"}, verbs, "the status arrived through virtual-kubelet: nothing else written")
			continue
		}
		require.Equal(t, []string{"update pods/status", "delete pods/"}, verbs, "the terminal status written before the removal")
		for _, a := range parentClient.Actions() {
			if u, ok := a.(k8stesting.UpdateAction); ok {
				require.True(t, terminal(u.GetObject().(*corev1.Pod)), "the status written is terminal")
			}
		}
	}
}

// A pod deleted at the parent with nothing run here (no delegate yet, or
// one still held) ends Failed before virtual-kubelet removes it, as a
// kubelet ends a pod deleted before it started: one that keeps a
// finalizer (a Job's) would otherwise stay Pending. A held delegate is
// withdrawn.
func TestDeletedBeforeItRanEndsFailed(t *testing.T) {
	for _, held := range []bool{false, true} {
		p, child, parentPods := reserving(t)
		sent := make(chan *corev1.Pod, 8)
		p.NotifyPods(t.Context(), func(up *corev1.Pod) { sent <- up })
		pod := unboundPod()
		if held {
			done := reserveInBackground(t, p, pod)
			holdOn(t, child, heldDelegate(t, p, pod), "node-1")
			require.NoError(t, (<-done).err)
		}
		deleting := boundHere(t, parentPods, pod)
		deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = ptr.To(metav1.Now()), ptr.To[int64](30)
		err := p.DeletePod(t.Context(), deleting)
		require.True(t, errdefs.IsNotFound(err), "nothing to delete here: %v", err)
		select {
		case up := <-sent:
			require.Equal(t, corev1.PodFailed, up.Status.Phase)
			require.Len(t, up.Status.ContainerStatuses, 1)
			require.Equal(t, int32(137), up.Status.ContainerStatuses[0].State.Terminated.ExitCode)
		case <-time.After(10 * time.Second):
			t.Fatal("no terminal status sent")
		}
		if held {
			_, err := child.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "the held delegate withdrawn: %v", err)
		}
	}
}
