package framework

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// DaemonSetRefusal begins what the children's admission policy
// (charts/nestlet/policies/children.yaml) says when it refuses a
// DaemonSet's pod for a child's virtual node; the DaemonSet controller
// repeats it in a FailedCreate event on the DaemonSet.
const DaemonSetRefusal = "no DaemonSet's pod runs on a child cluster's virtual node"

// DaemonSetRefused reports whether the DaemonSet ns/name has a
// FailedCreate event saying the policy refused one of its pods, with the
// message that says so, or else what its events say (for Eventually).
func DaemonSetRefused(ctx context.Context, c kubernetes.Interface, ns, name string) (bool, string) {
	evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "reason": "FailedCreate"}.AsSelector().String()})
	if err != nil {
		return false, err.Error()
	}
	if len(evs.Items) == 0 {
		return false, "no FailedCreate event yet"
	}
	var others []string
	for _, e := range evs.Items {
		if strings.Contains(e.Message, DaemonSetRefusal) {
			return true, e.Message
		}
		others = append(others, e.Message)
	}
	return false, "FailedCreate for another reason: " + strings.Join(others, "; ")
}
