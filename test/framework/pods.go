package framework

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DescribePods says in one line per pod where each pod is and what keeps
// it from being Ready: its phase, node, the conditions not True with their
// reasons, and the containers waiting or terminated. For a test's message
// when a wait runs out.
func DescribePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "none"
	}
	var lines []string
	for _, p := range pods {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		if p.DeletionTimestamp != nil {
			b.WriteString(" (deleting)")
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, "; %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s terminated %s exit %d", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode)
			case !s.Ready:
				fmt.Fprintf(&b, "; %s running, not ready (restarts %d)", s.Name, s.RestartCount)
			}
		}
		lines = append(lines, b.String())
	}
	return strings.Join(lines, " | ")
}
