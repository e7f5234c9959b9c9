package forward

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nestlet/nestlet/api"
)

// serviceEnv is a Provider over fake parent and child clusters, with its
// Service reflection running.
type serviceEnv struct {
	ctx            context.Context
	p              *Provider
	parent, child  *fake.Clientset
	events, childE *record.FakeRecorder
	here           string // the parent namespace app's name here
}

const testTargetUID = "target-uid-1"

func newServiceEnv(t *testing.T) *serviceEnv { return newServiceEnvIn(t, Namespaces{}) }

func newServiceEnvIn(t *testing.T, ns Namespaces) *serviceEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	e := &serviceEnv{ctx: ctx, parent: fake.NewClientset(), child: fake.NewClientset(),
		events: record.NewFakeRecorder(100), childE: record.NewFakeRecorder(100), here: ns.Name("app")}
	parentPods := informers.NewSharedInformerFactory(e.parent, 0).Core().V1().Pods()
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid", Namespaces: ns,
		Parent: e.parent, ParentPods: parentPods.Lister(), Child: e.child, Recorder: e.events, ChildRecorder: e.childE})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	e.p = p
	// A fake clientset drops what happens between an informer's list and
	// its watch: wait for the watches.
	require.Eventually(t, func() bool {
		return watched(e.parent, "services") && watched(e.child, "services") && watched(e.child, "pods")
	}, 5*time.Second, time.Millisecond)
	return e
}

// delegate creates a delegate of this Target in the child.
func (e *serviceEnv) delegate(t *testing.T, name string, lbl map[string]string) {
	t.Helper()
	l := map[string]string{api.LabelTargetUID: testTargetUID}
	for k, v := range lbl {
		l[k] = v
	}
	_, err := e.child.CoreV1().Pods(e.here).Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: e.here, Labels: l,
		Annotations: map[string]string{api.AnnotationParentPod: "app/" + name},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// watched reports whether c is watched for resource: a fake clientset
// drops what happens between an informer's list and its watch.
func watched(c *fake.Clientset, resource string) bool {
	for _, a := range c.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == resource {
			return true
		}
	}
	return false
}

func webService(typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "svc-uid", Labels: map[string]string{"tier": "front"},
			Annotations: map[string]string{lastApplied: "{}", "team": "a"}},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"}, SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080), NodePort: 30080}}},
	}
}

// decided makes the decision about the parent's Service app/web once it
// is in the parent's informer, as a worker would: what is absent after it
// was not made (no sleeping for a worker that might have acted).
func (e *serviceEnv) decided(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, ok, err := e.p.services.parent.GetIndexer().GetByKey("app/web")
		return err == nil && ok
	}, 5*time.Second, time.Millisecond, "the parent's Service in the informer")
	require.NoError(t, e.p.services.sync(e.ctx, "app/web"))
}

// copyOf waits until the child's Service app/web satisfies ok (nil: is
// absent) and returns it.
func (e *serviceEnv) copyOf(t *testing.T, what string, ok func(*corev1.Service) bool) *corev1.Service {
	t.Helper()
	var got *corev1.Service
	require.Eventually(t, func() bool {
		svc, err := e.child.CoreV1().Services(e.here).Get(e.ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ok == nil
		}
		got = svc
		return err == nil && ok != nil && ok(svc)
	}, 5*time.Second, 10*time.Millisecond, what)
	return got
}

