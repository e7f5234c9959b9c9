package forward

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
)

// overLimits tells why pod would take the parent past what this cluster
// lets its pods request in all (Config.Limits, Target spec.limits), or
// "". The virtual node shows the parent no more than the limits
// (provider/summary), so its scheduler seldom asks for more; this is the
// check where it does (a summary not yet reported, a pod bound first).
// Every live delegate of this Target counts, held ones too, but pod's own.
func (p *Provider) overLimits(pod *corev1.Pod) string {
	if len(p.cfg.Limits) == 0 {
		return ""
	}
	used := corev1.ResourceList{}
	delegates, _ := p.lister.List(labels.Everything())
	for _, d := range delegates {
		if !live(d) || originUID(d) == pod.UID {
			continue
		}
		addTo(used, requestsOf(d))
	}
	want := requestsOf(pod)
	var over []string
	for name, limit := range p.cfg.Limits {
		asked, ok := want[name]
		if !ok || asked.IsZero() {
			continue
		}
		total := used[name].DeepCopy()
		total.Add(asked)
		if total.Cmp(limit) > 0 {
			u := used[name]
			over = append(over, fmt.Sprintf("%s %s asked, %s taken of %s", name, asked.String(), u.String(), limit.String()))
		}
	}
	if len(over) == 0 {
		return ""
	}
	sort.Strings(over)
	return fmt.Sprintf("cluster %s caps what this parent's pods request there (Target spec.limits): %s", p.cfg.ClusterName, strings.Join(over, "; "))
}

// requestsOf is what pod requests, one "pods" included.
func requestsOf(pod *corev1.Pod) corev1.ResourceList {
	reqs := resourcehelper.PodRequests(pod.DeepCopy(), resourcehelper.PodResourcesOptions{})
	reqs[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return reqs
}

func addTo(sum, l corev1.ResourceList) {
	for name, q := range l {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}
