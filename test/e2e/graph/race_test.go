package graph

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// West and east, both parents of west-1, race for its last place (port
// 7100 is free on one of its two nodes, which no summary shows): one pod
// runs, once; the other stays Pending with west-1's reason; none fails at
// any level. Once the place is freed, the other runs too.
func TestRaceForTheLastPlace(t *testing.T) {
	ctx := t.Context()
	waitOffersWest(t, "west", "west-1")
	waitOffersWest(t, "east", "west-1")
	clusters := []string{"root", "east", "west", "west-1"}
	ns := framework.KeptNamespace(t, env.Cluster("west").Client, "t", env.Cluster("east").Client, env.Cluster("west-1").Client, env.Cluster("root").Client)
	const port = 7100
	ports := []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}
	leaf := env.Cluster("west-1").Client
	_, err := leaf.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "holder"},
		Spec:       corev1.PodSpec{NodeName: "west-1-a", Containers: []corev1.Container{{Name: "app", Image: "nginx", Ports: ports}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for _, from := range []string{"west", "east"} {
		wg.Go(func() {
			_, err := env.Cluster(from).Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "from-" + from, Labels: map[string]string{"race": "7100"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"topology.kubernetes.io/region": "west"},
					Containers:   []corev1.Container{{Name: "app", Image: "nginx", Ports: ports}},
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		})
	}
	wg.Wait()

	// phases of the two pods where they were created, and the delegates
	// running in west-1; a Failed pod anywhere ends the test.
	state := func(ctx context.Context) (running, pending int, below []string, last string) {
		for _, c := range clusters {
			list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, 0, nil, err.Error()
			}
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodFailed {
					t.Fatalf("pod %s failed in %s: %s %s", p.Name, c, p.Status.Reason, p.Status.Message)
				}
			}
		}
		for _, from := range []string{"west", "east"} {
			p, err := env.Cluster(from).Client.CoreV1().Pods(ns).Get(ctx, "from-"+from, metav1.GetOptions{})
			if err != nil {
				return 0, 0, nil, err.Error()
			}
			switch {
			case p.Status.Phase == corev1.PodRunning:
				running++
			case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "":
				pending++
				last = fmt.Sprintf("%s pending: %s", p.Name, scheduledMessage(p))
			}
		}
		list, err := leaf.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "race=7100"})
		if err != nil {
			return 0, 0, nil, err.Error()
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				below = append(below, p.Annotations[api.AnnotationPath]+" on "+p.Spec.NodeName)
			}
		}
		return running, pending, below, last
	}
	framework.Eventually(t, 2*time.Minute, "one pod runs, the other waits", func(ctx context.Context) (bool, string) {
		running, pending, below, last := state(ctx)
		return running == 1 && pending == 1 && len(below) == 1, fmt.Sprintf("%d running, %d pending, in west-1 %v; %s", running, pending, below, last)
	})
	// It stays so: nothing bounces, nothing runs twice.
	time.Sleep(10 * time.Second)
	running, pending, below, last := state(ctx)
	require.Equal(t, 1, running)
	require.Equal(t, 1, pending, last)
	require.Len(t, below, 1, "bound in west-1: %v", below)
	require.Contains(t, last, "west-1", "the waiting pod names the child that had no place")
	t.Logf("%s", last)

	// The place is freed: the waiting pod takes it.
	require.NoError(t, leaf.CoreV1().Pods(ns).Delete(ctx, "holder", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	framework.Eventually(t, 2*time.Minute, "both pods run, each once", func(ctx context.Context) (bool, string) {
		running, pending, below, last := state(ctx)
		return running == 2 && len(below) == 2, fmt.Sprintf("%d running, %d pending, in west-1 %v; %s", running, pending, below, last)
	})
	for _, from := range []string{"west", "east"} {
		require.NoError(t, env.Cluster(from).Client.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), "from-"+from, metav1.DeleteOptions{}))
	}
}

// scheduledMessage is the message of the pod's PodScheduled condition.
func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}
