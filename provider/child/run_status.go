package child

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// progressDelay is how long a join may take before its progress (joining,
// awaiting approval) is written to the Target's status: a quick join
// writes its outcome only, one status write instead of one per step.
const progressDelay = 2 * time.Second

// decorationWait bounds how long a run waits for the parent's agent to
// decorate its node before it writes Ready without the parent's verdicts
// (a parent whose agent is down, or older than the decorations).
const decorationWait = 2 * time.Second

// runStatus writes what one run of a Target has to say in the Target's
// status: its join's progress, its outcome, its identity, its reports. It
// writes through the agent's statusWriter, for the run's generation only.
type runStatus struct {
	writer     *statusWriter
	target     *v1alpha1.Target
	generation int64
	clock      clock.Clock

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

func newRunStatus(w *statusWriter, t *v1alpha1.Target, clk clock.Clock) *runStatus {
	return &runStatus{writer: w, target: t, generation: t.Generation, clock: clk}
}

// set writes conditions of the run's generation.
func (s *runStatus) set(ctx context.Context, conds ...metav1.Condition) {
	s.writer.set(ctx, s.target.Name, s.generation, nil, conds...)
}

// setPodCIDRs records the pod CIDRs the run reports, for the Ready write.
func (s *runStatus) setPodCIDRs(own []string) {
	c := podCIDRPending(own)
	s.mu.Lock()
	s.cidr = &c
	s.mu.Unlock()
}

// heldIdentity reports whether a run of this generation held an identity.
func (s *runStatus) heldIdentity() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id != nil
}

// setIdentity records the identity the run holds. The join's steps are
// over: a step not written yet is not written (the outcome follows).
func (s *runStatus) setIdentity(id *join.Identity) {
	s.mu.Lock()
	s.id, s.step = id, nil
	s.mu.Unlock()
}

// progress records a step of a join that may take a while. It is written
// once the join has taken progressDelay without an outcome, then at once
// for the steps after.
func (s *runStatus) progress(ctx context.Context, reason, msg string) {
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
		case <-s.clock.After(progressDelay):
		}
		s.mu.Lock()
		defer s.mu.Unlock() // an outcome waits for this write: it comes after
		step := s.step
		s.step, s.armed = nil, false
		if step != nil && ctx.Err() == nil {
			s.set(ctx,
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
// check (unless extra, other conditions to write with it, holds one).
// One status write.
func (s *runStatus) setReady(ctx context.Context, status metav1.ConditionStatus, reason, msg string, extra ...metav1.Condition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = nil // not written now: this outcome supersedes it
	conds := append([]metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}}, extra...)
	var mutations []func(*v1alpha1.TargetStatus)
	switch {
	case s.id != nil && (status == metav1.ConditionTrue || joinedReasons[reason]):
		cond, mutate := s.joined(s.id)
		conds = append(conds, cond)
		mutations = append(mutations, mutate)
	case status == metav1.ConditionFalse && !joinedReasons[reason]:
		conds = append(conds, metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
	if status == metav1.ConditionTrue {
		now := s.clock.Now()
		s.lastReport = now
		ts := metav1.NewTime(now)
		name := s.target.Spec.ClusterName
		mutations = append(mutations, func(st *v1alpha1.TargetStatus) {
			st.NodeName = name
			st.LastReportTime = &ts
			if c := s.cidr; c != nil && meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPodCIDRsDistinct) == nil {
				c.ObservedGeneration = s.generation
				meta.SetStatusCondition(&st.Conditions, *c)
			}
		})
	}
	s.writer.set(ctx, s.target.Name, s.generation, func(st *v1alpha1.TargetStatus) {
		for _, m := range mutations {
			m(st)
		}
	}, conds...)
}

// setJoined writes the identity held (after a renewal).
func (s *runStatus) setJoined(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == nil {
		return
	}
	cond, mutate := s.joined(s.id)
	s.writer.set(ctx, s.target.Name, s.generation, mutate, cond)
}

// joined returns the Joined condition and status fields of id.
func (s *runStatus) joined(id *join.Identity) (metav1.Condition, func(*v1alpha1.TargetStatus)) {
	expiry := metav1.NewTime(id.NotAfter())
	return metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonJoined,
			Message: fmt.Sprintf("this cluster holds the identity %s in the parent until %s", join.NodeUser(s.target.Spec.ClusterName), id.NotAfter().UTC().Format(time.RFC3339))},
		func(st *v1alpha1.TargetStatus) {
			st.CertificateExpiry = &expiry
			st.ParentClusterName = id.ParentClusterName
		}
}

// reported records the time of the last report, at most once per report
// period.
func (s *runStatus) reported(ctx context.Context, at time.Time) {
	s.mu.Lock()
	if at.Sub(s.lastReport) < reportFrequency(s.target) {
		s.mu.Unlock()
		return
	}
	s.lastReport = at
	s.mu.Unlock()
	ts := metav1.NewTime(at)
	s.writer.set(ctx, s.target.Name, s.generation, func(st *v1alpha1.TargetStatus) { st.LastReportTime = &ts })
}
