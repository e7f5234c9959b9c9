package framework

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// A pod seen created and then bound counts its time to bound; a pod first
// seen already bound (its creation missed) is Late, left out by OnTime
// instead of counting as bound at once.
func TestPodTimesLeaveOutPodsSeenLate(t *testing.T) {
	s := NewPodTimes()
	t0 := time.Unix(1000, 0)
	unbound := &corev1.Pod{}
	bound := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
	s.see("on-time", unbound, t0)
	s.see("on-time", bound, t0.Add(300*time.Millisecond))
	s.see("late", bound, t0.Add(time.Second))
	s.see("late", bound, t0.Add(2*time.Second))

	require.Equal(t, map[string]bool{"late": true}, s.Late)
	require.ElementsMatch(t, []time.Duration{300 * time.Millisecond, 0}, Diffs(s.Added, s.Bound), "without OnTime the late pod counts as bound at once")
	require.Equal(t, []time.Duration{300 * time.Millisecond}, Diffs(s.OnTime(s.Added), s.Bound))
	// The late pod is still counted where counts matter.
	require.Len(t, s.Bound, 2)
}
