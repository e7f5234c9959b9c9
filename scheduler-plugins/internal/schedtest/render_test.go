package schedtest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestRenderFailure(t *testing.T) {
	pod := st.MakePod().Name("p").Obj()
	got := RenderFailure(pod, "west", fwk.NewStatus(fwk.Unschedulable, "west: cpu would reach 96%, above 95%"))
	require.True(t, strings.Contains(got, "%!"), "a reason with %% is mangled as kube-scheduler mangles it: %q", got)
	got = RenderFailure(pod, "west", fwk.NewStatus(fwk.Unschedulable, "west: cpu would reach 96 percent"))
	require.Equal(t, "Warning FailedScheduling 0/1 nodes are available: 1 west: cpu would reach 96 percent.", got)
}
