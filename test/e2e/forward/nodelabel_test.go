package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nestlet/nestlet/test/framework"
)

// A label set on a virtual node at the root (`kubectl label node west
// team=...`) is the node's as in one cluster: a Deployment selecting it
// runs in that cluster, though no node below carries the label, and the
// delegates are made without the requirement (the conformance suite's
// "NodeSelector is respected if matching" does this).
func TestLabelOnVirtualNode(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	nodes := env.Cluster("root").Client.CoreV1().Nodes()
	key := "e2e.nestlet.io/team-" + ns
	patch := func(value any) {
		body := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, value)
		_, err := nodes.Patch(context.WithoutCancel(ctx), "west", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	patch(`"blue"`)
	t.Cleanup(func() { patch("null") })

	d := deployment(ns, "labelled", 2, "west")
	d.Spec.Template.Spec.NodeSelector = map[string]string{key: "blue"}
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	running := waitPods(t, "root", ns, "app=labelled", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 2 })
	for _, p := range running {
		require.Equal(t, "west", p.Spec.NodeName, "%s runs on the node labelled", p.Name)
	}
	for _, p := range delegates(t, "west", ns) {
		require.NotContains(t, p.Spec.NodeSelector, key, "the delegate %s keeps the root's node label", p.Name)
	}
}
