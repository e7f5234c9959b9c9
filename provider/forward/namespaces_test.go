package forward

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

func TestNamespacesChild(t *testing.T) {
	tests := []struct {
		name   string
		n      Namespaces
		ns     string
		want   string
		refuse string // part of the reason, when refused
	}{
		{name: "same name", ns: "prod", want: "prod"},
		{name: "a parent's system namespace stays home", ns: "kube-system", refuse: "system namespace"},
		{name: "nestlet's own too", ns: api.DefaultNamespace, refuse: "system namespace"},
		{name: "prefixed", n: Namespaces{Prefix: "east-"}, ns: "prod", want: "east-prod"},
		{name: "listed", n: Namespaces{Accept: []string{"prod"}}, ns: "prod", want: "prod"},
		{name: "not listed", n: Namespaces{Accept: []string{"prod"}}, ns: "dev", refuse: "namespaces prod only"},
		{name: "listed system namespace, prefixed", n: Namespaces{Accept: []string{"kube-system"}, Prefix: "east-"}, ns: "kube-system", want: "east-kube-system"},
		{name: "listed system namespace, same name: never this cluster's own", n: Namespaces{Accept: []string{"*"}}, ns: "kube-system", refuse: "system namespace here"},
		{name: "the agent's namespace here", n: Namespaces{Own: []string{"agents"}}, ns: "agents", refuse: "system namespace here"},
		{name: "too long once prefixed", n: Namespaces{Prefix: "a-very-long-parent-name-"}, ns: "an-even-longer-namespace-name-of-the-parent-x", refuse: "shorten"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := tt.n.Child(tt.ns)
			if tt.refuse != "" {
				require.Empty(t, got)
				require.Contains(t, why, tt.refuse)
				return
			}
			require.Empty(t, why)
			require.Equal(t, tt.want, got)
			back, ok := tt.n.Parent(got)
			require.True(t, ok)
			require.Equal(t, tt.ns, back, "the name here maps back")
		})
	}
	_, ok := Namespaces{Prefix: "east-"}.Parent("west-prod")
	require.False(t, ok, "another parent's namespace is not this one's")
}

func TestPodSecurityViolation(t *testing.T) {
	privileged := neverPod()
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	require.Empty(t, podSecurityViolation("", "leaf", privileged), "unset: no limit")
	require.Empty(t, podSecurityViolation("privileged", "leaf", privileged))
	why := podSecurityViolation("baseline", "leaf", privileged)
	require.Contains(t, why, `violates PodSecurity "baseline:latest"`)
	require.Contains(t, why, "privileged")
	require.Contains(t, why, "cluster leaf")
	require.Empty(t, podSecurityViolation("baseline", "leaf", neverPod()), "a plain pod meets baseline")
	require.Contains(t, podSecurityViolation("restricted", "leaf", neverPod()), "runAsNonRoot", "but not restricted")
	require.Error(t, ValidPodSecurity("strict"))
}

// prefixedProvider runs a Provider (as reserving does) that names the
// parent's namespaces "root-<name>" here, cfg changing its Config, over a
// parent holding the objects given.
func prefixedProvider(t *testing.T, cfg func(*Config), inParent ...runtime.Object) (*Provider, *fake.Clientset, cache.Indexer) {
	t.Helper()
	return runProvider(t, func(c *Config) {
		c.Namespaces = Namespaces{Prefix: "root-"}
		c.Parent = fake.NewClientset(inParent...)
		if cfg != nil {
			cfg(c)
		}
	})
}

// With the Prefixed mapping, a pod of the parent's namespace app is made
// in root-app here with what it references; its status, its kubelet API
// and a second look find it by the parent's name.
func TestPrefixedNamespaceFollowsThePod(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "app", UID: "cm-uid", ResourceVersion: "1"}, Data: map[string]string{"from": "root"}}
	p, child, parentPods := prefixedProvider(t, nil, cm)
	pod := neverPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	pod.Spec.ServiceAccountName = "runner"
	require.NoError(t, parentPods.Add(pod))
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))

	ns, err := child.CoreV1().Namespaces().Get(t.Context(), "root-app", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nestlet", ns.Labels["app.kubernetes.io/managed-by"])
	require.Len(t, ns.OwnerReferences, 1, "a namespace of this parent's alone goes with its Target")
	require.Equal(t, "Target", ns.OwnerReferences[0].Kind)
	d, err := child.CoreV1().Pods("root-app").Get(t.Context(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "app/"+pod.Name, d.Annotations[api.AnnotationParentPod], "the parent's namespace is recorded")
	_, err = child.CoreV1().Pods("app").Get(t.Context(), pod.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing in the namespace of the parent's name")
	got, err := child.CoreV1().ConfigMaps("root-app").Get(t.Context(), "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "root", got.Data["from"])
	_, err = child.CoreV1().ServiceAccounts("root-app").Get(t.Context(), "runner", metav1.GetOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return p.delegateOf("app", pod.Name, "") != nil }, 10*time.Second, 5*time.Millisecond)
	found, err := p.Delegate("app", pod.Name)
	require.NoError(t, err)
	require.Equal(t, "root-app", found.Namespace, "the kubelet API reaches the delegate by the parent's name")
	require.Equal(t, []depKey{{kindConfigMap, "app", "app-config"}}, p.delegateReferences(found), "its references are named as in the parent")
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	all, err := child.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, all.Items, 1, "idempotent under the mapping")
}

// A pod this cluster does not take (its namespace, its Pod Security) is
// refused at reservation with the reason, and fails with it when bound
// first; no delegate and no namespace is made for it.
func TestRefusedHere(t *testing.T) {
	p, child, parentPods := prefixedProvider(t, func(c *Config) {
		c.Namespaces = Namespaces{}
		c.PodSecurity = "baseline"
	})
	system := unboundPod()
	system.Namespace = "kube-system"
	res, err := p.Reserve(t.Context(), system, time.Second)
	require.NoError(t, err)
	require.False(t, res.Held)
	require.Contains(t, res.Unschedulable, "system namespace")

	privileged := unboundPod()
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	res, err = p.Reserve(t.Context(), privileged, time.Second)
	require.NoError(t, err)
	require.Contains(t, res.Unschedulable, `violates PodSecurity "baseline:latest"`)

	var sent *corev1.Pod
	p.NotifyPods(t.Context(), func(pod *corev1.Pod) { sent = pod })
	bound := privileged.DeepCopy()
	bound.Spec.NodeName = "leaf"
	require.NoError(t, parentPods.Add(bound))
	require.NoError(t, p.CreatePod(t.Context(), bound))
	require.NotNil(t, sent)
	require.Equal(t, corev1.PodFailed, sent.Status.Phase)
	require.Equal(t, api.ReasonNotAdmitted, sent.Status.Reason)
	require.Contains(t, sent.Status.Message, "privileged")
	all, err := child.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, all.Items)
	nss, err := child.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, nss.Items)
}

