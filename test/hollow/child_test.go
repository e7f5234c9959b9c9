package hollow

import (
	"context"
	"net"
	"slices"
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

	// Wait on the child's own record of the conditions (its watch), not on a
	// Get: a Get can see the condition before the watch has delivered it.
	var last *v1alpha1.Target
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, unreachable := c.FirstReason(v1alpha1.ConditionJoined, v1alpha1.ReasonParentUnreachable); !unreachable {
			return false, nil
		}
		tg, err := c.Targets.Get(ctx, c.Target, metav1.GetOptions{})
		last = tg
		return err == nil, err
	})
	require.NoError(t, err, "last status: %+v", last)
	require.True(t, slices.ContainsFunc(last.Status.Conditions, func(cond metav1.Condition) bool {
		return cond.Type == v1alpha1.ConditionJoined && cond.Reason == v1alpha1.ReasonParentUnreachable
	}), "last status: %+v", last.Status)
	_, joined := c.FirstTrue(v1alpha1.ConditionJoined)
	require.False(t, joined)
	require.NoError(t, c.Err())
	c.Stop()
	c.Stop() // idempotent
}
