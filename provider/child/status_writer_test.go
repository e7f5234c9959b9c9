package child

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

func TestEqualStatus(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	base := func() *v1alpha1.TargetStatus {
		return &v1alpha1.TargetStatus{
			ObservedGeneration: 2,
			NodeName:           "child",
			ParentClusterName:  "parent",
			CertificateExpiry:  ts(time.Hour),
			LastReportTime:     ts(time.Minute),
			Conditions: []metav1.Condition{
				{Type: "Joined", Status: metav1.ConditionTrue, Reason: "Joined", Message: "m1", ObservedGeneration: 2, LastTransitionTime: *ts(0)},
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reporting", Message: "m2", ObservedGeneration: 2, LastTransitionTime: *ts(0)},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.TargetStatus)
		want   bool
	}{
		{name: "same", mutate: func(*v1alpha1.TargetStatus) {}, want: true},
		{name: "transition time is ignored", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[0].LastTransitionTime = *ts(time.Second) }, want: true},
		{name: "same times in other locations", mutate: func(s *v1alpha1.TargetStatus) {
			s.CertificateExpiry = &metav1.Time{Time: s.CertificateExpiry.In(time.FixedZone("x", 3600))}
		}, want: true},
		{name: "observed generation", mutate: func(s *v1alpha1.TargetStatus) { s.ObservedGeneration = 3 }},
		{name: "node name", mutate: func(s *v1alpha1.TargetStatus) { s.NodeName = "other" }},
		{name: "parent cluster name", mutate: func(s *v1alpha1.TargetStatus) { s.ParentClusterName = "" }},
		{name: "certificate expiry", mutate: func(s *v1alpha1.TargetStatus) { s.CertificateExpiry = ts(2 * time.Hour) }},
		{name: "certificate expiry unset", mutate: func(s *v1alpha1.TargetStatus) { s.CertificateExpiry = nil }},
		{name: "last report time", mutate: func(s *v1alpha1.TargetStatus) { s.LastReportTime = ts(2 * time.Minute) }},
		{name: "last report time unset", mutate: func(s *v1alpha1.TargetStatus) { s.LastReportTime = nil }},
		{name: "condition added", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions = append(s.Conditions, metav1.Condition{Type: "Other"}) }},
		{name: "condition removed", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions = s.Conditions[:1] }},
		{name: "condition type", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[1].Type = "Other" }},
		{name: "condition status", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[1].Status = metav1.ConditionFalse }},
		{name: "condition reason", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[1].Reason = "NodeError" }},
		{name: "condition message", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[1].Message = "other" }},
		{name: "condition observed generation", mutate: func(s *v1alpha1.TargetStatus) { s.Conditions[0].ObservedGeneration = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.mutate(b)
			assert.Equal(t, tt.want, equalStatus(a, b), "equalStatus(a, b)")
			assert.Equal(t, tt.want, equalStatus(b, a), "equalStatus(b, a)")
		})
	}
	t.Run("empty statuses", func(t *testing.T) {
		assert.True(t, equalStatus(&v1alpha1.TargetStatus{}, &v1alpha1.TargetStatus{}))
	})
}
