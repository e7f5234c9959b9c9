package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// progressDelay is how long a join may take before its progress (joining,
// awaiting approval) is written to the Target's status: a quick join
// writes its outcome only, one status write instead of one per step.
const progressDelay = 2 * time.Second

// runStatus is what a runner has to write to its Target's status.
type runStatus struct {
	mu sync.Mutex
	// id is the identity of the current run, recorded as Joined with the
	// Ready condition.
	id *join.Identity
	// lastReport is the report time last written.
	lastReport time.Time
	// step is a progress step not written yet, armed while a timer will
	// write it.
	step  *metav1.Condition
	armed bool
	// cidr is the pod CIDR condition the Ready write records when the
	// Target has none yet.
	cidr *metav1.Condition
}

// setPodCIDRs records the pod CIDRs the run reports, for the Ready write.
func (r *targetRun) setPodCIDRs(own []string) {
	c := podCIDRPending(own)
	r.status.mu.Lock()
	r.status.cidr = &c
	r.status.mu.Unlock()
}

// heldIdentity reports whether a run of this runner held an identity.
func (r *targetRun) heldIdentity() bool {
	r.status.mu.Lock()
	defer r.status.mu.Unlock()
	return r.status.id != nil
}

// setIdentity records the identity the run holds.
func (r *targetRun) setIdentity(id *join.Identity) {
	r.status.mu.Lock()
	r.status.id = id
	r.status.mu.Unlock()
}

// progress records a step of a join that may take a while. It is written
// once the join has taken progressDelay without an outcome, then at once
// for the steps after.
func (r *targetRun) progress(ctx context.Context, reason, msg string) {
	s := &r.status
	s.mu.Lock()
	s.step = &metav1.Condition{Reason: reason, Message: msg}
	arm := !s.armed
	s.armed = true
	s.mu.Unlock()
	if !arm {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-r.a.cfg.Clock.After(progressDelay):
		}
		s.mu.Lock()
		defer s.mu.Unlock() // an outcome waits for this write: it comes after
		step := s.step
		s.step, s.armed = nil, false
		if step != nil && ctx.Err() == nil {
			r.a.status.set(ctx, r.target.Name, r.generation, nil,
				metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionFalse, Reason: step.Reason, Message: step.Message},
				metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: step.Reason, Message: step.Message})
		}
	}()
}

// Reasons that leave the Joined condition as it is (the identity is fine).
var joinedReasons = map[string]bool{v1alpha1.ReasonNameTaken: true, v1alpha1.ReasonNodeError: true, v1alpha1.ReasonChildNotReady: true}

// setReady writes an outcome: the Ready condition; Joined with the
// identity held (on success, and on failures that leave the identity
// fine) or Joined=False; on success also the node name, the report time
// (registering the node reported the summary) and a pending pod CIDR
// check. One status write.
func (r *targetRun) setReady(ctx context.Context, status metav1.ConditionStatus, reason, msg string) {
	s := &r.status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = nil // not written now: this outcome supersedes it
	conds := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}}
	var mutations []func(*v1alpha1.TargetStatus)
	switch {
	case s.id != nil && (status == metav1.ConditionTrue || joinedReasons[reason]):
		cond, mutate := r.joined(s.id)
		conds = append(conds, cond)
		mutations = append(mutations, mutate)
	case status == metav1.ConditionFalse && !joinedReasons[reason]:
		conds = append(conds, metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
	if status == metav1.ConditionTrue {
		now := r.a.cfg.Clock.Now()
		s.lastReport = now
		ts := metav1.NewTime(now)
		name := r.target.Spec.ClusterName
		mutations = append(mutations, func(st *v1alpha1.TargetStatus) {
			st.NodeName = name
			st.LastReportTime = &ts
			if c := s.cidr; c != nil && meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPodCIDRsDistinct) == nil {
				c.ObservedGeneration = r.generation
				meta.SetStatusCondition(&st.Conditions, *c)
			}
		})
	}
	r.a.status.set(ctx, r.target.Name, r.generation, func(st *v1alpha1.TargetStatus) {
		for _, m := range mutations {
			m(st)
		}
	}, conds...)
}

// setJoined writes the identity held (after a renewal).
func (r *targetRun) setJoined(ctx context.Context) {
	s := &r.status
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == nil {
		return
	}
	cond, mutate := r.joined(s.id)
	r.a.status.set(ctx, r.target.Name, r.generation, mutate, cond)
}

// joined returns the Joined condition and status fields of id.
func (r *targetRun) joined(id *join.Identity) (metav1.Condition, func(*v1alpha1.TargetStatus)) {
	expiry := metav1.NewTime(id.NotAfter())
	return metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonJoined,
			Message: fmt.Sprintf("this cluster holds the identity %s in the parent until %s", join.NodeUser(r.target.Spec.ClusterName), id.NotAfter().UTC().Format(time.RFC3339))},
		func(st *v1alpha1.TargetStatus) {
			st.CertificateExpiry = &expiry
			st.ParentClusterName = id.ParentClusterName
		}
}

// reported records the time of the last report, at most once per report
// period.
func (r *targetRun) reported(ctx context.Context, at time.Time) {
	s := &r.status
	s.mu.Lock()
	if at.Sub(s.lastReport) < reportFrequency(r.target) {
		s.mu.Unlock()
		return
	}
	s.lastReport = at
	s.mu.Unlock()
	ts := metav1.NewTime(at)
	r.a.status.set(ctx, r.target.Name, r.generation, func(st *v1alpha1.TargetStatus) { st.LastReportTime = &ts })
}
