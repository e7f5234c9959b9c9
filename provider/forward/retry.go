package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
)

// A write of a delegate that fails because this cluster's API server is
// out for a moment (restarting, unreachable, overloaded) is retried here,
// and virtual-kubelet is told it went well. Told of the error, virtual-
// kubelet would mark the parent pod Failed if its restartPolicy is Never
// (and Pending if it is running), for an outage the agent tolerates
// (--apiserver-outage-tolerance) and the parent does not see: the virtual
// node stays Ready meanwhile. The parent pod stays as it is, with a
// Warning event that says why its delegate is late.

// Backoff of the retries: retryBase doubled per attempt up to retryCap,
// which stays short: an error that passes includes the parent being out of
// reach while the dependencies are copied, and a retry then waiting 30 s
// slowed convergence after a partition's heal (BenchmarkSoak, seed
// 1795533498491370037: 31 s with a 30 s cap, 1.5 s with 5 s).
const (
	retryBase = time.Second
	retryCap  = 5 * time.Second
)

// retryState is the retry of one parent pod's delegate.
type retryState struct {
	attempts int
	timer    clock.Timer
}

// transient reports whether err passes by itself: the API server
// unreachable, restarting, timing out or shedding load, a pod refused
// because its namespace's default service account is not made yet (this
// cluster's controller manager makes it, once it is back too), a token
// refused by a parent that has not yet seen the pod bound here
// (errParentLags), or the agent's identity refused by the authorizer
// (refusedIdentity).
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, errRelayUnknown) || errors.Is(err, errHeldGone) || errors.Is(err, errParentLags) || errors.Is(err, errNamespaceTerminating) ||
		apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	if apierrors.IsForbidden(err) && (strings.Contains(err.Error(), "error looking up service account") || refusedIdentity(err)) {
		return true
	}
	var netErr net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

// refusedIdentity reports whether err is the authorizer refusing the
// agent's own identity a verb ("... is forbidden: User "..." cannot ..."),
// not an admission plugin or a quota refusing the object. An API server
// that has just started refuses so until its authorizer has loaded the
// roles and bindings, for a few seconds, whatever the agent is granted; a
// permission that is really missing (an edited chart) is retried with an
// event that names it, and the pod waits, as it does for a quota.
func refusedIdentity(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, `is forbidden: User "`) && strings.Contains(msg, `" cannot `)
}

// orRetry returns err to virtual-kubelet unless it is transient, in which
// case the write of pod's delegate is retried later and nil is returned.
func (p *Provider) orRetry(pod *corev1.Pod, err error) error {
	if err == nil || !transient(err) || p.ctx.Err() != nil {
		p.forgetRetry(pod.UID)
		return err
	}
	p.retryLater(pod, err)
	return nil
}

// retryLater schedules the next attempt for pod, unless one is scheduled.
func (p *Provider) retryLater(pod *corev1.Pod, err error) {
	p.mu.Lock()
	r := p.retries[pod.UID]
	if r == nil {
		r = &retryState{}
		p.retries[pod.UID] = r
	}
	if r.timer != nil {
		p.mu.Unlock()
		return
	}
	r.attempts++
	delay := min(retryBase<<min(r.attempts-1, 10), retryCap)
	ns, name, uid := pod.Namespace, pod.Name, pod.UID
	r.timer = p.cfg.Clock.AfterFunc(delay, func() { go p.retryNow(ns, name, uid) })
	first := r.attempts == 1
	p.mu.Unlock()
	p.cfg.Metrics.errors.WithLabelValues(p.cfg.TargetName, "transient").Inc()
	klog.FromContext(p.ctx).V(2).Info("Writing a delegate failed for a passing reason; retrying", "pod", klog.KObj(pod), "in", delay, "err", err)
	if first {
		var why string
		switch {
		case errors.Is(err, errRelayUnknown):
			why = "retrying until cluster %s's parent has said (within 30 s of the connection)"
		case errors.Is(err, errParentLags):
			why = "the parent's API server reads pods from a cache that trails by a moment what cluster %s's agent saw; retrying"
		case refusedIdentity(err):
			why = "cluster %s's API server refused the agent this: an API server refuses so for a few seconds after it starts, " +
				"else the agent's RBAC lacks it (the chart grants it); retrying"
		default:
			why = "cluster %s's API server is out for now; retrying until it is back"
		}
		p.cfg.Recorder.Event(pod, corev1.EventTypeWarning, api.ReasonDelegateRetry, fmt.Sprintf("%v: "+why, err, p.cfg.ClusterName))
	}
}

// retryNow writes the delegate of the parent pod ns/name again, if that
// pod is still the one (uid) and still wants it.
func (p *Provider) retryNow(ns, name string, uid types.UID) {
	p.mu.Lock()
	if r := p.retries[uid]; r != nil {
		r.timer = nil
	}
	p.mu.Unlock()
	pod, err := p.cfg.ParentPods.Pods(ns).Get(name)
	if err != nil || pod.UID != uid || pod.DeletionTimestamp != nil || terminal(pod) || p.ctx.Err() != nil {
		p.forgetRetry(uid)
		return
	}
	err = p.updatePod(p.ctx, pod.DeepCopy())
	switch {
	case err == nil:
		p.forgetRetry(uid)
	case transient(err):
		p.retryLater(pod, err)
	case p.delegateOf(ns, name, uid) == nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		// No longer a passing error: what virtual-kubelet does with it,
		// for a pod it will not look at again.
		p.forgetRetry(uid)
		p.fail(pod, nil, api.ReasonProviderFailed, err.Error())
	default:
		// virtual-kubelet would retry this too, at its own pace.
		p.cfg.Recorder.Event(pod, corev1.EventTypeWarning, api.ReasonProviderFailed, err.Error())
		p.retryLater(pod, err)
	}
}

// forgetRetry cancels what is scheduled for the parent pod uid.
func (p *Provider) forgetRetry(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.retries[uid]; r != nil {
		if r.timer != nil {
			r.timer.Stop()
		}
		delete(p.retries, uid)
	}
}
