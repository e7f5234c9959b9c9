package forward

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/summary"
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
		summary.AddTo(used, summary.PodRequests(d))
	}
	want := summary.PodRequests(pod)
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

// overStorage tells why the claims pod names would take the parent past
// the storage this cluster lets its claims request in all (Config.Limits
// "storage"), or "". The claims this Target made here count; a claim
// made already (for another pod, or an earlier attempt) counts once. Pods
// with claims are bound first, never reserved (Reservable): this is
// checked when the delegate is made.
func (p *Provider) overStorage(ctx context.Context, pod *corev1.Pod) (string, error) {
	limit, ok := p.cfg.Limits[corev1.ResourceStorage]
	names := claimNames(pod)
	if !ok || len(names) == 0 {
		return "", nil
	}
	selector := labels.SelectorFromSet(labels.Set{api.LabelTargetUID: string(p.cfg.TargetUID)}).String()
	list, err := p.cfg.Child.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", fmt.Errorf("listing the claims made here for %s: %w", p.cfg.ParentName, err)
	}
	var used, asked resource.Quantity
	made := map[string]bool{}
	for i := range list.Items {
		pvc := &list.Items[i]
		if pvc.DeletionTimestamp == nil {
			used.Add(pvc.Spec.Resources.Requests[corev1.ResourceStorage])
			made[pvc.Namespace+"/"+pvc.Name] = true
		}
	}
	for _, name := range names {
		if made[p.ns(pod.Namespace)+"/"+name] {
			continue
		}
		claim, err := p.cfg.Parent.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading claim %s/%s in %s: %w", pod.Namespace, name, p.cfg.ParentName, err)
		}
		asked.Add(claim.Spec.Resources.Requests[corev1.ResourceStorage])
	}
	total := used.DeepCopy()
	total.Add(asked)
	if asked.IsZero() || total.Cmp(limit) <= 0 {
		return "", nil
	}
	return fmt.Sprintf("cluster %s caps the storage this parent's claims request there (Target spec.limits): storage %s asked, %s taken of %s",
		p.cfg.ClusterName, asked.String(), used.String(), limit.String()), nil
}
