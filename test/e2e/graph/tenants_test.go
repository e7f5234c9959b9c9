package graph

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/test/framework"
)

// The tenants of two parents in the child they share (west-1 joined west
// and east, docs/tenants.md): each parent makes app-config in a namespace
// of the same name, with contents of its own, and a pod that mounts it in
// west-1.
//   - With the Prefixed mapping each parent's objects are in a namespace
//     of its own in west-1 (west-<ns>, east-<ns>): each pod's copy holds
//     its own parent's contents, and nothing is made under the shared name.
//   - With the Same mapping the second parent's pod gets no place in
//     west-1 (Pending at its parent with west-1's reason): the first
//     parent's copy is never overwritten.
//   - Whatever the mapping, a pod of kube-system is not taken, and a
//     privileged pod of a parent held to baseline is refused with the Pod
//     Security reason; both stay Pending at their parent, none Failed.
func TestTenantsInTheDiamond(t *testing.T) {
	ctx := t.Context()
	waitOffersWest(t, "west", "west-1")
	waitOffersWest(t, "east", "west-1")
	leaf := env.Cluster("west-1").Client
	parents := []string{"west", "east"}

	setTenancy(t, &v1alpha1.NamespacePolicy{Mapping: v1alpha1.NamespaceMappingPrefixed}, v1alpha1.PodSecurityBaseline)
	ns := framework.KeptNamespace(t, env.Cluster("west").Client, "tenants", env.Cluster("east").Client)
	for _, from := range parents {
		createConfigAndPod(t, from, ns, "reader")
	}
	framework.Eventually(t, 2*time.Minute, "each parent's pod runs in west-1 in a namespace of its own, with its own parent's app-config", func(ctx context.Context) (bool, string) {
		for _, from := range parents {
			here := from + "-" + ns
			cm, err := leaf.CoreV1().ConfigMaps(here).Get(ctx, "app-config", metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("app-config in %s: %v", here, err)
			}
			if cm.Data["from"] != from {
				return false, fmt.Sprintf("app-config in %s holds %q, not %s's", here, cm.Data["from"], from)
			}
			d, err := leaf.CoreV1().Pods(here).Get(ctx, "reader", metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("delegate in %s: %v", here, err)
			}
			if d.Annotations[api.AnnotationParentPod] != ns+"/reader" || !strings.HasPrefix(d.Annotations[api.AnnotationPath], from+",") {
				return false, fmt.Sprintf("delegate %s/reader has parent pod %q, path %q", here, d.Annotations[api.AnnotationParentPod], d.Annotations[api.AnnotationPath])
			}
			p, err := env.Cluster(from).Client.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s's pod: %v %v", from, phaseOf(p), err)
			}
		}
		return true, ""
	})
	_, err := leaf.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing under the shared name in west-1: %v", err)
	// The kubelet API reaches each through the mapping, from its parent
	// (kwok's logs here are empty; the agent answers 404 for a pod whose
	// delegate it does not find).
	for _, from := range parents {
		_, err := env.Cluster(from).Client.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{LimitBytes: ptr.To[int64](64)}).DoRaw(ctx)
		require.NoError(t, err, "logs of %s's pod through west-1's mapped namespace", from)
	}

	// Refused whatever the mapping: kube-system, and a privileged pod from
	// west, held to baseline.
	system := podOn(ns, "system", "")
	system.Namespace = metav1.NamespaceSystem
	_, err = env.Cluster("west").Client.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, system, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Cluster("west").Client.CoreV1().Pods(metav1.NamespaceSystem).Delete(context.WithoutCancel(ctx), "system", metav1.DeleteOptions{})
	})
	privileged := podOn(ns, "privileged", "")
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, err = env.Cluster("west").Client.CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPendingWith(t, "west", metav1.NamespaceSystem, "system", "system namespace")
	waitPendingWith(t, "west", ns, "privileged", `violates PodSecurity "baseline:latest"`)

	// The Same mapping: one namespace for both parents in west-1.
	setTenancy(t, nil, "")
	shared := framework.KeptNamespace(t, env.Cluster("west").Client, "shared", env.Cluster("east").Client)
	createConfigAndPod(t, "west", shared, "first")
	framework.Eventually(t, 2*time.Minute, "west's pod runs in west-1 under the shared name", func(ctx context.Context) (bool, string) {
		p, err := env.Cluster("west").Client.CoreV1().Pods(shared).Get(ctx, "first", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("%v %v", phaseOf(p), err)
	})
	createConfigAndPod(t, "east", shared, "second")
	waitPendingWith(t, "east", shared, "second", "is not a copy of this parent's")
	cm, err := leaf.CoreV1().ConfigMaps(shared).Get(ctx, "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "west", cm.Data["from"], "west's copy is never overwritten by east's")
	for _, c := range []string{"west", "east", "west-1"} {
		list, err := env.Cluster(c).Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range list.Items {
			if strings.Contains(p.Namespace, "tenants") || strings.Contains(p.Namespace, "shared") || p.Namespace == metav1.NamespaceSystem && p.Name == "system" {
				require.NotEqual(t, corev1.PodFailed, p.Status.Phase, "pod %s/%s in %s: %s", p.Namespace, p.Name, c, p.Status.Message)
			}
		}
	}
}

// setTenancy sets spec.namespaces and spec.podSecurity on west-1's
// Targets (to west and east); see editTargets.
func setTenancy(t *testing.T, np *v1alpha1.NamespacePolicy, podSecurity string) {
	t.Helper()
	editTargets(t, func(_ string, s *v1alpha1.TargetSpec) { s.Namespaces, s.PodSecurity = np, podSecurity })
}

// editTargets changes the spec of west-1's Targets (to west and east; the
// function is told which parent), waits until both have taken it and
// offer region west again, and puts back what they had when the test ends.
func editTargets(t *testing.T, change func(parent string, s *v1alpha1.TargetSpec)) {
	t.Helper()
	ctx := t.Context()
	targets, err := v1alpha1.NewTargetClient(env.Cluster("west-1").Config)
	require.NoError(t, err)
	list, err := targets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2, "west-1 joined west and east")
	// The agent writes the Target too: each edit is read, changed and
	// written again on a conflict.
	edit := func(ctx context.Context, name string, change func(*v1alpha1.TargetSpec)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := targets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(&cur.Spec)
			_, err = targets.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	for _, tg := range list.Items {
		before, parent := tg.Spec.DeepCopy(), tg.Status.ParentClusterName
		require.NoError(t, edit(ctx, tg.Name, func(s *v1alpha1.TargetSpec) { change(parent, s) }))
		t.Cleanup(func() {
			if err := edit(context.WithoutCancel(ctx), tg.Name, func(s *v1alpha1.TargetSpec) { *s = *before }); err != nil {
				t.Errorf("restoring Target %s: %v", tg.Name, err)
			}
		})
	}
	framework.Eventually(t, 2*time.Minute, "west-1's Targets run their new spec", func(ctx context.Context) (bool, string) {
		list, err := targets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, tg := range list.Items {
			ready := false
			for _, c := range tg.Status.Conditions {
				ready = ready || c.Type == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tg.Generation
			}
			if tg.Status.ObservedGeneration != tg.Generation || !ready {
				return false, fmt.Sprintf("Target %s: generation %d, observed %d, conditions %v", tg.Name, tg.Generation, tg.Status.ObservedGeneration, tg.Status.Conditions)
			}
		}
		return true, ""
	})
	waitOffersWest(t, "west", "west-1")
	waitOffersWest(t, "east", "west-1")
}

// createConfigAndPod makes, in cluster from, app-config (holding the
// cluster's name) and a pod that mounts it, pinned to west-1.
func createConfigAndPod(t *testing.T, from, ns, name string) {
	t.Helper()
	client := env.Cluster(from).Client
	_, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"from": from}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = client.CoreV1().Pods(ns).Create(t.Context(), podOn(ns, name, "app-config"), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(ns).Delete(context.WithoutCancel(t.Context()), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
}

// podOn is a pod pinned to the virtual node west-1, mounting configMap
// when it is not "".
func podOn(ns, name, configMap string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: "west-1"},
			Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	if configMap != "" {
		pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	}
	return pod
}

// waitPendingWith waits until the pod ns/name of cluster is Pending,
// unbound, with a scheduling message that holds want.
func waitPendingWith(t *testing.T, cluster, ns, name, want string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s/%s Pending in %s, saying %q", ns, name, cluster, want), func(ctx context.Context) (bool, string) {
		p, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		msg := scheduledMessage(p)
		return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && strings.Contains(msg, want), fmt.Sprintf("%s on %q: %s", p.Status.Phase, p.Spec.NodeName, msg)
	})
}

