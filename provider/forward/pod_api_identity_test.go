package forward

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// apiPod is a pod as the parent's ServiceAccount admission leaves it: the
// kube-api-access volume (a 10-minute token here), mounted.
func apiPod() *corev1.Pod {
	pod := neverPod()
	pod.Spec.ServiceAccountName = "reader"
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](600), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "mine"}}
	return pod
}

// A pod's identity is the parent's: its delegate reads a token the parent
// issued for the pod's service account, bound to the pod, and the
// parent's CA, from a Secret owned by the delegate, and calls the parent's
// address; the token is issued again once half its life has passed, and
// not before.
func TestPodIdentityFromTheParent(t *testing.T) {
	pod := apiPod()
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(pod))
	clk := clocktesting.NewFakeClock(time.Now())
	parent := fake.NewClientset(pod)
	var issued atomic.Int32
	var requests []*authenticationv1.TokenRequest
	parent.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		requests = append(requests, tr)
		tr.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", issued.Add(1)),
			ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	child := fake.NewClientset()
	p, err := New(Config{TargetName: "to-root", TargetUID: testTargetUID, ClusterName: "mid", ParentName: "root",
		Parent: parent, ParentPods: corelisters.NewPodLister(parentPods), Child: child, Clock: clk,
		OriginAPI: &OriginAPI{URL: "https://10.250.0.2:6443", CA: []byte("root CA")}})
	require.NoError(t, err)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))

	require.Len(t, requests, 1)
	require.Equal(t, int64(600), *requests[0].Spec.ExpirationSeconds)
	require.Equal(t, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "job-1", UID: "u1"}, requests[0].Spec.BoundObjectRef)
	d, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	name := identitySecretName(pod)
	require.Equal(t, name, d.Annotations[api.AnnotationIdentity])
	sources := d.Spec.Volumes[0].Projected.Sources
	require.Equal(t, []corev1.KeyToPath{{Key: "token-0", Path: "token"}}, sources[0].Secret.Items)
	require.Equal(t, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}, sources[1].Secret.Items)
	require.NotNil(t, sources[2].DownwardAPI, "the namespace file stays")
	for _, s := range sources {
		require.Nil(t, s.ServiceAccountToken, "no token of this cluster")
		require.Nil(t, s.ConfigMap, "no CA of this cluster")
	}
	require.Equal(t, []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "mine"}, {Name: "KUBERNETES_SERVICE_HOST", Value: "10.250.0.2"},
		{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: "6443"}}, d.Spec.Containers[0].Env, "the pod's own variables win")
	secret, err := child.CoreV1().Secrets("app").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "token-1", string(secret.Data["token-0"]))
	require.Equal(t, "root CA", string(secret.Data["ca.crt"]))
	require.Equal(t, string(testTargetUID), secret.Labels[api.LabelTargetUID])
	require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "job-1", UID: d.UID, BlockOwnerDeletion: ptr.To(false)}},
		secret.OwnerReferences, "goes with the delegate")

	// An update of the parent pod keeps the delegate's identity.
	require.NoError(t, p.delegates.GetStore().Add(d))
	changed := pod.DeepCopy()
	changed.Labels = map[string]string{"tier": "new"}
	require.NoError(t, p.UpdatePod(t.Context(), changed))
	d, err = child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "new", d.Labels["tier"])
	require.Equal(t, name, d.Annotations[api.AnnotationIdentity])
	require.NoError(t, p.delegates.GetStore().Update(d))

	// The refresh: nothing before half the token's life, a new token
	// after.
	clk.Step(4 * time.Minute)
	p.ids.refresh(t.Context())
	require.EqualValues(t, 1, issued.Load())
	clk.Step(2 * time.Minute)
	child.ClearActions()
	p.ids.refresh(t.Context())
	require.EqualValues(t, 2, issued.Load())
	require.Equal(t, []string{"patch"}, secretVerbs(child), "a refresh writes the Secret it wrote before in one request")
	secret, err = child.CoreV1().Secrets("app").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "token-2", string(secret.Data["token-0"]))

	// A restarted agent knows no due time: it issues at once, and finds
	// the Secret there.
	p.ids.due = map[types.UID]time.Time{}
	child.ClearActions()
	p.ids.refresh(t.Context())
	require.EqualValues(t, 3, issued.Load())
	require.Equal(t, []string{"create", "patch"}, secretVerbs(child))
	// A Secret deleted meanwhile is made again.
	require.NoError(t, child.CoreV1().Secrets("app").Delete(t.Context(), name, metav1.DeleteOptions{}))
	clk.Step(6 * time.Minute)
	p.ids.refresh(t.Context())
	secret, err = child.CoreV1().Secrets("app").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "token-4", string(secret.Data["token-0"]))
}

