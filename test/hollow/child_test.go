package hollow

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

// TestChildAgentRuns runs a real agent over a simulated cluster whose
// parent does not answer: the agent reads the Target and the token Secret
// from the simulation and reports the failure in the Target's status.
func TestChildAgentRuns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	c, err := Start(t.Context(), Config{
		Name:   "lonely",
		Nodes:  2,
		Parent: Parent{URL: "https://" + addr, Token: "abcdef.0123456789abcdef", CACertHash: "sha256:" + strings.Repeat("0", 64)},
	})
	require.NoError(t, err)
	defer c.Stop()
	require.Equal(t, "parent-127-0-0-1-"+addr[strings.LastIndex(addr, ":")+1:], c.Target)

	var last *v1alpha1.Target
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		tg, err := c.Targets.Get(ctx, c.Target, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = tg
		for _, cond := range tg.Status.Conditions {
			if cond.Type == v1alpha1.ConditionJoined && cond.Reason == v1alpha1.ReasonParentUnreachable {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "last status: %+v", last)
	require.Contains(t, last.Finalizers, "nestlet.io/cleanup")
	_, joined := c.FirstTrue(v1alpha1.ConditionJoined)
	require.False(t, joined)
	_, unreachable := c.FirstReason(v1alpha1.ConditionJoined, v1alpha1.ReasonParentUnreachable)
	require.True(t, unreachable)
	require.NoError(t, c.Err())
	c.Stop()
	c.Stop() // idempotent
}