func phaseOf(p *corev1.Pod) corev1.PodPhase {
	if p == nil {
		return ""
	}
	return p.Status.Phase
}

// West capped at 2 CPU in west-1 (Target spec.limits): west's virtual
// node west-1 shows at most 2 CPU, in its allocatable and its summary; of
// three 900m pods pinned there, two run and the third stays Pending, none
// Failed. The earlier tests' pods that west placed in west-1 go first: a
// cap counts every pod of the parent's there.
func TestParentCappedInAChild(t *testing.T) {
	ctx := t.Context()
	waitOffersWest(t, "west", "west-1")
	west := env.Cluster("west").Client
	earlier, err := west.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=west-1"})
	require.NoError(t, err)
	for _, p := range earlier.Items {
		if err := west.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	// A CPU cap counts the CPU its pods there ask for: none may be left
	// (a pod that asks none does not count).
	framework.Eventually(t, 2*time.Minute, "west's earlier pods asking CPU gone from west-1", func(ctx context.Context) (bool, string) {
		list, err := west.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=west-1"})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, p := range list.Items {
			var cpu resource.Quantity
			for _, c := range p.Spec.Containers {
				cpu.Add(c.Resources.Requests[corev1.ResourceCPU])
			}
			if !cpu.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left = append(left, fmt.Sprintf("%s/%s (%s cpu, %s, deleting %v, path %v)", p.Namespace, p.Name, cpu.String(), p.Status.Phase, p.DeletionTimestamp != nil, api.PodPath(&p)))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	editTargets(t, func(parent string, s *v1alpha1.TargetSpec) {
		if parent == "west" {
			s.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}
	})
	two := resource.MustParse("2")
	framework.Eventually(t, time.Minute, "west's node west-1 shows at most 2 CPU", func(ctx context.Context) (bool, string) {
		n, err := west.CoreV1().Nodes().Get(ctx, "west-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		alloc := n.Status.Allocatable[corev1.ResourceCPU]
		s, ok := api.ParseSummary(n)
		if !ok || alloc.Cmp(two) > 0 {
			return false, fmt.Sprintf("allocatable cpu %s, summary %v", alloc.String(), ok)
		}
		for _, g := range s.Groups {
			if a := g.Allocatable[corev1.ResourceCPU]; a.Cmp(two) > 0 {
				return false, fmt.Sprintf("a group shows %s of cpu", a.String())
			}
		}
		return true, ""
	})
	ns := framework.KeptNamespace(t, west, "capped", env.Cluster("west-1").Client)
	for _, name := range []string{"cpu-1", "cpu-2", "cpu-3"} {
		pod := podOn(ns, name, "")
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}
		_, err := west.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		// one at a time: the cap is judged on what runs
		framework.Eventually(t, time.Minute, name+" is decided", func(ctx context.Context) (bool, string) {
			p, err := west.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning || scheduledMessage(p) != "", fmt.Sprintf("%s %q", p.Status.Phase, scheduledMessage(p))
		})
	}
	framework.Eventually(t, time.Minute, "two run, the third waits", func(ctx context.Context) (bool, string) {
		list, err := west.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running, pending := 0, 0
		var last string
		for _, p := range list.Items {
			require.NotEqual(t, corev1.PodFailed, p.Status.Phase, "%s: %s", p.Name, p.Status.Message)
			switch {
			case p.Status.Phase == corev1.PodRunning:
				running++
			case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "":
				pending++
				last = scheduledMessage(&p)
			}
		}
		return running == 2 && pending == 1, fmt.Sprintf("%d running, %d pending: %s", running, pending, last)
	})
	p, err := west.CoreV1().Pods(ns).Get(ctx, "cpu-3", metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("cpu-3 waits: %s", scheduledMessage(p))
	below, err := env.Cluster("west-1").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, below.Items, 2, "west-1 holds two delegates of west's pods")
}