// secretVerbs are the verbs of the client's requests on Secrets.
func secretVerbs(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "secrets" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// A level below the one that issued a pod's identity: the parent pod (the
// delegate above) reads its tokens from the Secret the level above keeps,
// and carries its annotation. This level issues nothing, at creation or at
// any refresh (the Secret is copied down as any other the pod reads).
func TestPodIdentityIssuedAboveIsLeftAlone(t *testing.T) {
	atRoot := apiPod()
	above := atRoot.DeepCopy() // its delegate in mid, as mid's agent made it
	above.UID, above.Annotations = "u1-in-mid", map[string]string{}
	require.NoError(t, withIdentity(above, atRoot, &OriginAPI{URL: "https://10.250.0.2:6443", CA: []byte("root CA")}))
	require.Empty(t, tokenSources(above))
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(above))
	clk := clocktesting.NewFakeClock(time.Now())
	parent := fake.NewClientset(above)
	child := fake.NewClientset()
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid",
		Parent: parent, ParentPods: corelisters.NewPodLister(parentPods), Child: child, Clock: clk,
		OriginAPI: &OriginAPI{URL: "https://10.250.0.3:6443", CA: []byte("mid CA")}})
	require.NoError(t, err)
	require.NoError(t, p.CreatePod(t.Context(), above.DeepCopy()))
	d, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, above.Annotations[api.AnnotationIdentity], d.Annotations[api.AnnotationIdentity], "the annotation as it came")
	require.NoError(t, p.delegates.GetStore().Add(d))
	for range 3 {
		p.ids.refresh(t.Context())
		clk.Step(identityScan)
	}
	for _, a := range append(parent.Actions(), child.Actions()...) {
		token := a.GetResource().Resource == "serviceaccounts" && a.GetSubresource() == "token"
		secretWrite := a.GetResource().Resource == "secrets" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch"
		require.False(t, token || secretWrite,
			"%s %s/%s at this level", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
	}
}

// Without OriginAPI, or for a pod without projected tokens, the delegate
// keeps the spec as it is.
func TestPodIdentityLocal(t *testing.T) {
	pod := apiPod()
	p, child, _, _, _ := runFailing(t, pod)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	d, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, d.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken)
	require.NotContains(t, d.Annotations, api.AnnotationIdentity)
	require.Empty(t, tokenSources(neverPod()))
}

// Where the parent's gateway relays its API server, the delegate calls it
// there: a name its certificate holds (kubernetes.default.svc for a URL
// by IP, else the URL's host first) resolved to the relay's address by a
// host alias after the pod's own, and the relay's port; while the parent
// offers no relay, its URL as before.
func TestPodIdentityThroughTheRelay(t *testing.T) {
	for _, c := range []struct {
		name, url, relay string
		wantHost         string
		wantPort         string
		wantNames        []string
	}{
		{"URL by IP", "https://10.250.0.2:6443", "10.251.0.2:443", "kubernetes.default.svc", "443", apiServerNames},
		{"URL by name", "https://root.example.org:6443", "10.251.0.2:8443", "root.example.org", "8443",
			append([]string{"root.example.org"}, apiServerNames...)},
		{"no relay", "https://10.250.0.2:6443", "", "10.250.0.2", "6443", nil},
		{"a bad relay", "https://10.250.0.2:6443", "nowhere", "10.250.0.2", "6443", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := apiPod()
			pod.Spec.HostAliases = []corev1.HostAlias{{IP: "192.0.2.1", Hostnames: []string{"mine.example"}}}
			pod.Spec.Containers[0].Env = nil
			d := pod.DeepCopy()
			d.Annotations = map[string]string{}
			relay := c.relay
			require.NoError(t, withIdentity(d, pod, &OriginAPI{URL: c.url, CA: []byte("root CA"), Relay: func() (string, bool) { return relay, true }}))
			require.Equal(t, []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: c.wantHost}, {Name: "KUBERNETES_SERVICE_PORT", Value: c.wantPort},
				{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: c.wantPort}}, d.Spec.Containers[0].Env)
			require.Equal(t, pod.Spec.HostAliases[0], d.Spec.HostAliases[0], "the pod's own alias first")
			if c.wantNames == nil {
				require.Len(t, d.Spec.HostAliases, 1)
				return
			}
			require.Len(t, d.Spec.HostAliases, 2)
			require.Equal(t, "10.251.0.2", d.Spec.HostAliases[1].IP)
			require.Equal(t, c.wantNames, d.Spec.HostAliases[1].Hostnames)
		})
	}
}