func TestServiceReflectedWhileItSelectsADelegate(t *testing.T) {
	e := newServiceEnv(t)
	e.delegate(t, "other", map[string]string{"app": "db"})
	_, err := e.parent.CoreV1().Services("app").Create(e.ctx, webService(corev1.ServiceTypeLoadBalancer), metav1.CreateOptions{})
	require.NoError(t, err)
	e.decided(t)
	_, err = e.child.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no delegate selected: no copy (%v)", err)

	e.delegate(t, "web-1", map[string]string{"app": "web"})
	svc := e.copyOf(t, "a delegate selected: a copy", func(*corev1.Service) bool { return true })
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "a LoadBalancer is reflected as ClusterIP")
	assert.Equal(t, "10.96.0.10", svc.Spec.ClusterIP, "the parent's address, where it is free here")
	assert.Equal(t, []string{"10.96.0.10"}, svc.Spec.ClusterIPs)
	assert.Equal(t, map[string]string{"app": "web"}, svc.Spec.Selector)
	assert.Equal(t, corev1.ServiceAffinityClientIP, svc.Spec.SessionAffinity)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Zero(t, svc.Spec.Ports[0].NodePort, "node ports stay with the parent")
	assert.Equal(t, intstr.FromInt32(8080), svc.Spec.Ports[0].TargetPort)
	assert.Equal(t, testTargetUID, svc.Labels[api.LabelTargetUID])
	assert.Equal(t, "front", svc.Labels["tier"])
	assert.Equal(t, "mid/svc-uid", svc.Annotations[api.AnnotationOrigin])
	assert.Equal(t, "mid,leaf", svc.Annotations[api.AnnotationPath])
	assert.Equal(t, "a", svc.Annotations["team"])
	assert.NotContains(t, svc.Annotations, lastApplied)
	require.Len(t, svc.OwnerReferences, 1)
	assert.Equal(t, "Target", svc.OwnerReferences[0].Kind)
	assert.Contains(t, <-e.events.Events, api.ReasonReflectedAsClusterIP)

	// The parent's Service changes: the copy follows.
	parent, err := e.parent.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	parent.Spec.Ports = append(parent.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)})
	_, err = e.parent.CoreV1().Services("app").Update(e.ctx, parent, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.copyOf(t, "ports follow the parent", func(s *corev1.Service) bool { return len(s.Spec.Ports) == 2 })

	// The last selected delegate goes: so does the copy.
	require.NoError(t, e.child.CoreV1().Pods("app").Delete(e.ctx, "web-1", metav1.DeleteOptions{}))
	e.copyOf(t, "no delegate left: copy collected", nil)
	e.delegate(t, "web-2", map[string]string{"app": "web"})
	e.copyOf(t, "a delegate again: copy again", func(*corev1.Service) bool { return true })

	// The parent's Service goes: so does the copy.
	require.NoError(t, e.parent.CoreV1().Services("app").Delete(e.ctx, "web", metav1.DeleteOptions{}))
	e.copyOf(t, "parent Service deleted: copy collected", nil)
}

// Under the Prefixed mapping the copy is in the parent namespace's name
// here, follows its delegates there, and goes with the parent's.
func TestServiceReflectedIntoTheMappedNamespace(t *testing.T) {
	e := newServiceEnvIn(t, Namespaces{Prefix: "mid-"})
	e.delegate(t, "web-1", map[string]string{"app": "web"})
	_, err := e.parent.CoreV1().Services("app").Create(e.ctx, webService(corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	require.NoError(t, err)
	svc := e.copyOf(t, "the copy in mid-app", func(*corev1.Service) bool { return true })
	assert.Equal(t, "mid-app", svc.Namespace)
	_, err = e.child.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing under the parent's name")
	require.NoError(t, e.child.CoreV1().Pods("mid-app").Delete(e.ctx, "web-1", metav1.DeleteOptions{}))
	e.copyOf(t, "no delegate left: copy collected", nil)
	e.delegate(t, "web-2", map[string]string{"app": "web"})
	e.copyOf(t, "a delegate again: copy again", func(*corev1.Service) bool { return true })
	require.NoError(t, e.parent.CoreV1().Services("app").Delete(e.ctx, "web", metav1.DeleteOptions{}))
	e.copyOf(t, "parent Service deleted: copy collected", nil)
}

// Where the parent's ClusterIP is taken here (or out of this cluster's
// range), the copy gets an address this cluster allocates.
func TestServiceAtAnAddressOfItsOwn(t *testing.T) {
	e := newServiceEnv(t)
	e.child.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service); svc.Spec.ClusterIP == "10.96.0.10" {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, svc.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), svc.Spec.ClusterIP, "provided IP is already allocated")})
		}
		return false, nil, nil
	})
	e.delegate(t, "web-1", map[string]string{"app": "web"})
	_, err := e.parent.CoreV1().Services("app").Create(e.ctx, webService(corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	require.NoError(t, err)
	got := e.copyOf(t, "a copy", func(*corev1.Service) bool { return true })
	assert.Empty(t, got.Spec.ClusterIP, "this cluster allocates one")
}

func TestServiceHeadlessStaysHeadless(t *testing.T) {
	e := newServiceEnv(t)
	e.delegate(t, "web-1", map[string]string{"app": "web"})
	svc := webService(corev1.ServiceTypeClusterIP)
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	_, err := e.parent.CoreV1().Services("app").Create(e.ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	got := e.copyOf(t, "headless copy", func(*corev1.Service) bool { return true })
	assert.Equal(t, corev1.ClusterIPNone, got.Spec.ClusterIP)
}

func TestServiceNotReflected(t *testing.T) {
	cases := map[string]func(*corev1.Service){
		"no selector":                     func(s *corev1.Service) { s.Spec.Selector = nil },
		"already passed through leaf":     func(s *corev1.Service) { s.Annotations[api.AnnotationPath] = "leaf,mid" },
		"selects pods not forwarded here": func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "api"} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := newServiceEnv(t)
			e.delegate(t, "web-1", map[string]string{"app": "web"})
			svc := webService(corev1.ServiceTypeClusterIP)
			mutate(svc)
			_, err := e.parent.CoreV1().Services("app").Create(e.ctx, svc, metav1.CreateOptions{})
			require.NoError(t, err)
			e.decided(t)
			_, err = e.child.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "not reflected (%v)", err)
		})
	}
}

