package kubeletapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func TestMergeSummaries(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	parents := map[string]*corev1.Pod{
		"child-ns/parent-ns-web": pod("parent-ns", "web", "uid-web"),
		"child-ns/parent-ns-db":  pod("parent-ns", "db", "uid-db"),
	}
	podStats := func(namespace, name, uid string, cpu uint64) statsv1alpha1.PodStats {
		return statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Namespace: namespace, Name: name, UID: uid},
			StartTime: at(0),
			CPU:       &statsv1alpha1.CPUStats{Time: at(time.Minute), UsageNanoCores: ptr.To(cpu)},
			Containers: []statsv1alpha1.ContainerStats{
				{Name: "app", CPU: &statsv1alpha1.CPUStats{Time: at(time.Minute), UsageNanoCores: ptr.To(cpu)}},
			},
		}
	}
	tests := []struct {
		name string
		sums []*statsv1alpha1.Summary
		want *statsv1alpha1.Summary
	}{
		{
			name: "no node",
			want: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: "vnode"}},
		},
		{
			name: "one node: figures copied, renamed",
			sums: []*statsv1alpha1.Summary{{
				Node: statsv1alpha1.NodeStats{
					NodeName:  "child-1",
					StartTime: at(-time.Hour),
					CPU:       &statsv1alpha1.CPUStats{Time: at(time.Minute), UsageNanoCores: ptr.To[uint64](100), UsageCoreNanoSeconds: ptr.To[uint64](1000)},
					Memory:    &statsv1alpha1.MemoryStats{Time: at(time.Minute), UsageBytes: ptr.To[uint64](10), WorkingSetBytes: ptr.To[uint64](5)},
				},
			}},
			want: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
				NodeName:  "vnode",
				StartTime: at(-time.Hour),
				CPU:       &statsv1alpha1.CPUStats{Time: at(time.Minute), UsageNanoCores: ptr.To[uint64](100), UsageCoreNanoSeconds: ptr.To[uint64](1000)},
				Memory:    &statsv1alpha1.MemoryStats{Time: at(time.Minute), UsageBytes: ptr.To[uint64](10), WorkingSetBytes: ptr.To[uint64](5)},
			}},
		},
		{
			name: "two nodes: sums, latest time, earliest start, nil fields skipped",
			sums: []*statsv1alpha1.Summary{
				{Node: statsv1alpha1.NodeStats{
					NodeName:  "child-1",
					StartTime: at(-time.Hour),
					CPU:       &statsv1alpha1.CPUStats{Time: at(time.Minute), UsageNanoCores: ptr.To[uint64](100), UsageCoreNanoSeconds: ptr.To[uint64](1000)},
					Memory: &statsv1alpha1.MemoryStats{
						Time: at(2 * time.Minute), AvailableBytes: ptr.To[uint64](1 << 30), UsageBytes: ptr.To[uint64](10),
						WorkingSetBytes: ptr.To[uint64](5), RSSBytes: ptr.To[uint64](3),
					},
				}},
				{Node: statsv1alpha1.NodeStats{
					NodeName:  "child-2",
					StartTime: at(-2 * time.Hour),
					CPU:       &statsv1alpha1.CPUStats{Time: at(3 * time.Minute), UsageNanoCores: ptr.To[uint64](50)},
					Memory:    &statsv1alpha1.MemoryStats{Time: at(time.Minute), AvailableBytes: ptr.To[uint64](1 << 30), UsageBytes: ptr.To[uint64](20), WorkingSetBytes: ptr.To[uint64](7)},
				}},
				{Node: statsv1alpha1.NodeStats{NodeName: "child-3-no-figures"}},
			},
			want: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
				NodeName:  "vnode",
				StartTime: at(-2 * time.Hour),
				CPU:       &statsv1alpha1.CPUStats{Time: at(3 * time.Minute), UsageNanoCores: ptr.To[uint64](150), UsageCoreNanoSeconds: ptr.To[uint64](1000)},
				Memory: &statsv1alpha1.MemoryStats{
					Time: at(2 * time.Minute), AvailableBytes: ptr.To[uint64](2 << 30), UsageBytes: ptr.To[uint64](30),
					WorkingSetBytes: ptr.To[uint64](12), RSSBytes: ptr.To[uint64](3),
				},
			}},
		},
		{
			name: "a node without figures first, then one with",
			sums: []*statsv1alpha1.Summary{
				{Node: statsv1alpha1.NodeStats{NodeName: "child-1"}},
				{Node: statsv1alpha1.NodeStats{
					NodeName: "child-2", StartTime: at(-time.Hour),
					Memory: &statsv1alpha1.MemoryStats{Time: at(time.Minute), UsageBytes: ptr.To[uint64](20)},
				}},
			},
			want: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
				NodeName: "vnode", StartTime: at(-time.Hour),
				Memory: &statsv1alpha1.MemoryStats{Time: at(time.Minute), UsageBytes: ptr.To[uint64](20)},
			}},
		},
		{
			name: "pods kept only when delegates, under the parent's name",
			sums: []*statsv1alpha1.Summary{
				{
					Node: statsv1alpha1.NodeStats{NodeName: "child-1"},
					Pods: []statsv1alpha1.PodStats{
						podStats("child-ns", "parent-ns-web", "uid-delegate-web", 7),
						podStats("kube-system", "coredns", "uid-coredns", 9),
					},
				},
				{
					Node: statsv1alpha1.NodeStats{NodeName: "child-2"},
					Pods: []statsv1alpha1.PodStats{
						podStats("other-ns", "parent-ns-db", "uid-same-name-other-ns", 3),
						podStats("child-ns", "parent-ns-db", "uid-delegate-db", 11),
					},
				},
			},
			want: &statsv1alpha1.Summary{
				Node: statsv1alpha1.NodeStats{NodeName: "vnode"},
				Pods: []statsv1alpha1.PodStats{
					podStats("parent-ns", "web", "uid-web", 7),
					podStats("parent-ns", "db", "uid-db", 11),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := json.Marshal(tt.sums)
			require.NoError(t, err)
			got := mergeSummaries("vnode", tt.sums, parents)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mergeSummaries() (-want +got):\n%s", diff)
			}
			after, err := json.Marshal(tt.sums)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "mergeSummaries changed its input")
		})
	}
}

