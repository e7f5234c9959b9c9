package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
	// A child claiming another node's hostname, an admin's
	// node-restriction label, a node role and Nestlet's own label, in its
	// labels, folded values and key list: read as if it had not.
	claims := s
	claims.GroupKeys = []string{"k", "kubernetes.io/hostname", "node-role.kubernetes.io/control-plane"}
	claims.Groups = []Group{s.Groups[0]}
	claims.Groups[0].Labels = map[string]string{"k": "v", "kubernetes.io/hostname": "other-node",
		"node-restriction.kubernetes.io/pci": "yes", "node-role.kubernetes.io/control-plane": "", "nestlet.io/cluster": "other"}
	claims.Groups[0].Values = map[string]map[string]int{"kubernetes.io/hostname": {"other-node": 1}}
	claims.Groups[0].Others = map[string]int{"node-role.kubernetes.io/control-plane": 1}
	claiming, err := FormatSummary(claims)
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
		{name: "larger than any agent writes", node: node(map[string]string{AnnotationSummary: raw[:len(raw)-1] + `,"pad":"` + strings.Repeat("x", MaxSummaryBytes) + `"}`})},
		{name: "reserved keys claimed", node: node(map[string]string{AnnotationSummary: claiming}), want: &s, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseSummary(tt.node)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// A summary written by an agent before version 2 (no version, every
// cluster in covered) still parses, and Covers and SharesBranch read it.
func TestVersion1Summary(t *testing.T) {
	const v1 = `{"cluster":"west","covered":["west","west-1","west-2"],"depth":1,"groupKeys":["topology.kubernetes.io/region"],` +
		`"groups":[{"labels":{"topology.kubernetes.io/region":"west"},"nodes":4,"allocatable":{"cpu":"16"},"free":{"cpu":"12"}}],"time":"2026-01-01T00:00:00Z"}`
	s, ok := ParseSummary(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSummary: v1}}})
	if !ok {
		t.Fatal("a version 1 summary does not parse")
	}
	if s.Version != 0 || len(s.Groups) != 1 || s.Groups[0].Nodes != 4 {
		t.Fatalf("parsed %+v", s)
	}
	for _, c := range []string{"west", "west-1", "west-2"} {
		if !s.Covers(c) {
			t.Errorf("Covers(%q) = false", c)
		}
	}
	if s.Covers("east") {
		t.Error("Covers(east) = true")
	}
	v2 := &Summary{Version: SummaryVersion, Cluster: "east", Clusters: 300, Branches: []string{"east", "west-2"}}
	if !SharesBranch(s, v2) || !SharesBranch(v2, s) {
		t.Error("west-2 is under both: SharesBranch = false")
	}
	v2.Branches = []string{"east"}
	if SharesBranch(s, v2) {
		t.Error("nothing in common: SharesBranch = true")
	}
}

func TestCoverFilter(t *testing.T) {
	f := NewCoverFilter()
	f.Add("a")
	g := NewCoverFilter()
	g.Add("b")
	s := &Summary{Version: SummaryVersion, BranchFilter: f.String()}
	if !s.Covers("a") || s.Covers("b") {
		t.Errorf("Covers(a), Covers(b) = %v, %v; want true, false", s.Covers("a"), s.Covers("b"))
	}
	h := NewCoverFilter()
	h.Add("a")
	if !f.Intersects(h) {
		t.Error("two filters holding a do not intersect")
	}
	if NewCoverFilter().Intersects(f) {
		t.Error("an empty filter intersects")
	}
	f.Union(g)
	if !f.MayContain("b") {
		t.Error("union lost b")
	}
	if !ParseCoverFilter("not base64!").MayContain("anything") {
		t.Error("an unreadable filter must say maybe")
	}
}

// The keys a summary may not claim: the node's own name, and the domains
// NodeRestriction, node roles and Nestlet keep, with their subdomains.
func TestReservedLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"kubernetes.io/hostname":                        true,
		"node-restriction.kubernetes.io/dedicated":      true,
		"x.node-restriction.kubernetes.io/dedicated":    true,
		"node-role.kubernetes.io/control-plane":         true,
		"nestlet.io/cluster":                            true,
		"a.nestlet.io/cluster":                          true,
		"topology.kubernetes.io/region":                 false,
		"example.com/node-restriction.kubernetes.io":    false,
		"xnode-restriction.kubernetes.io/dedicated":     false,
		"node-restriction.kubernetes.io.example.com/id": false,
		"region": false,
	} {
		if got := ReservedLabel(key); got != want {
			t.Errorf("ReservedLabel(%q) = %t, want %t", key, got, want)
		}
	}
}
