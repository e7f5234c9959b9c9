package forward

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// agentNamespace is where the agent keeps its ledgers.
const agentNamespace = api.DefaultNamespace

// newCopiesProvider is a Provider over fake clusters whose dependencies
// are driven by hand: write, then gc.
func newCopiesProvider(t *testing.T, child *fake.Clientset, clk *testingclock.FakeClock, inParent ...runtime.Object) *Provider {
	t.Helper()
	parent := fake.NewClientset(inParent...)
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid",
		Parent: parent, ParentPods: informers.NewSharedInformerFactory(parent, 0).Core().V1().Pods().Lister(),
		Child: child, Clock: clk, CopiesNamespace: agentNamespace})
	require.NoError(t, err)
	return p
}

// readsOutsideItsNamespace lists the reads of ConfigMaps and Secrets the
// agent made outside its namespace: there must be none.
func readsOutsideItsNamespace(c *fake.Clientset) []k8stesting.Action {
	var reads []k8stesting.Action
	for _, a := range c.Actions() {
		r := a.GetResource().Resource
		if (r == "configmaps" || r == "secrets") && a.GetNamespace() != agentNamespace &&
			(a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch") {
			reads = append(reads, a)
		}
	}
	return reads
}

// Copies are made, kept in step and collected without reading a ConfigMap
// or Secret of the child outside the agent's namespace; an object of the
// same name that is not this Target's copy is left as it is; the ledger
// lets a restarted agent collect what it made before.
func TestCopiesWithoutReads(t *testing.T) {
	ctx := t.Context()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "app"}, Data: map[string][]byte{"k": []byte("mine")}}
	child := fake.NewClientset(theirs)
	clk := testingclock.NewFakeClock(time.Now())
	p := newCopiesProvider(t, child, clk)
	d := p.deps
	// agent runs one step of the agent's and checks it read nothing.
	agent := func(step func() error) error {
		t.Helper()
		child.ClearActions()
		err := step()
		require.Empty(t, readsOutsideItsNamespace(child), "the agent reads no ConfigMap or Secret outside its namespace")
		return err
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "app", UID: "parent-cm", ResourceVersion: "1",
		Labels: map[string]string{"tier": "front"}}, Data: map[string]string{"greeting": "hello"}}
	require.NoError(t, agent(func() error { return d.write(ctx, cm) }))
	got, err := child.CoreV1().ConfigMaps("app").Get(ctx, "cfg", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "hello", got.Data["greeting"])
	require.Equal(t, testTargetUID, got.Labels[api.LabelTargetUID])
	require.Equal(t, "front", got.Labels["tier"])
	require.Equal(t, "Target", got.OwnerReferences[0].Kind, "deleting the Target collects its copies")
	require.Equal(t, []depKey{{kindConfigMap, "app", "cfg"}}, d.ledger.in("app"))

	// The same version again: one create, refused, and nothing more.
	require.NoError(t, agent(func() error { return d.write(ctx, cm) }))
	require.Len(t, child.Actions(), 1, "%v", child.Actions())
	require.Equal(t, "create", child.Actions()[0].GetVerb())

	// A new version in the parent is patched in.
	cm = cm.DeepCopy()
	cm.ResourceVersion, cm.Data["greeting"] = "2", "bonjour"
	require.NoError(t, agent(func() error { return d.write(ctx, cm) }))
	got, err = child.CoreV1().ConfigMaps("app").Get(ctx, "cfg", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "bonjour", got.Data["greeting"])

	// An object of the same name that Nestlet did not make is refused,
	// untouched, and not recorded.
	err = agent(func() error {
		return d.write(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "app", UID: "parent-sec", ResourceVersion: "1"},
			Data: map[string][]byte{"k": []byte("parent's")}})
	})
	require.ErrorContains(t, err, "Secret app/theirs exists in this cluster and is not a copy made by Nestlet")
	sec, err := child.CoreV1().Secrets("app").Get(ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "mine", string(sec.Data["k"]))
	require.Equal(t, []depKey{{kindConfigMap, "app", "cfg"}}, d.ledger.in("app"))

	// A Secret copy, used by a delegate.
	require.NoError(t, agent(func() error {
		return d.write(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "app", UID: "parent-pw", ResourceVersion: "1"},
			Data: map[string][]byte{"password": []byte("s3cret")}})
	}))
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "app", Labels: map[string]string{api.LabelTargetUID: testTargetUID}}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "pw",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "pw"}}}}}}
	require.NoError(t, p.delegates.GetIndexer().Add(user))

	// Written moments ago: spared, looked at again later.
	require.NoError(t, agent(func() error { return d.gc(ctx, "app") }))
	_, err = child.CoreV1().ConfigMaps("app").Get(ctx, "cfg", metav1.GetOptions{})
	require.NoError(t, err, "a copy just made may be for a delegate the lister has not seen yet")

	// A restarted agent (a new provider over the same cluster) collects
	// the copy no delegate uses, keeps the one in use, and leaves the
	// object that is not a copy alone.
	clk.Step(copyGrace)
	p = newCopiesProvider(t, child, clk)
	require.NoError(t, p.delegates.GetIndexer().Add(user))
	require.NoError(t, p.deps.ledger.load(ctx))
	require.Equal(t, []string{"app"}, p.deps.ledger.namespaces())
	require.NoError(t, agent(func() error { return p.deps.gc(ctx, "app") }))
	_, err = child.CoreV1().ConfigMaps("app").Get(ctx, "cfg", metav1.GetOptions{})
	require.Error(t, err, "the unused copy was collected")
	_, err = child.CoreV1().Secrets("app").Get(ctx, "pw", metav1.GetOptions{})
	require.NoError(t, err, "the copy in use stays")
	_, err = child.CoreV1().Secrets("app").Get(ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err, "not a copy: never deleted")
	require.Equal(t, []depKey{{kindSecret, "app", "pw"}}, p.deps.ledger.in("app"))
	ledgerCM, err := child.CoreV1().ConfigMaps(agentNamespace).Get(ctx, ledgerName(testTargetUID), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"app": "Secret/pw"}, ledgerCM.Data)

	// The last delegate goes: its copy goes too.
	require.NoError(t, p.delegates.GetIndexer().Delete(user))
	require.NoError(t, agent(func() error { return p.deps.gc(ctx, "app") }))
	_, err = child.CoreV1().Secrets("app").Get(ctx, "pw", metav1.GetOptions{})
	require.Error(t, err)
	require.Empty(t, p.deps.ledger.namespaces())

	// A ledger entry for an object that is not (or no longer) a copy, as
	// a crash between recording and writing leaves: collecting it deletes
	// nothing.
	require.NoError(t, p.deps.ledger.add(ctx, depKey{kindSecret, "app", "theirs"}))
	require.NoError(t, agent(func() error { return p.deps.gc(ctx, "app") }))
	_, err = child.CoreV1().Secrets("app").Get(ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, p.deps.ledger.namespaces())
}