func TestParentsByDelegate(t *testing.T) {
	web, db, orphan := pod("parent-ns", "web", "uid-web"), pod("parent-ns", "db", "uid-db"), pod("parent-ns", "orphan", "uid-orphan")
	s, _ := newTestServer(t, &fakeDelegates{
		parents: []*corev1.Pod{web, db, orphan},
		delegates: map[string]*corev1.Pod{
			"parent-ns/web": pod("child-ns", "parent-ns-web", "d1"),
			"parent-ns/db":  pod("child-ns", "parent-ns-db", "d2"),
		},
	})
	got, err := s.parentsByDelegate(t.Context())
	require.NoError(t, err)
	want := map[string]*corev1.Pod{"child-ns/parent-ns-web": web, "child-ns/parent-ns-db": db}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parentsByDelegate() (-want +got):\n%s", diff)
	}
}

func TestStatsSummary(t *testing.T) {
	child := &fakeChild{nodes: [][2]string{
		{"child-1", `{"node":{"nodeName":"child-1","memory":{"time":"2024-05-01T10:00:00Z","usageBytes":100}},
			"pods":[{"podRef":{"namespace":"child-ns","name":"parent-ns-web","uid":"uid-delegate"},"startTime":null},
			        {"podRef":{"namespace":"kube-system","name":"coredns","uid":"uid-coredns"},"startTime":null}]}`},
		{"child-2", ""},         // unreadable: left out
		{"child-3", "not json"}, // left out
		{"child-4", `{"node":{"nodeName":"child-4","memory":{"time":"2024-05-01T10:00:00Z","usageBytes":20}}}`},
	}}
	s := child.start(t)

	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/stats/summary", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	got := &statsv1alpha1.Summary{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), got))

	at := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	want := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "vnode", Memory: &statsv1alpha1.MemoryStats{Time: at, UsageBytes: ptr.To[uint64](120)}},
		Pods: []statsv1alpha1.PodStats{{PodRef: statsv1alpha1.PodReference{Namespace: "parent-ns", Name: "web", UID: "uid-web"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/stats/summary (-want +got):\n%s", diff)
	}
}
