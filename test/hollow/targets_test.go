package hollow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

func newTargets(t *testing.T) v1alpha1.TargetInterface {
	t.Helper()
	_, client, err := newTargetServer(clock.RealClock{})
	require.NoError(t, err)
	return client
}

func target(name, cluster string) *v1alpha1.Target {
	return &v1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "leaf"}},
		Spec: v1alpha1.TargetSpec{ParentURL: "https://parent.invalid:6443", ClusterName: cluster,
			BootstrapTokenSecretRef: v1alpha1.SecretReference{Namespace: "nestlet-system", Name: "tok"}},
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		require.True(t, ok, "watch closed")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
		return watch.Event{}
	}
}

// TestTargetsRoundTrip goes through the real generic client, in-process
// HTTP and the fake with its API-server semantics.
func TestTargetsRoundTrip(t *testing.T) {
	ctx := t.Context()
	targets := newTargets(t)

	created, err := targets.Create(ctx, target("a", "leaf-a"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, created.UID)
	require.NotEmpty(t, created.ResourceVersion)
	require.Equal(t, int64(1), created.Generation)
	_, err = targets.Create(ctx, target("a", "leaf-a"), metav1.CreateOptions{})
	require.True(t, apierrors.IsAlreadyExists(err), "second create: %v", err)

	got, err := targets.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created.UID, got.UID)
	_, err = targets.Get(ctx, "missing", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "get missing: %v", err)

	// The status subresource changes only status.
	st := got.DeepCopy()
	st.Spec.ClusterName = "ignored"
	meta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReporting})
	updated, err := targets.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "leaf-a", updated.Spec.ClusterName)
	require.True(t, meta.IsStatusConditionTrue(updated.Status.Conditions, v1alpha1.ConditionReady))
	require.Equal(t, int64(1), updated.Generation)

	// The main resource changes everything but status; a spec change
	// bumps the generation; a stale resourceVersion conflicts.
	spec := updated.DeepCopy()
	spec.Spec.ClusterName = "leaf-b"
	spec.Status = v1alpha1.TargetStatus{}
	updated2, err := targets.Update(ctx, spec, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "leaf-b", updated2.Spec.ClusterName)
	require.Equal(t, int64(2), updated2.Generation)
	require.Len(t, updated2.Status.Conditions, 1)
	_, err = targets.Update(ctx, spec, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "stale update: %v", err)

	// Patch.
	patched, err := targets.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"edge"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Equal(t, "edge", patched.Labels["tier"])
	require.Equal(t, "leaf-b", patched.Spec.ClusterName)

	// List with selectors.
	_, err = targets.Create(ctx, target("b", "leaf-c"), metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := targets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	require.NotEmpty(t, list.ResourceVersion)
	list, err = targets.List(ctx, metav1.ListOptions{LabelSelector: "tier=edge"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	list, err = targets.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, "b", list.Items[0].Name)
	_, err = targets.List(ctx, metav1.ListOptions{FieldSelector: "spec.clusterName=x"})
	require.True(t, apierrors.IsBadRequest(err), "unsupported field: %v", err)

	// A finalizer defers deletion until it is removed.
	withFin := patched.DeepCopy()
	withFin.Finalizers = []string{"nestlet.io/cleanup"}
	withFin, err = targets.Update(ctx, withFin, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, targets.Delete(ctx, "a", metav1.DeleteOptions{}))
	deleting, err := targets.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, deleting.DeletionTimestamp)
	deleting.Finalizers = nil
	_, err = targets.Update(ctx, deleting, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = targets.Get(ctx, "a", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "after the finalizer: %v", err)
	require.True(t, apierrors.IsNotFound(targets.Delete(ctx, "a", metav1.DeleteOptions{})))
	_ = withFin
}

func TestTargetsWatch(t *testing.T) {
	ctx := t.Context()
	targets := newTargets(t)
	_, err := targets.Create(ctx, target("before", "c0"), metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := targets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	// Created between the list and the watch: a watch from the list's
	// resourceVersion still sees it.
	_, err = targets.Create(ctx, target("gap", "c1"), metav1.CreateOptions{})
	require.NoError(t, err)
	w, err := targets.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	ev := nextEvent(t, w)
	require.Equal(t, watch.Added, ev.Type)
	require.Equal(t, "gap", ev.Object.(*v1alpha1.Target).Name)

	cur, err := targets.Get(ctx, "gap", metav1.GetOptions{})
	require.NoError(t, err)
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonJoined})
	_, err = targets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	require.Equal(t, watch.Modified, ev.Type)
	require.True(t, meta.IsStatusConditionTrue(ev.Object.(*v1alpha1.Target).Status.Conditions, v1alpha1.ConditionJoined))

	require.NoError(t, targets.Delete(ctx, "gap", metav1.DeleteOptions{}))
	ev = nextEvent(t, w)
	require.Equal(t, watch.Deleted, ev.Type)
	require.Equal(t, "gap", ev.Object.(*v1alpha1.Target).Name)

	// A field-selected watch without a resourceVersion starts with the
	// current object.
	one, err := targets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=before"})
	require.NoError(t, err)
	defer one.Stop()
	ev = nextEvent(t, one)
	require.Equal(t, watch.Added, ev.Type)
	require.Equal(t, "before", ev.Object.(*v1alpha1.Target).Name)

	// A resourceVersion from the future is refused.
	_, err = targets.Watch(ctx, metav1.ListOptions{ResourceVersion: "999999"})
	require.Error(t, err)
}

// TestTargetsInformer runs an informer as the agent does (a plain
// ListWatch, so the reflector streams with watch-list when the client
// feature gate allows it) and sees adds and updates.
func TestTargetsInformer(t *testing.T) {
	ctx := t.Context()
	server, targets, err := newTargetServer(clock.RealClock{})
	require.NoError(t, err)
	_, err = targets.Create(ctx, target("first", "c0"), metav1.CreateOptions{})
	require.NoError(t, err)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return targets.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return targets.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &v1alpha1.Target{}, 0, cache.Indexers{})
	go inf.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	require.Len(t, inf.GetStore().List(), 1)

	_, err = targets.Create(ctx, target("second", "c1"), metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(inf.GetStore().List()) == 2, nil
	})
	require.NoError(t, err, "the informer did not see the second Target")

	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		streamed := false
		for _, a := range server.fake.Actions() {
			if w, ok := a.(clienttesting.WatchActionImpl); ok && ptr.Deref(w.ListOptions.SendInitialEvents, false) {
				streamed = true
			}
		}
		require.True(t, streamed, "the reflector did not use watch-list")
	}
}
