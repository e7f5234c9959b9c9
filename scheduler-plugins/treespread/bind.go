package treespread

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Reserve chooses, when the pod goes to a virtual node, the domains inside
// the child it goes to: of those that keep the required constraints, the
// one holding the fewest matching pods. Pods scheduled before the binding
// is seen count the pod there.
func (pl *TreeSpread) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return nil // no constraint: PreFilter skipped
	}
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil || ni.Node() == nil || !virtualnode.IsVirtual(ni.Node()) {
		return nil
	}
	best, ok := choose(s, pl.placements(s, pod, ni.Node()))
	if !ok {
		return nil
	}
	domains := map[string]string{}
	for i, c := range s.constraints {
		if best.inside[i] && best.values[i] != "" {
			domains[c.key] = best.values[i]
		}
	}
	if len(domains) == 0 {
		return nil
	}
	state.Write(virtualnode.DomainsStateKey, virtualnode.ChosenDomains(domains))
	now := time.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for uid, r := range pl.chosen {
		if now.Sub(r.at) > reservationTTL {
			delete(pl.chosen, uid)
		}
	}
	pl.chosen[pod.UID] = reservation{domains: domains, at: now}
	return nil
}

// choose returns the placement that keeps the required constraints with the
// fewest matching pods, or the one with the fewest when none keeps them (a
// placement the filter let through moments ago).
func choose(s *spreadState, choices []placement) (placement, bool) {
	var best placement
	found, bestFits, bestHard, bestSoft := false, false, 0, 0
	for _, c := range choices {
		fits := s.fits(c.values)
		hard, soft := s.load(c.values)
		better := !found || (fits && !bestFits) ||
			(fits == bestFits && (hard < bestHard || (hard == bestHard && soft < bestSoft)))
		if better {
			best, found, bestFits, bestHard, bestSoft = c, true, fits, hard, soft
		}
	}
	return best, found
}

// Unreserve forgets the domains chosen for a pod that is not bound.
func (pl *TreeSpread) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	pl.forget(pod)
}

func (pl *TreeSpread) forget(pod *corev1.Pod) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.chosen, pod.UID)
}

// Bind binds the pod, as the default binder does, and for a pod for which
// Reserve chose domains, with the domains in the Binding's annotations,
// which the API server sets on the pod as it binds it: no extra write.
func (pl *TreeSpread) Bind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	pl.mu.Lock()
	r, chosen := pl.chosen[pod.UID]
	pl.mu.Unlock()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if chosen {
		binding.Annotations = map[string]string{api.AnnotationDomains: api.FormatDomains(r.domains)}
	}
	// As the default binder: through the scheduler's API cacher when it
	// has one (asynchronous API calls), else directly.
	if c := pl.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("binding %s/%s to %s: %w", pod.Namespace, pod.Name, nodeName, err))
		}
		return nil
	}
	if err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("binding %s/%s to %s: %w", pod.Namespace, pod.Name, nodeName, err))
	}
	return nil
}
