package install

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/test/framework"
)

// upgradeReplicas is how many pods run at the root through the upgrade.
const upgradeReplicas = 30

// TestUpgrade: `helm upgrade` of every cluster to a new build of the image
// (another version, so other binaries and another digest), parents first
// as Kubernetes upgrades its control plane before its kubelets, while 30
// pods made at the root run in east-1:
// no pod at the root changes phase or readiness or goes away (a watch
// kept on them for the whole upgrade), no delegate is made again in east
// or east-1, no container restarts in east-1's runtime, and the route
// agents' interfaces on the root's nodes are the same ones after. The
// upgraded components then still forward a new pod.
func TestUpgrade(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	pods := webDeployment(t, ns, "steady", upgradeReplicas)
	root, east, leaf := env.Cluster("root"), env.Cluster("east"), env.Cluster("east-1")
	before := map[string]string{} // delegate UIDs in east and east-1, by root pod
	for _, p := range pods {
		mid := delegateIn(t, east, &p)
		before[p.Name] = string(mid.UID) + "/" + string(delegateIn(t, leaf, mid).UID)
	}
	containersBefore := appContainers(t, ns, "steady-")
	require.Len(t, containersBefore, upgradeReplicas)

	// Every change of the Deployment's pods at the root from here on, and
	// of their delegates in east-1 (to tell a leaf's own readiness change
	// from one Nestlet made).
	atRoot := watchStates(t, root.Client, ns, "app=steady")
	atLeaf := watchStates(t, leaf.Client, ns, "app=steady")

	// The route agents' interfaces on the root's nodes (the gateway's, and
	// the other, which routes to it): a rolling update of the route agents
	// hands them over, it does not make them again.
	interfaces := map[string]int{}
	for _, n := range root.RealNodes() {
		interfaces[n.Name] = vxlanOnNode(t, n, false)
	}

	_, took := upgradeTree(t, "0.0.0-upgrade")
	t.Logf("helm upgrade of %d clusters took %s", len(tree), took.Round(time.Millisecond))
	// Every child's Target is Ready again with the new agents, and the
	// new components forward a new pod down to east-1: the tree works
	// again, end to end, before the pods are compared.
	for _, c := range tree[1:] {
		require.NoError(t, env.Cluster(c.name).WaitTargetReady(ctx, c.parent, 2*time.Minute))
	}
	webDeployment(t, ns, "after-upgrade", 1)
	// Each side states its new build on the child's node, and the child's
	// Target finds their protocols met, naming both.
	for _, at := range tree[1:] {
		requireVersionsStated(t, at.name, at.parent, "0.0.0-upgrade")
	}

	for _, n := range root.RealNodes() {
		require.Equal(t, interfaces[n.Name], vxlanOnNode(t, n, false), "the route agents' interface on %s was made again by the upgrade", n.Name)
	}

	rootChanges, leafChanges := atRoot(t), atLeaf(t)
	require.Empty(t, rootChanges, "pods at the root disturbed by the upgrade; their delegates in east-1 meanwhile: %v", leafChanges)
	for _, p := range pods {
		mid := delegateIn(t, east, &p)
		require.Equal(t, before[p.Name], string(mid.UID)+"/"+string(delegateIn(t, leaf, mid).UID), "delegates of %s made again", p.Name)
	}
	require.Equal(t, containersBefore, appContainers(t, ns, "steady-"), "containers in east-1's runtime (ID and attempt)")
}

// upgradeTree builds the image at another version, imports it on every
// real node, and `helm upgrade`s every cluster to it, parents first, each
// until its Nestlet pods all run it; it returns the image and how long the
// upgrades took.
func upgradeTree(t testing.TB, version string) (framework.Image, time.Duration) {
	t.Helper()
	ctx := t.Context()
	next, err := framework.BuildImage(t.TempDir(), "NESTLET_VERSION="+version)
	require.NoError(t, err)
	require.NotEqual(t, image.Digest, next.Digest, "the new build is another image")
	for _, c := range env.Clusters() {
		for _, n := range c.RealNodes() {
			require.NoError(t, n.ImportImages(ctx, map[string]string{next.Ref: next.Archive}))
		}
	}
	chart, err := chartPath()
	require.NoError(t, err)
	start := time.Now()
	for _, at := range tree { // parents first
		c := env.Cluster(at.name)
		_, err := framework.Helm(ctx, env, c, "upgrade", release, chart, "--namespace", chartNamespace,
			"--reuse-values", "--set", "image.tag="+next.Tag(), "--wait", "--timeout", "5m")
		require.NoError(t, err, "helm upgrade in %s", c.Name)
		waitUpgraded(t, c.Name, next.Ref)
	}
	return next, time.Since(start)
}

