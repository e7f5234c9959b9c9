package forward

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// The Pod Security Standards a child holds a parent's pods to (Target
// spec.podSecurity), judged by the checks of Kubernetes' own Pod Security
// Admission, at their latest version: what the child's admission would
// refuse in a namespace labelled with that level is refused here before a
// delegate is made, with the same words, so that the parent's pod says why
// (it stays Pending there while another cluster may take it). The
// namespaces made for the parent are labelled with the level as well
// (namespaceLabels), so the child's own admission enforces it on
// anything else made in them.
var (
	psaOnce      sync.Once
	psaEvaluator policy.Evaluator
	psaErr       error
)

func evaluator() (policy.Evaluator, error) {
	psaOnce.Do(func() { psaEvaluator, psaErr = policy.NewEvaluator(policy.DefaultChecks(), nil) })
	return psaEvaluator, psaErr
}

// ValidPodSecurity tells whether level is a Pod Security level ("" is
// privileged).
func ValidPodSecurity(level string) error {
	if level == "" {
		return nil
	}
	_, err := psaapi.ParseLevel(level)
	return err
}

// podSecurityViolation returns why pod does not meet the level, or "".
func podSecurityViolation(level, cluster string, pod *corev1.Pod) string {
	if level == "" || level == string(psaapi.LevelPrivileged) {
		return ""
	}
	lvl, err := psaapi.ParseLevel(level)
	if err != nil {
		return fmt.Sprintf("cluster %s holds this parent's pods to Pod Security level %q, which is not one (privileged, baseline, restricted): its admin must fix the Target", cluster, level)
	}
	ev, err := evaluator()
	if err != nil {
		return fmt.Sprintf("cluster %s cannot judge Pod Security level %s: %v", cluster, level, err)
	}
	res := policy.AggregateCheckResults(ev.EvaluatePod(psaapi.LevelVersion{Level: lvl, Version: psaapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return ""
	}
	return fmt.Sprintf("violates PodSecurity %q, the level cluster %s holds this parent's pods to (Target spec.podSecurity): %s", level+":latest", cluster, res.ForbiddenDetail())
}

// namespaceLabels are the labels of a namespace this forwarder makes.
func (p *Provider) namespaceLabels() map[string]string {
	l := map[string]string{LabelNamespaceManagedBy: NamespaceManagedBy}
	if p.cfg.PodSecurity != "" {
		l[psaapi.EnforceLevelLabel] = p.cfg.PodSecurity
		l[psaapi.EnforceVersionLabel] = psaapi.VersionLatest
	}
	return l
}
