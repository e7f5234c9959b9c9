package framework

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nestlet/nestlet/api"
)

func ledgerPodOf(uid, name, parent string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns", Name: name}, Status: corev1.PodStatus{Phase: phase}}
	if parent != "" {
		p.Annotations = map[string]string{api.AnnotationParentPod: "ns/" + parent}
	}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

// The ledger counts what it is there to count: a parent pod with two live
// delegates at once (in two clusters, then in one), a delegate that
// outlived its parent past the GC period, a root pod gone without a
// deletion; and a clean lifecycle counts nothing.
func TestFaultLedgerCounts(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	l := NewFaultLedger(map[string]string{"east": "root", "west": "root"}, 30*time.Second)

	// A clean life: parent, delegate, both deleted gracefully.
	l.Observe("root", ledgerPodOf("p0", "web-a", "", corev1.PodRunning, false), false, at(0))
	l.Observe("east", ledgerPodOf("d0", "web-a", "web-a", corev1.PodRunning, false), false, at(0))
	l.Observe("root", ledgerPodOf("p0", "web-a", "", corev1.PodRunning, true), false, at(1))
	l.Observe("east", ledgerPodOf("d0", "web-a", "web-a", corev1.PodRunning, true), false, at(1))
	l.Observe("east", ledgerPodOf("d0", "web-a", "web-a", corev1.PodRunning, true), true, at(2))
	l.Observe("root", ledgerPodOf("p0", "web-a", "", corev1.PodRunning, true), true, at(2))
	require.Equal(t, FaultReport{}, l.Report(at(3)))

	// web-0 runs in east, then in west as well for 3 s.
	l.Observe("root", ledgerPodOf("p1", "web-0", "", corev1.PodRunning, false), false, at(10))
	l.Observe("east", ledgerPodOf("d1", "web-0", "web-0", corev1.PodRunning, false), false, at(10))
	l.Observe("west", ledgerPodOf("d2", "web-0", "web-0", corev1.PodPending, false), false, at(12))
	l.Observe("east", ledgerPodOf("d1", "web-0", "web-0", corev1.PodFailed, false), false, at(15))
	l.Observe("east", ledgerPodOf("d1", "web-0", "web-0", corev1.PodFailed, true), true, at(16))
	r := l.Report(at(16))
	require.Equal(t, 1, r.Duplicates.N)
	require.Equal(t, 3*time.Second, r.Duplicates.Worst)

	// Two delegates in one cluster, still both alive at the report.
	l.Observe("root", ledgerPodOf("p3", "web-1", "", corev1.PodRunning, false), false, at(20))
	l.Observe("east", ledgerPodOf("d3", "web-1-x", "web-1", corev1.PodRunning, false), false, at(20))
	l.Observe("east", ledgerPodOf("d4", "web-1-y", "web-1", corev1.PodRunning, false), false, at(21))
	r = l.Report(at(31))
	require.Equal(t, 2, r.Duplicates.N)
	require.Equal(t, 10*time.Second, r.Duplicates.Worst)

	// web-0's parent vanishes (no deletion timestamp seen); its delegate
	// in west stays 40 s without it, past the 30 s GC period.
	l.Observe("root", ledgerPodOf("p1", "web-0", "", corev1.PodRunning, false), true, at(40))
	l.Observe("west", ledgerPodOf("d2", "web-0", "web-0", corev1.PodRunning, false), true, at(80))
	r = l.Report(at(81))
	require.Equal(t, 1, r.Vanished.N)
	require.Equal(t, 1, r.Orphans.N)
	require.Equal(t, 40*time.Second, r.Orphans.Worst)
	require.Contains(t, r.String(), "orphans 1")
}
