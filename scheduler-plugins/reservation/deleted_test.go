package reservation

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod deleted while its reservation below is pending has it withdrawn,
// whether the informer's delete or the framework's Unreserve comes first
// (the delete used to forget the request, and Unreserve then had nothing
// to withdraw: the child held the place until its agent collected it).
// A child keeping the pod waiting for room is withdrawn once, by
// withdrawWaiting.
func TestDeletedPodWithdrawnBelow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		keep, virtual bool
		want          []string
	}{
		{"held below", false, true, []string{"east"}},
		{"real node", false, false, nil},
		{"waiting for room", true, true, []string{"east"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(t.Context(), nil, nil)
			require.NoError(t, err)
			pl := p.(*Reservation)
			var mu sync.Mutex
			var withdrawn []string
			pl.withdraw = func(_ context.Context, _ *corev1.Pod, node string) {
				mu.Lock()
				defer mu.Unlock()
				withdrawn = append(withdrawn, node)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
			pl.pending[pod.UID] = &request{node: "east", cancel: func() {}, virtual: tc.virtual, keep: tc.keep}
			if tc.keep {
				pl.waitingIn[pod.UID] = map[string]bool{"east": true}
			}
			pl.deleted(pod)
			pl.Unreserve(t.Context(), nil, pod, "east")
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(withdrawn) == len(tc.want)
			}, 5*time.Second, 10*time.Millisecond)
			time.Sleep(50 * time.Millisecond) // no second withdrawal follows
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.want, withdrawn)
			require.Empty(t, pl.pending)
		})
	}
}
