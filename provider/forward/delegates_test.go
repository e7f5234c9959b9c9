package forward

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Two Targets of one cluster (two parents, as primary and backup) read
// their delegates from the one informer of every pod here: each sees its
// own delegate of a parent pod named as the other's, is told of its own
// delegates' changes only, and never sees the cluster's own pods.
func TestTargetsShareTheInformerOfPods(t *testing.T) {
	child := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-1", Namespace: "app", UID: "local"}})
	factory := kubeclient.NewCoreFactory(child, nil, kubeclient.StripManagedFields)
	pods := factory.CoreV1().Pods().Informer()
	require.NoError(t, pods.AddIndexers(DelegateIndexers()))

	type target struct {
		p   *Provider
		got chan *corev1.Pod
		pod *corev1.Pod
	}
	var targets []target
	for _, uid := range []types.UID{"target-a", "target-b"} {
		pod := neverPod()
		pod.UID = "parent-pod-of-" + uid
		parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		require.NoError(t, parentPods.Add(pod))
		p, err := New(Config{TargetName: string(uid), TargetUID: uid, ClusterName: "leaf", ParentName: "mid-" + string(uid),
			Parent: fake.NewClientset(pod), ParentPods: corelisters.NewPodLister(parentPods), Child: child, ChildPods: pods})
		require.NoError(t, err)
		targets = append(targets, target{p: p, got: make(chan *corev1.Pod, 10), pod: pod})
	}
	// Every handler B subscribes (services, events) hears of B's
	// delegates only: not of A's, nor of the local pod (checked below).
	seen := make(chan string, 10)
	require.NoError(t, targets[1].p.onDelegates(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { seen <- obj.(*corev1.Pod).Name },
	}))
	factory.Start(t.Context().Done())
	for _, tg := range targets {
		require.NoError(t, tg.p.Run(t.Context()))
		tg.p.NotifyPods(t.Context(), func(pod *corev1.Pod) { tg.got <- pod })
		require.NoError(t, tg.p.CreatePod(t.Context(), tg.pod.DeepCopy()))
	}

	for _, tg := range targets {
		uid := string(tg.p.cfg.TargetUID)
		require.Eventually(t, func() bool {
			d, err := tg.p.Delegate("app", "job-1")
			return err == nil && d.Labels[api.LabelTargetUID] == uid
		}, 10*time.Second, 10*time.Millisecond, "the delegate of %s", uid)
		mine, err := tg.p.lister.List(labels.Everything())
		require.NoError(t, err)
		require.Len(t, mine, 1, "%s lists its one delegate, not the other Target's nor the local pod", uid)
		listed, err := tg.p.GetPods(t.Context())
		require.NoError(t, err)
		require.Len(t, listed, 1)
		require.Equal(t, tg.pod.UID, listed[0].UID)
	}
	// The local pod (named as both parent pods) and the other Target's
	// delegate are not found by name.
	_, err := targets[0].p.lister.Pods("app").Get("job-1")
	require.True(t, apierrors.IsNotFound(err), "target-a gets the local pod job-1: %v", err)
	a, err := targets[0].p.Delegate("app", "job-1")
	require.NoError(t, err)
	_, err = targets[1].p.lister.Pods("app").Get(a.Name)
	require.True(t, apierrors.IsNotFound(err), "target-b gets target-a's delegate %s: %v", a.Name, err)

	// A's delegate runs, then B's fails: each Target reports its own
	// parent pod's phase. B's handler gets the informer's events in order,
	// so once it has reported Failed it has passed over A's Running
	// delegate: had it taken that for its own (same parent name), it
	// would have reported Running first.
	phases := []corev1.PodPhase{corev1.PodRunning, corev1.PodFailed}
	local, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	local.Labels = map[string]string{"changed": "yes"}
	_, err = child.CoreV1().Pods("app").Update(t.Context(), local, metav1.UpdateOptions{})
	require.NoError(t, err)
	for i, tg := range targets {
		d, err := tg.p.Delegate("app", "job-1")
		require.NoError(t, err)
		changed := d.DeepCopy()
		changed.Status.Phase = phases[i]
		_, err = child.CoreV1().Pods("app").UpdateStatus(t.Context(), changed, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	for i, tg := range targets {
		deadline := time.After(10 * time.Second)
		for reported := false; !reported; {
			select {
			case up := <-tg.got:
				require.Equal(t, tg.pod.UID, up.UID)
				require.Contains(t, []corev1.PodPhase{corev1.PodPending, phases[i]}, up.Status.Phase,
					"%s reported the other Target's delegate as its pod's", tg.p.cfg.TargetUID)
				reported = up.Status.Phase == phases[i]
			case <-deadline:
				t.Fatalf("%s never reported its pod %s", tg.p.cfg.TargetUID, phases[i])
			}
		}
	}
	b, err := targets[1].p.Delegate("app", "job-1")
	require.NoError(t, err)
	select {
	case name := <-seen:
		require.Equal(t, b.Name, name, "target-b's handler heard of a pod not its delegate")
	case <-time.After(10 * time.Second):
		t.Fatal("target-b's handler never heard of its delegate's change")
	}
}

// An informer handed over without the delegate indexes is refused with
// what to do, rather than failing at the first lookup.
func TestChildPodsNeedTheDelegateIndexes(t *testing.T) {
	factory := kubeclient.NewCoreFactory(fake.NewClientset(), nil, nil)
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_, err := New(Config{TargetName: "t", TargetUID: "t", ClusterName: "leaf", Parent: fake.NewClientset(),
		ParentPods: corelisters.NewPodLister(parentPods), Child: fake.NewClientset(), ChildPods: factory.CoreV1().Pods().Informer()})
	require.ErrorContains(t, err, "DelegateIndexers")
}

// countingInformer counts the handlers added to and removed from an
// informer.
type countingInformer struct {
	cache.SharedIndexInformer
	added, removed atomic.Int32
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.added.Add(1)
	return c.SharedIndexInformer.AddEventHandler(h)
}

func (c *countingInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	c.removed.Add(1)
	return c.SharedIndexInformer.RemoveEventHandler(reg)
}

// A Target run that ends takes its handlers off the shared informer of
// pods: restarted Targets (after an outage) do not pile them up.
func TestEndedRunLeavesNoHandlers(t *testing.T) {
	child := fake.NewClientset()
	factory := kubeclient.NewCoreFactory(child, nil, kubeclient.StripManagedFields)
	pods := &countingInformer{SharedIndexInformer: factory.CoreV1().Pods().Informer()}
	require.NoError(t, pods.AddIndexers(DelegateIndexers()))
	factory.Start(t.Context().Done())
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for run := 1; run <= 3; run++ {
		p, err := New(Config{TargetName: "t", TargetUID: "t", ClusterName: "leaf", ParentName: "mid",
			Parent: fake.NewClientset(), ParentPods: corelisters.NewPodLister(parentPods), Child: child, ChildPods: pods})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, p.Run(ctx))
		require.Positive(t, pods.added.Load())
		require.Error(t, p.onDelegates(cache.ResourceEventHandlerFuncs{}), "a handler added after Run would never be subscribed")
		cancel()
		select {
		case <-p.unsubscribed:
		case <-time.After(10 * time.Second):
			t.Fatal("the ended run never unsubscribed")
		}
		require.Equal(t, pods.added.Load(), pods.removed.Load(), "run %d left handlers on the informer", run)
	}
}

// A pod pinned to the virtual node by name (hostname selector, name field
// or hostname expression) is not pinned below, where no node bears it;
// other requirements stay.
func TestDelegateUnpinnedFromTheVirtualNode(t *testing.T) {
	pod := neverPod()
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "leaf", "zone": "a"}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields:      []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"leaf"}}},
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}},
		}},
	}}}
	d := buildDelegate(pod, pod.Name, &Config{ClusterName: "leaf", ParentName: "root"}, []string{"root", "leaf"})
	require.Equal(t, map[string]string{"zone": "a"}, d.Spec.NodeSelector)
	terms := d.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 1)
	require.Empty(t, terms[0].MatchFields)
	require.Equal(t, "disk", terms[0].MatchExpressions[0].Key)

	// The pin alone: no requirement left.
	pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions = nil
	d = buildDelegate(pod, pod.Name, &Config{ClusterName: "leaf", ParentName: "root"}, []string{"root", "leaf"})
	require.Nil(t, d.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	require.Equal(t, []string{"leaf"}, pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values, "the parent pod is left as it is")
}
