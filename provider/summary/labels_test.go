package summary

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

func TestComputeLabels(t *testing.T) {
	const region = "topology.kubernetes.io/region"
	one := func() corev1.ResourceList { return rl("cpu", "1") }
	child := api.Summary{Cluster: "x", Covered: []string{"x"}}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  map[string]string
	}{
		{
			name:  "no counted node, no label",
			nodes: []*corev1.Node{newNode("a", one(), withLabels(region, "east"), cordoned())},
			want:  map[string]string{},
		},
		{
			name: "labels equal on every node are kept",
			nodes: []*corev1.Node{
				newNode("a", one(), withLabels(region, "east", "kubernetes.io/arch", "amd64", "example.com/team", "a", "tier", "gold")),
				newNode("b", one(), withLabels(region, "east", "kubernetes.io/arch", "amd64", "example.com/team", "a", "tier", "gold")),
			},
			want: map[string]string{region: "east", "kubernetes.io/arch": "amd64", "example.com/team": "a", "tier": "gold"},
		},
		{
			name: "a label that differs or is missing somewhere is dropped",
			nodes: []*corev1.Node{
				newNode("a", one(), withLabels(region, "east", "kubernetes.io/arch", "amd64", "tier", "gold")),
				newNode("b", one(), withLabels(region, "west", "kubernetes.io/arch", "amd64")),
			},
			want: map[string]string{"kubernetes.io/arch": "amd64"},
		},
		{
			name: "virtual nodes count",
			nodes: []*corev1.Node{
				newNode("a", one(), withLabels(region, "east", "tier", "gold")),
				newNode("x", one(), withLabels(region, "east"), virtualOf(t, child)),
			},
			want: map[string]string{region: "east"},
		},
		{
			name: "left out nodes do not count",
			nodes: []*corev1.Node{
				newNode("a", one(), withLabels(region, "east")),
				newNode("b", one(), withLabels(region, "west"), withReady(corev1.ConditionFalse)),
				newNode("x", one(), withLabels(region, "west"), withAnnotation(api.AnnotationSummary, "nope")),
			},
			want: map[string]string{region: "east"},
		},
		{
			name: "keys naming a node, a role, Nestlet or KWOK are dropped",
			nodes: []*corev1.Node{newNode("a", one(), withLabels(
				api.LabelNodeType, api.NodeTypeVirtualKubelet,
				api.LabelCluster, "x",
				"nestlet.io/anything", "x",
				"node-role.kubernetes.io/worker", "",
				api.LabelNodeRoleCluster, "",
				"kwok.x-k8s.io/node", "fake",
				"node.kubernetes.io/exclude-from-external-load-balancers", "true",
				"node.kubernetes.io/exclude-disruption", "true",
				"node.kubernetes.io/instance-type", "m5.large",
			))},
			want: map[string]string{"node.kubernetes.io/instance-type": "m5.large"},
		},
		{
			name: "keys a node may not set on itself are dropped",
			nodes: []*corev1.Node{newNode("a", one(), withLabels(
				"node-restriction.kubernetes.io/pool", "x",
				"kubernetes.io/custom", "x",
				"k8s.io/custom", "x",
				"example.kubernetes.io/custom", "x",
				"example.k8s.io/custom", "x",
				"kubelet.kubernetes.io/custom", "ok",
				"beta.kubernetes.io/arch", "amd64",
				"topology.kubernetes.io/zone", "z",
				"example.com/custom", "ok",
			))},
			want: map[string]string{
				"kubelet.kubernetes.io/custom": "ok",
				"beta.kubernetes.io/arch":      "amd64",
				"topology.kubernetes.io/zone":  "z",
				"example.com/custom":           "ok",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Nodes: tt.nodes})
			requireNoDiff(t, tt.want, got.Labels)
		})
	}
}

func TestReportable(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{name: "hostname", key: corev1.LabelHostname, want: false},
		{name: "type", key: "type", want: false},
		{name: "nestlet", key: "nestlet.io/cluster", want: false},
		{name: "node role", key: "node-role.kubernetes.io/control-plane", want: false},
		{name: "kwok", key: "kwok.x-k8s.io/node", want: false},
		{name: "exclude prefix", key: "node.kubernetes.io/exclude-from-external-load-balancers", want: false},
		{name: "node restriction", key: "node-restriction.kubernetes.io/pool", want: false},
		{name: "node restriction subdomain", key: "a.node-restriction.kubernetes.io/pool", want: false},
		{name: "kubernetes.io", key: "kubernetes.io/custom", want: false},
		{name: "kubernetes.io subdomain", key: "a.kubernetes.io/custom", want: false},
		{name: "k8s.io", key: "k8s.io/custom", want: false},
		{name: "k8s.io subdomain", key: "a.k8s.io/custom", want: false},
		{name: "kubelet label", key: "topology.kubernetes.io/region", want: true},
		{name: "kubelet label arch", key: "kubernetes.io/arch", want: true},
		{name: "beta kubelet label", key: "failure-domain.beta.kubernetes.io/zone", want: true},
		{name: "kubelet namespace", key: "kubelet.kubernetes.io/x", want: true},
		{name: "kubelet namespace subdomain", key: "a.kubelet.kubernetes.io/x", want: true},
		{name: "node namespace", key: "node.kubernetes.io/instance-type", want: true},
		{name: "node namespace subdomain", key: "a.node.kubernetes.io/x", want: true},
		{name: "lookalike domain", key: "notkubernetes.io/x", want: true},
		{name: "kubernetes.io inside a longer domain", key: "kubernetes.io.example.com/x", want: true},
		{name: "other domain", key: "example.com/x", want: true},
		{name: "no prefix", key: "tier", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reportable(tt.key); got != tt.want {
				t.Fatalf("reportable(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}