// A copy found unused is collected while a delegate that uses it is being
// forwarded (the write begins after the check, the delete lands after the
// write found the copy there): the copy is made again from the parent,
// recorded and followed, not lost.
func TestCollectionRacingAWrite(t *testing.T) {
	ctx := t.Context()
	inParent := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "app", UID: "parent-pw", ResourceVersion: "1"},
		Data: map[string][]byte{"password": []byte("s3cret")}}
	child := fake.NewClientset()
	clk := testingclock.NewFakeClock(time.Now())
	p := newCopiesProvider(t, child, clk, inParent)
	d := p.deps
	k := depKey{kindSecret, "app", "pw"}
	require.NoError(t, d.write(ctx, inParent))
	clk.Step(copyGrace)

	deletes := 0
	child.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		deletes++
		if deletes == 1 {
			d.begin(k) // a delegate's write begins while the copy is collected
		}
		return false, nil, nil
	})
	require.NoError(t, d.gc(ctx, "app"))
	require.Equal(t, 1, deletes)
	got, err := child.CoreV1().Secrets("app").Get(ctx, "pw", metav1.GetOptions{})
	require.NoError(t, err, "made again")
	require.Equal(t, "s3cret", string(got.Data["password"]))
	require.Equal(t, []depKey{k}, d.ledger.in("app"), "recorded again")
	d.mu.Lock()
	_, followed := d.watches[k]
	d.mu.Unlock()
	require.True(t, followed, "followed again")

	// Without a write meanwhile, the next collection removes it for good.
	clk.Step(copyGrace)
	require.NoError(t, d.gc(ctx, "app"))
	_, err = child.CoreV1().Secrets("app").Get(ctx, "pw", metav1.GetOptions{})
	require.Error(t, err)
	require.Empty(t, d.ledger.namespaces())
}

// An object deleted in the parent is deleted here (a container then sees
// an optional ConfigMap go, as in one cluster), and made again should it
// come back.
func TestCopyFollowsADeletion(t *testing.T) {
	ctx := t.Context()
	inParent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "opt", Namespace: "app", UID: "parent-opt", ResourceVersion: "1"},
		Data: map[string]string{"data-1": "value-1"}}
	child := fake.NewClientset()
	p := newCopiesProvider(t, child, testingclock.NewFakeClock(time.Now()), inParent)
	d := p.deps
	k := depKey{kindConfigMap, "app", "opt"}
	// The fake sends no initial events on a watch-list: the reflector
	// falls back to a list and a watch when told so.
	p.cfg.Parent.(*fake.Clientset).PrependWatchReactor("configmaps", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if w, ok := a.(k8stesting.WatchActionImpl); ok && ptr.Deref(w.ListOptions.SendInitialEvents, false) {
			return true, nil, errors.New("no watch-list here")
		}
		return false, nil, nil
	})
	go d.follow(ctx, k)
	copied := func() bool {
		_, err := child.CoreV1().ConfigMaps("app").Get(ctx, "opt", metav1.GetOptions{})
		return err == nil
	}
	require.Eventually(t, copied, 10*time.Second, 10*time.Millisecond, "copied")

	require.NoError(t, p.cfg.Parent.CoreV1().ConfigMaps("app").Delete(ctx, "opt", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return !copied() }, 10*time.Second, 10*time.Millisecond, "deleted with the parent's")
	require.Empty(t, d.ledger.in("app"))

	back := inParent.DeepCopy()
	back.UID, back.ResourceVersion = "parent-opt-2", ""
	_, err := p.cfg.Parent.CoreV1().ConfigMaps("app").Create(ctx, back, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, copied, 10*time.Second, 10*time.Millisecond, "made again")
	require.Equal(t, []depKey{k}, d.ledger.in("app"))
}

// A real API server answers a patch whose test failed with 422 Invalid,
// its generic message and no cause: that is "not ours"; an object a patch
// made invalid (with causes) is not.
func TestNotOursFromAnAPIServer(t *testing.T) {
	failedTest := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /metadata/labels/x failed", 0, false)
	require.True(t, notOurs(failedTest))
	require.True(t, notOurs(fmt.Errorf("patching: %w", failedTest)))
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "cfg", field.ErrorList{field.TooLong(field.NewPath("data"), "", 1)})
	require.False(t, notOurs(invalid))
	require.False(t, notOurs(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "cfg")))
	require.False(t, notOurs(nil))
}
