package child

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

func TestValidateSpec(t *testing.T) {
	noSchedule := func(key string) corev1.Taint {
		return corev1.Taint{Key: key, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	}
	tests := []struct {
		name        string
		clusterName string
		caBundle    string
		labels      map[string]string
		taints      []corev1.Taint
		tenancy     func(*v1alpha1.TargetSpec)
		// wantIn are parts of the message; none means the spec is valid.
		wantIn []string
	}{
		{name: "empty spec"},
		{
			name: "labels and taints a node may set",
			labels: map[string]string{
				"example.com/team":                 "a",
				"tier":                             "gold",
				"topology.kubernetes.io/zone":      "z1",
				"node.kubernetes.io/instance-type": "big",
				"kubernetes.io/arch":               "arm64",
			},
			taints: []corev1.Taint{noSchedule("example.com/dedicated"), noSchedule("gpu")},
		},
		{name: "kubernetes.io label", labels: map[string]string{"kubernetes.io/team": "a"}, wantIn: []string{`"kubernetes.io/team" may not be set by a node`}},
		{name: "k8s.io subdomain label", labels: map[string]string{"foo.k8s.io/x": "a"}, wantIn: []string{`"foo.k8s.io/x" may not be set by a node`}},
		{name: "node role label", labels: map[string]string{"node-role.kubernetes.io/worker": ""}, wantIn: []string{`"node-role.kubernetes.io/worker" may not be set by a node`}},
		{name: "node-restriction label", labels: map[string]string{"node-restriction.kubernetes.io/x": "a"}, wantIn: []string{`"node-restriction.kubernetes.io/x" may not be set by a node`}},
		{name: "cluster label", labels: map[string]string{"nestlet.io/cluster": "other"}, wantIn: []string{`label "nestlet.io/cluster" is set by Nestlet`}},
		{name: "node type label", labels: map[string]string{"type": "real"}, wantIn: []string{`label "type" is set by Nestlet`}},
		{name: "invalid label key", labels: map[string]string{"bad key": "a"}, wantIn: []string{`label key "bad key"`}},
		{name: "invalid label value", labels: map[string]string{"example.com/team": "no spaces"}, wantIn: []string{`label example.com/team value "no spaces"`}},
		{name: "provider taint", taints: []corev1.Taint{noSchedule("virtual-kubelet.io/provider")}, wantIn: []string{`taint "virtual-kubelet.io/provider" is set by Nestlet`}},
		{name: "version skew taint", taints: []corev1.Taint{noSchedule("nestlet.io/version-skew")}, wantIn: []string{`taint "nestlet.io/version-skew" is set by Nestlet`}},
		{name: "invalid taint key", taints: []corev1.Taint{noSchedule("bad/key/x")}, wantIn: []string{`taint key "bad/key/x"`}},
		{name: "63-character name", clusterName: strings.Repeat("a", 63)},
		{name: "64-character name", clusterName: strings.Repeat("a", 64), wantIn: []string{"clusterName", "label nestlet.io/cluster", "63"}},
		{name: "a CA bundle that is not PEM", caBundle: "not a certificate", wantIn: []string{"caBundle"}},
		{name: "tenancy", tenancy: func(s *v1alpha1.TargetSpec) {
			s.Namespaces = &v1alpha1.NamespacePolicy{Mapping: v1alpha1.NamespaceMappingPrefixed, Prefix: "root-", Accept: []string{"prod", "*"}}
			s.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}},
		{name: "a negative limit", tenancy: func(s *v1alpha1.TargetSpec) {
			s.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
		}, wantIn: []string{"limits cpu is -1"}},
		{name: "an accepted namespace that is no name", tenancy: func(s *v1alpha1.TargetSpec) {
			s.Namespaces = &v1alpha1.NamespacePolicy{Accept: []string{"Prod"}}
		}, wantIn: []string{`namespaces.accept "Prod"`}},
		{name: "a prefix without its mapping", tenancy: func(s *v1alpha1.TargetSpec) {
			s.Namespaces = &v1alpha1.NamespacePolicy{Prefix: "root-"}
		}, wantIn: []string{"goes with mapping Prefixed"}},
		{
			name:   "every problem is reported",
			labels: map[string]string{"kubernetes.io/team": "a", "nestlet.io/cluster": "x"},
			taints: []corev1.Taint{noSchedule("virtual-kubelet.io/provider")},
			wantIn: []string{`"kubernetes.io/team"`, `"nestlet.io/cluster"`, `"virtual-kubelet.io/provider"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.clusterName
			if name == "" {
				name = "child"
			}
			target := &v1alpha1.Target{Spec: v1alpha1.TargetSpec{ParentURL: "https://parent:6443", ClusterName: name, CABundle: []byte(tt.caBundle), Labels: tt.labels, Taints: tt.taints}}
			if tt.tenancy != nil {
				tt.tenancy(&target.Spec)
			}
			err := validateSpec(target)
			if len(tt.wantIn) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var je *join.Error
			require.True(t, errors.As(err, &je), "error %v is not a *join.Error", err)
			assert.Equal(t, v1alpha1.ReasonInvalidSpec, je.Reason)
			for _, want := range tt.wantIn {
				assert.Contains(t, je.Message, want)
			}
		})
	}
}
