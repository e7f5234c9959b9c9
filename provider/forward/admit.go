package forward

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// DefaultTrustedSchedulers are the schedulers whose pods a virtual node
// takes without the toleration of its taint: Nestlet's own, which judges a
// virtual node by its summary rather than by the taint.
var DefaultTrustedSchedulers = []string{"nestlet-scheduler"}

// providerTaint is the taint every virtual node carries.
var providerTaint = api.ProviderTaint()

// admit tells why a pod bound to the virtual node must not be forwarded,
// or "" when it may. The virtual node is tainted so that only pods meant
// for the tree reach it; the agent checks again what a kubelet would,
// because anything can bind a pod (a client setting spec.nodeName, a
// scheduler that ignores taints):
//   - a DaemonSet's pod only where the parent relaxed the virtual node's
//     taint to PreferNoSchedule (daemonSets; api.TakesDaemonSets: a
//     cluster made only of clusters runs a DaemonSet once per child);
//     elsewhere each cluster runs its own DaemonSets, and a DaemonSet
//     tolerating every taint would otherwise run once per child on top of
//     the children's own;
//   - other pods when they tolerate the virtual nodes' taint (the scheduling
//     webhook gives it to the pods of opted-in namespaces) or name one of
//     the trusted schedulers, Nestlet's.
func admit(pod *corev1.Pod, trusted []string, daemonSets bool) string {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") && !daemonSets {
		return fmt.Sprintf("pod of DaemonSet %s is not forwarded to a child cluster: each cluster runs its own DaemonSets (restrict the DaemonSet to real nodes, e.g. with a nodeAffinity on %s NotIn [%s]; a parent made only of clusters runs DaemonSets once per child with --child-taint-effect=PreferNoSchedule)",
			ref.Name, api.LabelNodeType, api.NodeTypeVirtualKubelet)
	}
	if slices.Contains(trusted, pod.Spec.SchedulerName) {
		return ""
	}
	if corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &providerTaint, false) {
		return ""
	}
	return fmt.Sprintf("pod neither tolerates the virtual nodes' taint %s=%s:%s nor was placed by a Nestlet scheduler (%s; the pod has schedulerName %q): create it in a namespace the scheduling webhook serves, or give it schedulerName %s",
		providerTaint.Key, providerTaint.Value, providerTaint.Effect, strings.Join(trusted, ", "), pod.Spec.SchedulerName, firstOr(trusted, DefaultTrustedSchedulers[0]))
}

// admitHere tells why pod may not be forwarded to this cluster by what its
// admin accepts of this parent (Target spec.namespaces, podSecurity,
// limits; docs/tenants.md), or "".
func (p *Provider) admitHere(pod *corev1.Pod) string {
	if why := p.admitNamespace(pod); why != "" {
		return why
	}
	if why := podSecurityViolation(p.cfg.PodSecurity, p.cfg.ClusterName, pod); why != "" {
		return why
	}
	return p.overLimits(pod)
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

// takesDaemonSets reports whether this cluster's virtual node takes
// DaemonSets' pods (api.TakesDaemonSets), as its taints were last seen.
func (p *Provider) takesDaemonSets() bool {
	return p.cfg.NodeTaints != nil && api.TakesDaemonSets(p.cfg.NodeTaints())
}