// While the parent has not said whether its gateway relays its API
// server, a pod that would get its identity waits instead of getting a
// delegate that keeps calling the URL: its write is retried here (the
// parent pod, told nothing, is not failed, even with restartPolicy Never),
// with an event that says why; once the parent has said, the retry makes
// the delegate, which calls the relay. A pod without tokens does not wait.
func TestPodIdentityWaitsForTheParentToState(t *testing.T) {
	pod := apiPod()
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(pod))
	parent := fake.NewClientset(pod)
	parent.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}
		return true, tr, nil
	})
	child := fake.NewClientset()
	var relay atomic.Pointer[string]
	known := func() (string, bool) {
		if r := relay.Load(); r != nil {
			return *r, true
		}
		return "", false
	}
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := record.NewFakeRecorder(10)
	p, err := New(Config{TargetName: "to-root", TargetUID: testTargetUID, ClusterName: "mid", ParentName: "root",
		Parent: parent, ParentPods: corelisters.NewPodLister(parentPods), Child: child, Clock: clk, Recorder: recorder,
		OriginAPI: &OriginAPI{URL: "https://10.250.0.2:6443", CA: []byte("root CA"), Relay: known}})
	require.NoError(t, err)

	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()), "retried here, not reported to virtual-kubelet")
	_, err = child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.Error(t, err, "no delegate yet")
	event := <-recorder.Events
	require.Contains(t, event, api.ReasonDelegateRetry)
	require.Contains(t, event, "waits for the parent to state")
	require.Contains(t, event, api.AnnotationGatewayParent)

	noTokens := neverPod()
	noTokens.Name, noTokens.UID = "plain", "u2"
	require.NoError(t, parentPods.Add(noTokens))
	require.NoError(t, p.CreatePod(t.Context(), noTokens.DeepCopy()))
	_, err = child.CoreV1().Pods("app").Get(t.Context(), "plain", metav1.GetOptions{})
	require.NoError(t, err, "a pod without tokens has nothing to wait for")

	addr := "10.251.0.2:443"
	relay.Store(&addr)
	clk.Step(retryBase)
	var d *corev1.Pod
	require.Eventually(t, func() bool {
		d, err = child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the retry makes the delegate once the parent has said")
	require.Contains(t, d.Spec.Containers[0].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "kubernetes.default.svc"})
	require.Equal(t, "10.251.0.2", d.Spec.HostAliases[len(d.Spec.HostAliases)-1].IP)
}

// Which delegates get the parent's identity: with --pod-api=origin every
// pod with tokens, through the relay or at the URL; with auto
// (RelayOnly) only where the parent relays its API server, else the
// kubelet here mounts this cluster's; never a pod without tokens; and no
// decision while the parent has not said whether it relays.
func TestWithParentIdentity(t *testing.T) {
	relay := func(addr string, known bool) func() (string, bool) {
		return func() (string, bool) { return addr, known }
	}
	tests := []struct {
		name    string
		origin  *OriginAPI
		tokens  bool
		want    bool
		wantErr error
	}{
		{name: "local", origin: nil, tokens: true, want: false},
		{name: "origin without gateways", origin: &OriginAPI{}, tokens: true, want: true},
		{name: "origin, no relay offered: the URL", origin: &OriginAPI{Relay: relay("", true)}, tokens: true, want: true},
		{name: "origin through the relay", origin: &OriginAPI{Relay: relay("10.251.0.2:443", true)}, tokens: true, want: true},
		{name: "auto, relay offered", origin: &OriginAPI{Relay: relay("10.251.0.2:443", true), RelayOnly: true}, tokens: true, want: true},
		{name: "auto, no relay offered: this cluster's", origin: &OriginAPI{Relay: relay("", true), RelayOnly: true}, tokens: true, want: false},
		{name: "auto, not said yet", origin: &OriginAPI{Relay: relay("", false), RelayOnly: true}, tokens: true, wantErr: errRelayUnknown},
		{name: "no tokens", origin: &OriginAPI{Relay: relay("", false)}, tokens: false, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := apiPod()
			if !tt.tokens {
				pod = neverPod()
			}
			p := &Provider{cfg: Config{OriginAPI: tt.origin}}
			got, err := p.withParentIdentity(pod)
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, tt.want, got)
		})
	}
}

