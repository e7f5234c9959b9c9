package forward

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
)

func TestNextPath(t *testing.T) {
	podWithPath := func(path string) *corev1.Pod {
		p := &corev1.Pod{}
		if path != "" {
			p.Annotations = map[string]string{api.AnnotationPath: path}
		}
		return p
	}
	tests := []struct {
		name     string
		path     string
		self     string
		hopLimit int
		want     string
		wantErr  string
	}{
		{name: "pod created in the parent", path: "", self: "east", hopLimit: 8, want: "root,east"},
		{name: "second hop", path: "root,east", self: "east-1", hopLimit: 8, want: "root,east,east-1"},
		{name: "loop", path: "root,east,west", self: "east", hopLimit: 8, wantErr: "already passed through cluster east"},
		{name: "back to the root", path: "root,east", self: "root", hopLimit: 8, wantErr: "already passed through cluster root"},
		{name: "at the hop limit", path: "a,b,c", self: "d", hopLimit: 3, want: "a,b,c,d"},
		{name: "beyond the hop limit", path: "a,b,c,d", self: "e", hopLimit: 3, wantErr: "more than the hop limit 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nextPath(podWithPath(tt.path), "root", tt.self, tt.hopLimit)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, strings.Join(got, ","))
		})
	}
}

func TestBuildDelegate(t *testing.T) {
	prio := int32(1000)
	parent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-1",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"team": "a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid", Controller: new(bool)}},
		},
		Spec: corev1.PodSpec{
			NodeName:     "east",
			NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
			Tolerations:  []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Priority:     &prio, PriorityClassName: "high",
			Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	*parent.OwnerReferences[0].Controller = true
	cfg := &Config{TargetName: "to-root", TargetUID: "target-uid", ClusterName: "east", ParentName: "root"}
	d := buildDelegate(parent, "web-1", cfg, []string{"root", "east"})

	require.Equal(t, "shop", d.Namespace)
	require.Empty(t, d.Spec.NodeName, "node cleared")
	require.Nil(t, d.Spec.Priority, "priority recomputed from the class here")
	require.Equal(t, "high", d.Spec.PriorityClassName)
	require.Equal(t, parent.Spec.NodeSelector, d.Spec.NodeSelector)
	require.Equal(t, parent.Spec.Tolerations, d.Spec.Tolerations)
	require.Empty(t, d.Status.Phase, "status cleared")
	require.Equal(t, "root/uid-1", d.Annotations[api.AnnotationOrigin])
	require.Equal(t, "root,east", d.Annotations[api.AnnotationPath])
	require.Equal(t, "shop/web-1", d.Annotations[api.AnnotationParentPod])
	require.Equal(t, "Job", d.Annotations[api.AnnotationOwnerKind])
	require.Equal(t, "a", d.Annotations["team"])
	require.Equal(t, "web", d.Labels["app"])
	require.Equal(t, "target-uid", d.Labels[api.LabelTargetUID])
	ref := metav1.GetControllerOf(d)
	require.NotNil(t, ref)
	require.Equal(t, "Target", ref.Kind)
	require.Equal(t, "to-root", ref.Name)
	require.NotContains(t, parent.Labels, api.LabelTargetUID, "the parent pod is not mutated")

	// A later hop keeps the original owner kind.
	again := buildDelegate(d, "web-1", &Config{TargetName: "to-east", TargetUID: "t2", ClusterName: "east-1", ParentName: "east"}, []string{"root", "east", "east-1"})
	require.Equal(t, "Job", again.Annotations[api.AnnotationOwnerKind])
}

func TestDelegateName(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1"}}
	require.Equal(t, "web", delegateName(p, false))
	taken := delegateName(p, true)
	require.True(t, strings.HasPrefix(taken, "web-"))
	require.Equal(t, taken, delegateName(p, true), "stable for one pod")
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u2"}}
	require.NotEqual(t, taken, delegateName(other, true), "differs between parent pods")
	long := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 253), UID: "u3"}}
	require.LessOrEqual(t, len(delegateName(long, true)), 253)
}

func TestTerminalStatus(t *testing.T) {
	parent := &corev1.Pod{Status: corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	d := &corev1.Pod{Status: corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "child"}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		},
	}}
	st := terminalStatus(parent, d, metav1.Now().Time)
	require.Equal(t, corev1.PodFailed, st.Phase, "a container whose end was not seen ended unknown, as a kubelet says")
	require.NotNil(t, st.ContainerStatuses[0].State.Terminated)
	require.Equal(t, int32(137), st.ContainerStatuses[0].State.Terminated.ExitCode)
	require.False(t, st.ContainerStatuses[0].Ready)
	require.Equal(t, corev1.PodQOSBestEffort, st.QOSClass)
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled {
			require.Empty(t, c.Reason, "the parent keeps its own scheduling condition")
		}
		if c.Type == corev1.PodReady {
			require.Equal(t, corev1.ConditionFalse, c.Status)
		}
	}
	d.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
	require.Equal(t, corev1.PodFailed, terminalStatus(parent, d, metav1.Now().Time).Phase)
	d.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	require.Equal(t, corev1.PodSucceeded, terminalStatus(parent, d, metav1.Now().Time).Phase, "every container's end seen, each 0")
}

func TestReferences(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "v1", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "v2", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec-proj"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec-env"}, Key: "k"}}}}}},
	}}
	got := map[depKey]bool{}
	for _, k := range references(pod) {
		got[k] = true
	}
	want := map[depKey]bool{
		{kindSecret, "ns", "pull"}: true, {kindConfigMap, "ns", "cm-vol"}: true, {kindSecret, "ns", "sec-proj"}: true,
		{kindConfigMap, "ns", "cm-init"}: true, {kindSecret, "ns", "sec-env"}: true,
	}
	require.Equal(t, want, got, "kube-root-ca.crt is each cluster's own and is not copied")
}
