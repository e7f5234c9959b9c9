package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseSummary(t *testing.T) {
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	s := Summary{Cluster: "x", Covered: []string{"x"}, Depth: 1, GroupKeys: []string{"k"}, Time: "2025-01-01T00:00:00Z",
		Groups: []Group{{Labels: map[string]string{"k": "v"}, Nodes: 2, Allocatable: cpu("2"), Free: cpu("1500m"), Shapes: []corev1.ResourceList{cpu("1")}}}}
	raw, err := FormatSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	node := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: annotations}}
	}
	tests := []struct {
		name   string
		node   *corev1.Node
		want   *Summary
		wantOK bool
	}{
		{name: "nil node", node: nil},
		{name: "real node", node: node(nil)},
		{name: "invalid JSON", node: node(map[string]string{AnnotationSummary: `{"depth":"deep"}`})},
		{name: "empty annotation", node: node(map[string]string{AnnotationSummary: ""})},
		{name: "formatted summary", node: node(map[string]string{AnnotationSummary: raw}), want: &s, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseSummary(tt.node)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
