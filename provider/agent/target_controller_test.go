package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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

func TestDeleteOwnNode(t *testing.T) {
	const ownUID = "kube-system-uid-1"
	node := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", UID: types.UID("node-uid"), Annotations: annotations}}
	}
	tests := []struct {
		name        string
		node        *corev1.Node // in the parent; nil for none
		wantDeleted bool
		wantErr     func(error) bool
	}{
		{name: "own node is deleted", node: node(map[string]string{"nestlet.io/cluster-uid": ownUID}), wantDeleted: true},
		{name: "another cluster's node is kept", node: node(map[string]string{"nestlet.io/cluster-uid": "someone-else"})},
		{name: "a node without cluster uid is kept", node: node(nil)},
		{name: "a missing node is NotFound", wantErr: apierrors.IsNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.node != nil {
				require.NoError(t, client.Tracker().Add(tt.node))
			}
			err := deleteOwnNode(t.Context(), client, "child", ownUID)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, tt.wantErr(err), "unexpected error %v", err)
			} else {
				require.NoError(t, err)
			}

			var deletes []k8stesting.DeleteActionImpl
			for _, a := range client.Actions() {
				if d, ok := a.(k8stesting.DeleteActionImpl); ok {
					deletes = append(deletes, d)
				}
			}
			_, getErr := client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
			if !tt.wantDeleted {
				assert.Empty(t, deletes, "unexpected delete")
				if tt.node != nil {
					assert.NoError(t, getErr, "node was removed")
				}
				return
			}
			assert.True(t, apierrors.IsNotFound(getErr), "node still exists: %v", getErr)
			require.Len(t, deletes, 1)
			uid := types.UID("node-uid")
			want := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
			if d := cmp.Diff(want, deletes[0].DeleteOptions); d != "" {
				t.Errorf("delete options mismatch (-want +got):\n%s", d)
			}
			assert.Equal(t, "child", deletes[0].Name)
		})
	}
}
