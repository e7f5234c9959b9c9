package forward

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An event about a delegate (Warning or Normal, as a kubelet's Started) is
// recorded again on its parent pod, and again each time its count grows;
// the child's scheduling, events about other pods and events older than the
// reflector are not.
func TestEventsGoUp(t *testing.T) {
	pod := neverPod()
	p, child, fc, rec, _ := runFailing(t, pod)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	var d *corev1.Pod
	require.Eventually(t, func() bool { d = p.delegateOf("app", "job-1", ""); return d != nil }, 5*time.Second, 10*time.Millisecond)
	// A fake clientset drops what happens between an informer's list and
	// its watch: wait for the events' watch.
	require.Eventually(t, func() bool { return watched(child, "events") }, 5*time.Second, time.Millisecond, "the events are watched")
	now := metav1.NewTime(fc.Now())
	event := func(name, typ, reason string, about corev1.ObjectReference, count int32, at metav1.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"}, InvolvedObject: about,
			Type: typ, Reason: reason, Message: reason + " happened", Count: count, LastTimestamp: at, FirstTimestamp: at}
	}
	delegate := corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: d.Name, UID: d.UID}
	other := corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "someone-else", UID: "x"}
	events := child.CoreV1().Events("app")
	for _, e := range []*corev1.Event{
		event("old", corev1.EventTypeWarning, "Old", delegate, 1, metav1.NewTime(now.Add(-time.Hour))),
		event("scheduled", corev1.EventTypeNormal, "Scheduled", delegate, 1, now),
		event("stranger", corev1.EventTypeWarning, "Stranger", other, 1, now),
		event("started", corev1.EventTypeNormal, "Started", delegate, 1, now),
		event("probe", corev1.EventTypeWarning, "Unhealthy", delegate, 1, now),
	} {
		_, err := events.Create(t.Context(), e, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	next := func() string {
		t.Helper()
		select {
		case e := <-rec.Events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event on the parent pod")
			return ""
		}
	}
	require.Equal(t, "Normal Started Started happened", next(), "only the delegate's recent events go up")
	require.Equal(t, "Warning Unhealthy Unhealthy happened", next(), "only the delegate's recent events go up")

	e, err := events.Get(t.Context(), "probe", metav1.GetOptions{})
	require.NoError(t, err)
	e.Count = 2
	_, err = events.Update(t.Context(), e, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "Warning Unhealthy Unhealthy happened", next(), "it happened again")

	// A change that is no new occurrence, then a marker: the marker is
	// the next event up.
	e.Annotations = map[string]string{"touched": "yes"}
	_, err = events.Update(t.Context(), e, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = events.Create(t.Context(), event("marker", corev1.EventTypeWarning, "Marker", delegate, 1, now), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "Warning Marker Marker happened", next())
}
