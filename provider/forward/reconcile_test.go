package forward

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readyStatus(ready corev1.ConditionStatus) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
	}}
}

// The parent's node lifecycle controller marked a pod NotReady (its node's
// lease lapsed) while its delegate stayed Ready: the delegate's status is
// sent again, keeping the conditions only the parent has. A status that
// says what the delegate says, or a pod being deleted, sends nothing.
func TestParentUpdatePutsBackTheDelegatesStatus(t *testing.T) {
	ready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u1", ResourceVersion: "5"},
		Spec: corev1.PodSpec{NodeName: "leaf"}, Status: readyStatus(corev1.ConditionTrue)}
	p, got := runWithDelegate(t, ready, readyStatus(corev1.ConditionTrue))
	// parentUpdated sends (or not) before it returns: nothing can come later.
	none := func(what string) {
		t.Helper()
		select {
		case pod := <-got:
			t.Fatalf("%s: sent %v", what, pod.Status)
		default:
		}
	}

	marked := ready.DeepCopy()
	marked.ResourceVersion = "6"
	marked.Status = readyStatus(corev1.ConditionFalse)
	marked.Status.Conditions = append(marked.Status.Conditions, corev1.PodCondition{Type: "DisruptionTarget", Status: corev1.ConditionTrue})
	p.parentUpdated(ready, marked)
	select {
	case pod := <-got:
		require.Equal(t, "6", pod.ResourceVersion, "built from the parent pod as it is now")
		require.Equal(t, corev1.ConditionTrue, conditionStatus(pod.Status, corev1.PodReady))
		require.Equal(t, corev1.ConditionTrue, conditionStatus(pod.Status, "DisruptionTarget"), "the parent's own condition kept")
		require.Equal(t, "10.0.0.7", pod.Status.PodIP)
	case <-time.After(5 * time.Second):
		t.Fatal("the delegate's status was not sent again")
	}

	// virtual-kubelet's write of it: the status agrees, nothing to do.
	p.parentUpdated(marked, ready)
	none("a status that says what the delegate says")
	// Only metadata changed.
	p.parentUpdated(marked, marked.DeepCopy())
	none("an update without a status change")
	// Being deleted: its status is the deletion's business.
	deleting := marked.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.parentUpdated(ready, deleting)
	none("a pod being deleted")
	// Another pod of the same name (a new UID): not this delegate's.
	other := marked.DeepCopy()
	other.UID = "u2"
	p.parentUpdated(ready, other)
	none("another pod of the same name")
}