// The same through a reservation: the held delegate, released once the
// parent pod is bound here, issues nothing either; the Secret of the level
// above is copied down as any other the pod reads.
func TestPodIdentityIssuedAboveIsLeftAloneWhenReserved(t *testing.T) {
	atRoot := apiPod()
	above := atRoot.DeepCopy() // its delegate in mid, not bound yet
	above.UID, above.Annotations, above.Spec.NodeName = "u1-in-mid", map[string]string{}, ""
	require.NoError(t, withIdentity(above, atRoot, &OriginAPI{URL: "https://10.250.0.2:6443", CA: []byte("root CA")}))
	name := above.Annotations[api.AnnotationIdentity]
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: above.Namespace},
		Data: map[string][]byte{identityCAKey: []byte("root CA"), "token-0": []byte("root's token")}}
	parent := fake.NewClientset(above, identity)
	p, child, parentPods := runProvider(t, func(c *Config) {
		c.ParentName, c.Parent = "mid", parent
		c.OriginAPI = &OriginAPI{URL: "https://10.250.0.3:6443", CA: []byte("mid CA")}
	})
	done := reserveInBackground(t, p, above)
	d := heldDelegate(t, p, above)
	holdOn(t, child, d, "node-1")
	require.NoError(t, (<-done).err)
	require.NoError(t, p.CreatePod(t.Context(), boundHere(t, parentPods, above)))

	got, err := child.CoreV1().Pods(d.Namespace).Get(t.Context(), d.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, api.HoldReleased, got.Annotations[api.AnnotationHold])
	secrets, err := child.CoreV1().Secrets(above.Namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{name}, names, "the level above's identity Secret, copied, and no other")
	for _, a := range parent.Actions() {
		require.False(t, a.GetResource().Resource == "serviceaccounts" && a.GetSubresource() == "token", "a token requested at this level")
	}
}

// A token the parent refuses because its own caches have not yet seen
// the pod bound here (kube-apiserver's node restriction reads the pod
// from its informer) is asked again: the pod is not failed, its delegate
// comes once the parent has caught up, and the parent pod carries a
// Warning event that says why meanwhile.
func TestTokenAskedAgainWhileTheParentLags(t *testing.T) {
	pod := apiPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(pod))
	clk := clocktesting.NewFakeClock(time.Now())
	parent := fake.NewClientset(pod)
	sa := schema.GroupResource{Resource: "serviceaccounts"}
	refusals := []error{
		apierrors.NewForbidden(sa, "default", errors.New("node requested token bound to a pod scheduled on a different node")),
		apierrors.NewNotFound(schema.GroupResource{Resource: "pod"}, pod.Name),
	}
	var calls atomic.Int32
	parent.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		if n := int(calls.Add(1)); n <= len(refusals) {
			return true, nil, refusals[n-1]
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{Token: "token",
			ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	child := fake.NewClientset()
	rec := record.NewFakeRecorder(20)
	p, err := New(Config{TargetName: "to-root", TargetUID: testTargetUID, ClusterName: "mid", ParentName: "root",
		Parent: parent, ParentPods: corelisters.NewPodLister(parentPods), Child: child, Clock: clk, Recorder: rec,
		OriginAPI: &OriginAPI{URL: "https://10.250.0.2:6443", CA: []byte("root CA")}})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()), "told to virtual-kubelet, the pod would be failed")
	select {
	case e := <-rec.Events:
		require.Contains(t, e, api.ReasonDelegateRetry)
		require.Contains(t, e, "scheduled on a different node")
		require.Contains(t, e, "trails")
	default:
		t.Fatal("no event on the parent pod")
	}
	// Asked again after each back-off, until the parent has the pod.
	require.Eventually(t, func() bool {
		clk.Step(retryBase)
		_, err := child.CoreV1().Pods("app").Get(t.Context(), pod.Name, metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "delegate never created")
	require.EqualValues(t, 3, calls.Load())

	// A service account that is not there is not the parent lagging.
	require.False(t, parentLags(apierrors.NewNotFound(sa, "default")))
	require.False(t, parentLags(apierrors.NewForbidden(sa, "default", errors.New("node requested token not bound to a pod"))))
}
