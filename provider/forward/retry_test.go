package forward

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api"
)

// refused is what a client gets from an API server that is down.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}

// runFailing runs a Provider whose child refuses to create pods with the
// errors of fails, one per attempt, then creates them.
func runFailing(t *testing.T, parentPod *corev1.Pod, fails ...error) (*Provider, *fake.Clientset, *clocktesting.FakeClock, *record.FakeRecorder, chan *corev1.Pod) {
	t.Helper()
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(parentPod))
	child := fake.NewClientset()
	var calls atomic.Int32
	child.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if n := int(calls.Add(1)); n <= len(fails) {
			return true, nil, fails[n-1]
		}
		return false, nil, nil
	})
	fc := clocktesting.NewFakeClock(time.Now())
	rec := record.NewFakeRecorder(20)
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid",
		Parent: fake.NewClientset(parentPod), ParentPods: corelisters.NewPodLister(parentPods), Child: child,
		Recorder: rec, Clock: fc})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	got := make(chan *corev1.Pod, 10)
	p.NotifyPods(t.Context(), func(pod *corev1.Pod) { got <- pod })
	return p, child, fc, rec, got
}

func neverPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-1", Namespace: "app", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "leaf", SchedulerName: "nestlet-scheduler", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

// A pod with restartPolicy Never sent while this cluster's API server is
// down is not failed: its delegate is created once the server is back,
// and the parent pod carries a Warning event meanwhile.
func TestCreateRetriesWhileTheAPIServerIsDown(t *testing.T) {
	pod := neverPod()
	p, child, fc, rec, got := runFailing(t, pod, refused, apierrors.NewServiceUnavailable("starting"))
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	select {
	case e := <-rec.Events:
		require.Contains(t, e, api.ReasonDelegateRetry)
		require.Contains(t, e, "connection refused")
	default:
		t.Fatal("no event on the parent pod")
	}
	_, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))

	// The second attempt, a second later, meets a server still starting;
	// the third, two seconds after it, creates the delegate.
	for _, step := range []time.Duration{retryBase, 2 * retryBase} {
		require.Eventually(t, fc.HasWaiters, 5*time.Second, 10*time.Millisecond)
		fc.Step(step)
	}
	require.Eventually(t, func() bool {
		_, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "delegate never created")
	// The namespace was made here, with its default service account (a
	// pod is refused until there is one).
	_, err = child.CoreV1().ServiceAccounts("app").Get(t.Context(), "default", metav1.GetOptions{})
	require.NoError(t, err)
	select {
	case sent := <-got:
		require.NotEqual(t, corev1.PodFailed, sent.Status.Phase, "the parent pod was failed: %s", sent.Status.Message)
	default:
	}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.retries) == 0
	}, 5*time.Second, 10*time.Millisecond, "retry state left")
}

// An error that does not pass goes to virtual-kubelet at once; one met by
// a retry fails a Never pod, as virtual-kubelet would have.
func TestRetryEndsOnAPermanentError(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "job-1", nil)

	pod := neverPod()
	p, _, _, _, _ := runFailing(t, pod, forbidden)
	require.Error(t, p.CreatePod(t.Context(), pod.DeepCopy()))

	pod = neverPod()
	p, _, fc, _, got := runFailing(t, pod, refused, forbidden)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	require.Eventually(t, fc.HasWaiters, 5*time.Second, 10*time.Millisecond)
	fc.Step(retryBase)
	select {
	case sent := <-got:
		require.Equal(t, corev1.PodFailed, sent.Status.Phase)
		require.Equal(t, api.ReasonProviderFailed, sent.Status.Reason)
		require.True(t, strings.Contains(sent.Status.Message, "forbidden"), sent.Status.Message)
	case <-time.After(5 * time.Second):
		t.Fatal("the parent pod was not failed")
	}
}

func TestTransient(t *testing.T) {
	require.True(t, transient(refused))
	require.True(t, transient(apierrors.NewTooManyRequests("busy", 1)))
	require.True(t, transient(apierrors.NewTimeoutError("slow", 1)))
	require.False(t, transient(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", nil)))
	require.False(t, transient(apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "x", nil)))
	require.False(t, transient(nil))
	// kube-apiserver's ServiceAccount admission, in a namespace made
	// moments ago.
	noSA := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x",
		errors.New(`error looking up service account app/default: serviceaccount "default" not found`))
	require.True(t, transient(fmt.Errorf("creating delegate: %w", noSA)))
	// The authorizer refusing the agent's identity: an API server that
	// has just started, before it loaded its roles and bindings.
	authz := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "",
		errors.New(`User "system:serviceaccount:nestlet-system:nestlet-agent" cannot create resource "namespaces" in API group "" at the cluster scope`))
	require.True(t, transient(fmt.Errorf("creating namespace: %w", authz)))
	// A quota refusing the object is not the identity.
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"))
	require.False(t, transient(quota))
}
