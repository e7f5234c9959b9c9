package child

import (
	"context"
	"errors"
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

	"github.com/nestlet/nestlet/api"
)

// A leaving child marks its own node, and only its own, and waits until
// the parent's agent deletes it (here a stand-in, deleting what
// api.Leaving says, as provider/parent's decorator does, whose own test
// checks its delete); without an agent in the parent the child says the
// node was not removed.
func TestDeleteOwnNode(t *testing.T) {
	const ownUID = "kube-system-uid-1"
	node := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", UID: types.UID("node-uid"), Annotations: annotations,
			Labels: map[string]string{api.LabelCluster: "child"}}}
	}
	tests := []struct {
		name        string
		node        *corev1.Node // in the parent; nil for none
		noAgent     bool         // no agent in the parent
		wantDeleted bool
		wantLeaving bool
		wantErr     func(error) bool
	}{
		{name: "own node is deleted by the parent's agent", node: node(map[string]string{"nestlet.io/cluster-uid": ownUID}), wantDeleted: true},
		{name: "without an agent in the parent it stays, marked", node: node(map[string]string{"nestlet.io/cluster-uid": ownUID}), noAgent: true,
			wantLeaving: true, wantErr: func(err error) bool { return errors.Is(err, errNodeNotRemoved) }},
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
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if tt.noAgent {
				ctx, cancel = context.WithTimeout(t.Context(), time.Second)
				defer cancel()
			} else {
				// The parent's agent: it deletes a node marked leaving,
				// that version only.
				go func() {
					for ctx.Err() == nil {
						n, err := client.CoreV1().Nodes().Get(ctx, "child", metav1.GetOptions{})
						if err == nil && api.Leaving(n) {
							_ = client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
						}
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			err := deleteOwnNode(ctx, client, "child", ownUID)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, tt.wantErr(err), "unexpected error %v", err)
			} else {
				require.NoError(t, err)
			}
			cancel()

			var deletes []k8stesting.DeleteActionImpl
			for _, a := range client.Actions() {
				if d, ok := a.(k8stesting.DeleteActionImpl); ok {
					deletes = append(deletes, d)
				}
			}
			got, getErr := client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
			if !tt.wantDeleted {
				assert.Empty(t, deletes, "unexpected delete")
				if tt.node != nil {
					require.NoError(t, getErr, "node was removed")
					assert.Equal(t, tt.wantLeaving, got.Annotations[api.AnnotationLeaving] == ownUID, "marked leaving")
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