// requireVersionsStated waits until child's virtual node in parent states
// both sides' build as version, and child's Target is Compatible.
func requireVersionsStated(t testing.TB, child, parent, version string) {
	t.Helper()
	targets, err := v1alpha1.NewTargetClient(env.Cluster(child).Config)
	require.NoError(t, err)
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, fmt.Sprintf("%s in %s states version %s", child, parent, version), func(ctx context.Context) (bool, string) {
		n, err := env.Cluster(parent).Client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		target, err := targets.Get(ctx, parent, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(target.Status.Conditions, v1alpha1.ConditionCompatible)
		last := fmt.Sprintf("node annotations %v; Compatible %+v", n.Annotations, c)
		return strings.HasPrefix(n.Annotations[api.AnnotationAgentVersion], version) &&
			strings.HasPrefix(n.Annotations[api.AnnotationParentVersion], version) &&
			n.Annotations[api.AnnotationProtocols] == api.OwnProtocols().String() &&
			c != nil && c.Status == metav1.ConditionTrue && strings.Count(c.Message, version) == 2, last
	})
}

// watchStates watches the pods of ns that selector selects from now on and
// returns a function that stops it and returns every change of phase or
// readiness seen, and every pod added or deleted; it fails the test if the
// watch ended before (changes would have gone unseen).
func watchStates(t testing.TB, client kubernetes.Interface, ns, selector string) func(testing.TB) []string {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	w, err := client.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	var mu sync.Mutex
	var changes []string
	state := map[string]string{}
	for _, p := range list.Items {
		state[p.Name] = podState(&p)
	}
	var stopping atomic.Bool
	ended := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			at := time.Now().Format("15:04:05.000")
			mu.Lock()
			switch {
			case ev.Type == watch.Deleted:
				changes = append(changes, at+" "+p.Name+" deleted")
			case state[p.Name] == "":
				changes = append(changes, at+" "+p.Name+" added")
			case podState(p) != state[p.Name]:
				changes = append(changes, fmt.Sprintf("%s %s %s -> %s", at, p.Name, state[p.Name], podState(p)))
			}
			state[p.Name] = podState(p)
			mu.Unlock()
		}
		ended = !stopping.Load()
	}()
	return func(t testing.TB) []string {
		t.Helper()
		stopping.Store(true)
		w.Stop()
		<-done
		require.False(t, ended, "the watch of the pods of %s ended before the test did", ns)
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

// podState is what the upgrade must not change of a pod at the root: its
// phase and readiness.
func podState(p *corev1.Pod) string {
	return fmt.Sprintf("%s ready=%t", p.Status.Phase, podutil.IsPodReady(p))
}

// appContainers returns the app containers of ns in east-1's runtime whose
// pod names start with prefix, as container ID by pod and attempt.
func appContainers(t testing.TB, ns, prefix string) map[string]string {
	t.Helper()
	containers, err := env.Cluster("east-1").RealNode(leafNode).Containers(t.Context())
	require.NoError(t, err)
	out := map[string]string{}
	for _, c := range containers {
		pod := c.Labels["io.kubernetes.pod.name"]
		if c.Labels["io.kubernetes.pod.namespace"] != ns || c.Metadata.Name != "app" || !strings.HasPrefix(pod, prefix) {
			continue
		}
		out[fmt.Sprintf("%s attempt %d", pod, c.Metadata.Attempt)] = c.Id
	}
	return out
}

// waitUpgraded waits until every Nestlet pod of the cluster runs image ref
// and is ready, and no other is left.
func waitUpgraded(t testing.TB, cluster, ref string) {
	t.Helper()
	c := env.Cluster(cluster)
	framework.EventuallyEvery(t, time.Second, 3*time.Minute, fmt.Sprintf("%s: Nestlet's pods on %s", cluster, ref), func(ctx context.Context) (bool, string) {
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var last []string
		done := len(pods.Items) > 0
		for _, p := range pods.Items {
			last = append(last, fmt.Sprintf("%s %s ready=%t", p.Name, p.Spec.Containers[0].Image, podutil.IsPodReady(&p)))
			done = done && p.Spec.Containers[0].Image == ref && podutil.IsPodReady(&p) && p.DeletionTimestamp == nil
		}
		return done, fmt.Sprint(last)
	})
}