// An ExternalName Service of a namespace where a delegate runs is a DNS
// name its pods resolve here as in the parent; a Service changed from
// ClusterIP to ExternalName is made again as one (its address cannot go).
func TestServiceExternalNameReflected(t *testing.T) {
	e := newServiceEnv(t)
	e.delegate(t, "other", map[string]string{"app": "db"})
	_, err := e.parent.CoreV1().Services("app").Create(e.ctx, webService(corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	require.NoError(t, err)
	e.delegate(t, "web-1", map[string]string{"app": "web"})
	e.copyOf(t, "a ClusterIP copy", func(s *corev1.Service) bool { return s.Spec.Type == corev1.ServiceTypeClusterIP })

	parent, err := e.parent.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	parent.Spec.Type, parent.Spec.ExternalName, parent.Spec.ClusterIP, parent.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "web.example.org", "", nil
	parent.Spec.Selector, parent.Spec.SessionAffinity = nil, corev1.ServiceAffinityNone
	_, err = e.parent.CoreV1().Services("app").Update(e.ctx, parent, metav1.UpdateOptions{})
	require.NoError(t, err)
	svc := e.copyOf(t, "made again as ExternalName", func(s *corev1.Service) bool { return s.Spec.Type == corev1.ServiceTypeExternalName })
	assert.Equal(t, "web.example.org", svc.Spec.ExternalName)
	assert.Empty(t, svc.Spec.Selector)
	assert.Empty(t, svc.Spec.ClusterIP)
}

// A Service of the same name made here by someone else is left alone, and
// the collision is reported in both clusters.
func TestServiceNameTakenIsReported(t *testing.T) {
	e := newServiceEnv(t)
	own := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Labels: map[string]string{"owner": "user"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Port: 1}}}}
	_, err := e.child.CoreV1().Services("app").Create(e.ctx, own, metav1.CreateOptions{})
	require.NoError(t, err)
	e.delegate(t, "web-1", map[string]string{"app": "web"})
	_, err = e.parent.CoreV1().Services("app").Create(e.ctx, webService(corev1.ServiceTypeClusterIP), metav1.CreateOptions{})
	require.NoError(t, err)

	select {
	case ev := <-e.events.Events:
		assert.True(t, strings.HasPrefix(ev, "Warning "+api.ReasonServiceNameTaken), ev)
		assert.Contains(t, ev, "rename one of the two")
	case <-time.After(5 * time.Second):
		t.Fatal("no event on the parent's Service")
	}
	select {
	case ev := <-e.childE.Events:
		assert.Contains(t, ev, api.ReasonServiceNameTaken)
	case <-time.After(5 * time.Second):
		t.Fatal("no event on this cluster's Service")
	}
	got, err := e.child.CoreV1().Services("app").Get(e.ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, own.Spec.Selector, got.Spec.Selector, "the user's Service is untouched")
	assert.Equal(t, own.Labels, got.Labels)
}

func TestSameServiceIgnoresWhatTheServerFillsIn(t *testing.T) {
	want := buildService(webService(corev1.ServiceTypeClusterIP), &Config{TargetName: "t", TargetUID: "u", ParentName: "p"}, []string{"p", "c"})
	cur := want.DeepCopy()
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "10.0.0.7", []string{"10.0.0.7"}
	cur.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	require.True(t, sameService(cur, want))
	cur.Spec.Selector = map[string]string{"app": "other"}
	require.False(t, sameService(cur, want), "another selector")
}