// The namespaces made for a parent held to a Pod Security level are
// labelled for this cluster's own admission to enforce it.
func TestNamespaceLabelledWithPodSecurity(t *testing.T) {
	p, child, parentPods := prefixedProvider(t, func(c *Config) { c.PodSecurity = "restricted" })
	pod := neverPod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	require.NoError(t, parentPods.Add(pod))
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	ns, err := child.CoreV1().Namespaces().Get(t.Context(), "root-app", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
}

// Two parents sharing a namespace here (the Same mapping): a pod whose
// ConfigMap is already another parent's copy here gets no place, with the
// reason and what to do; the copy is left as it is.
func TestReserveRefusesAnotherParentsCopy(t *testing.T) {
	p, child, _ := prefixedProvider(t, func(c *Config) { c.Namespaces = Namespaces{} })
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "app",
		Labels: map[string]string{api.LabelTargetUID: "another-target"}}, Data: map[string]string{"from": "the other parent"}}
	_, err := child.CoreV1().ConfigMaps("app").Create(t.Context(), theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := unboundPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	res, err := p.Reserve(t.Context(), pod, time.Second)
	require.NoError(t, err)
	require.False(t, res.Held)
	require.Contains(t, res.Unschedulable, "ConfigMap app/app-config in cluster leaf is not a copy of this parent's")
	require.Contains(t, res.Unschedulable, "mapping Prefixed")
	got, err := child.CoreV1().ConfigMaps("app").Get(t.Context(), "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "the other parent", got.Data["from"], "never overwritten")
	pods, err := child.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, pods.Items, "no held delegate")
}

// A parent capped at 2 CPU here: a pod that would take its delegates past
// it gets no place, with the reason; one within it is held.
func TestReserveWithinLimits(t *testing.T) {
	p, child, _ := prefixedProvider(t, func(c *Config) {
		c.Namespaces = Namespaces{}
		c.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	})
	running := neverPod()
	running.Name, running.UID = "running", "u-running"
	running.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
	d := buildDelegate(running, running.Name, &p.cfg, []string{"root", "leaf"})
	_, err := child.CoreV1().Pods(d.Namespace).Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.delegateOf("app", "running", "") != nil }, 10*time.Second, 5*time.Millisecond)

	big := unboundPod()
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	res, err := p.Reserve(t.Context(), big, time.Second)
	require.NoError(t, err)
	require.False(t, res.Held)
	require.Contains(t, res.Unschedulable, "caps what this parent's pods request there (Target spec.limits): cpu 1 asked, 1500m taken of 2")

	small := unboundPod()
	small.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	require.Empty(t, p.overLimits(small), "within the cap")
}

// A parent capped at 2Gi of claimed storage here: a pod whose claim would
// pass it is failed with the reason (pods with claims are bound first),
// and no claim is made; within the cap, its claim is made.
func TestStorageWithinLimits(t *testing.T) {
	claim := func(name, size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", UID: types.UID("uid-" + name)},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	leafNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf"}}
	p, child, parentPods := prefixedProvider(t, func(c *Config) {
		c.Namespaces = Namespaces{}
		c.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	}, claim("small", "1Gi"), claim("big", "2Gi"), leafNode)
	withClaim := func(name, claimName string) *corev1.Pod {
		pod := neverPod()
		pod.Name, pod.UID = name, types.UID("u-"+name)
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}
		require.NoError(t, parentPods.Add(pod))
		return pod
	}
	var sent []*corev1.Pod
	p.NotifyPods(t.Context(), func(pod *corev1.Pod) { sent = append(sent, pod) })

	require.NoError(t, p.CreatePod(t.Context(), withClaim("first", "small")))
	_, err := child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "small", metav1.GetOptions{})
	require.NoError(t, err, "within the cap: the claim is made")
	require.Empty(t, sent)

	require.NoError(t, p.CreatePod(t.Context(), withClaim("second", "big")))
	require.Len(t, sent, 1)
	require.Equal(t, corev1.PodFailed, sent[0].Status.Phase)
	require.Contains(t, sent[0].Status.Message, "caps the storage this parent's claims request there (Target spec.limits): storage 2Gi asked, 1Gi taken of 2Gi")
	_, err = child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "big", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "past the cap: no claim")

	why, err := p.overStorage(t.Context(), withClaim("third", "small"))
	require.NoError(t, err)
	require.Empty(t, why, "a claim made already counts once")
}
