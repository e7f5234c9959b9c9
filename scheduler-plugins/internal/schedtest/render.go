// Package schedtest helps the plugins' tests check what users read.
package schedtest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// RenderFailure returns the FailedScheduling event a user reads when the
// scheduler could place pod on no node because one node answered status:
// kube-scheduler joins the plugins' reasons into a FitError and passes its
// text to the event recorder as the format (schedule_one.go,
// handleSchedulingFailure), so a reason holding '%' turns into "%!".
func RenderFailure(pod *corev1.Pod, node string, status *fwk.Status) string {
	nodes := framework.NewDefaultNodeToStatus()
	nodes.Set(node, status)
	fitErr := &framework.FitError{Pod: pod, NumAllNodes: 1, Diagnosis: framework.Diagnosis{NodeToStatus: nodes}}
	recorder := events.NewFakeRecorder(1)
	recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", fitErr.Error())
	return <-recorder.Events
}

// RequireCleanFailure fails the test when status is a failure whose
// rendering as the scheduler shows it holds a formatting error, and when
// that rendering lacks the status's own message.
func RequireCleanFailure(t testing.TB, pod *corev1.Pod, status *fwk.Status) {
	t.Helper()
	if status.IsSuccess() {
		return
	}
	got := RenderFailure(pod, "n", status)
	if strings.Contains(got, "%!") {
		t.Fatalf("the scheduler would show a formatting error: %q", got)
	}
	for _, reason := range status.Reasons() {
		if !strings.Contains(got, reason) {
			t.Fatalf("the event %q lacks the reason %q", got, reason)
		}
	}
}
