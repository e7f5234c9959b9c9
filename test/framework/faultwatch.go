package framework

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
)

// FaultWatch counts, while a fault happens rather than after the tree
// settled, what users of a multi-cluster scheduler fear: a pod that runs
// twice at once, a pod that vanishes, a copy left behind. It watches the
// pods of one namespace in every cluster it is given, from Start to Stop:
//   - Duplicates: two delegates of one parent pod alive at once, in one
//     cluster or in two (alive: not Succeeded or Failed and not yet deleted,
//     terminating included, since its containers may still run). A parent
//     pod is known by its cluster and name, so that a StatefulSet's pod made
//     again under its name counts too.
//   - Vanished: a pod of a cluster without a parent (made by the user) gone
//     without ever showing a deletion timestamp: no one asked for it.
//   - Orphans: a delegate whose parent pod did not exist for longer than
//     the GC period.
//
// Each count comes with its worst duration (for Vanished, none).
type FaultWatch struct {
	ledger *FaultLedger
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// FaultCount is one kind of fault: how many times it happened, the longest
// it lasted, and the first few, described.
type FaultCount struct {
	N        int
	Worst    time.Duration
	Examples []string
}

func (c FaultCount) String() string {
	if c.N == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (worst %s; %v)", c.N, c.Worst.Round(time.Millisecond), c.Examples)
}

// FaultReport is what a FaultWatch counted.
type FaultReport struct {
	Duplicates, Vanished, Orphans FaultCount
}

func (r FaultReport) String() string {
	return fmt.Sprintf("duplicates %s, vanished %s, orphans %s", r.Duplicates, r.Vanished, r.Orphans)
}

// StartFaultWatch watches namespace ns in clusters (by name); parentOf
// gives each child cluster's parent (one each: the trees of the fault
// tests); gcPeriod is how long a delegate may outlive its parent pod before
// it counts as an orphan. It returns once every watch has listed.
func StartFaultWatch(ctx context.Context, clusters map[string]kubernetes.Interface, parentOf map[string]string, ns string, gcPeriod time.Duration) (*FaultWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &FaultWatch{ledger: NewFaultLedger(parentOf, gcPeriod), cancel: cancel}
	var synced []cache.InformerSynced
	for name, client := range clusters {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		inf := f.Core().V1().Pods().Informer()
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.ledger.Observe(name, obj.(*corev1.Pod), false, time.Now()) },
			UpdateFunc: func(_, obj any) { w.ledger.Observe(name, obj.(*corev1.Pod), false, time.Now()) },
			DeleteFunc: func(obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					w.ledger.Observe(name, p, true, time.Now())
				} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					if p, ok := d.Obj.(*corev1.Pod); ok {
						w.ledger.Observe(name, p, true, time.Now())
					}
				}
			},
		})
		if err != nil {
			cancel()
			return nil, err
		}
		w.done.Go(func() { inf.RunWithContext(ctx) })
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		w.Stop()
		return nil, fmt.Errorf("fault watch: the pod watches did not list: %w", ctx.Err())
	}
	return w, nil
}

// Report returns the counts so far, what is still open counted until now.
func (w *FaultWatch) Report() FaultReport { return w.ledger.Report(time.Now()) }

// Stop ends the watches and returns the counts; what is still open (a
// duplicate alive, an orphan past the GC period) counts until now.
func (w *FaultWatch) Stop() FaultReport {
	w.cancel()
	w.done.Wait()
	return w.ledger.Report(time.Now())
}

// FaultLedger is FaultWatch's bookkeeping, fed the pods' states as they
// are seen (Observe) and read with Report.
type FaultLedger struct {
	mu       sync.Mutex
	parentOf map[string]string
	gcPeriod time.Duration
	// pods by "cluster/uid".
	pods map[string]*ledgerPod
	// alive delegates by parent ("parent cluster/namespace/name"), and
	// when a duplicate began, for a parent that has one now.
	alive    map[string]map[string]bool
	dupSince map[string]time.Time
	// parents that exist, by "cluster/namespace/name" (a count of pods of
	// that name, alive or ended, not yet deleted).
	parents map[string]int
	// orphanSince: delegates whose parent is missing, since when.
	orphanSince map[string]time.Time

	report FaultReport
}

type ledgerPod struct {
	cluster, name, parent string // parent: key in alive, "" for a pod without one
	alive, deleting       bool
}

// NewFaultLedger returns an empty ledger (see StartFaultWatch).
func NewFaultLedger(parentOf map[string]string, gcPeriod time.Duration) *FaultLedger {
	return &FaultLedger{
		parentOf: parentOf, gcPeriod: gcPeriod,
		pods: map[string]*ledgerPod{}, alive: map[string]map[string]bool{}, dupSince: map[string]time.Time{},
		parents: map[string]int{}, orphanSince: map[string]time.Time{},
	}
}

// Observe records pod as cluster has it at now; deleted says it is gone.
func (l *FaultLedger) Observe(cluster string, pod *corev1.Pod, deleted bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := cluster + "/" + string(pod.UID)
	self := cluster + "/" + pod.Namespace + "/" + pod.Name
	rec, known := l.pods[key]
	if !known {
		rec = &ledgerPod{cluster: cluster, name: self}
		if parent, ok := l.parentOf[cluster]; ok {
			if ref := pod.Annotations[api.AnnotationParentPod]; ref != "" {
				rec.parent = parent + "/" + ref
			}
		}
		l.pods[key] = rec
		l.parents[self]++
	}
	rec.deleting = rec.deleting || pod.DeletionTimestamp != nil
	alive := !deleted && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	if rec.parent != "" && alive != rec.alive {
		l.setAlive(rec.parent, key, alive, now)
	}
	rec.alive = alive
	if deleted {
		delete(l.pods, key)
		if l.parents[self]--; l.parents[self] <= 0 {
			delete(l.parents, self)
		}
		if _, child := l.parentOf[cluster]; !child && !rec.deleting {
			l.report.Vanished.add(0, fmt.Sprintf("%s gone without a deletion timestamp", self))
		}
	}
	l.checkOrphans(now)
}

// setAlive marks delegate alive or not among parent's, opening or closing
// a duplicate.
func (l *FaultLedger) setAlive(parent, delegate string, alive bool, now time.Time) {
	set := l.alive[parent]
	if set == nil {
		set = map[string]bool{}
		l.alive[parent] = set
	}
	if alive {
		set[delegate] = true
	} else {
		delete(set, delegate)
	}
	since, open := l.dupSince[parent]
	switch {
	case len(set) > 1 && !open:
		l.dupSince[parent] = now
	case len(set) <= 1 && open:
		delete(l.dupSince, parent)
		l.report.Duplicates.add(now.Sub(since), fmt.Sprintf("%s had 2 delegates alive", parent))
	}
	if len(set) == 0 {
		delete(l.alive, parent)
	}
}

// checkOrphans notes the delegates whose parent is missing, and counts
// those missing it for longer than the GC period once they are gone or
// the parent is back.
func (l *FaultLedger) checkOrphans(now time.Time) {
	missing := map[string]bool{}
	for key, rec := range l.pods {
		if rec.parent != "" && l.parents[rec.parent] == 0 {
			missing[key] = true
			if _, ok := l.orphanSince[key]; !ok {
				l.orphanSince[key] = now
			}
		}
	}
	for key, since := range l.orphanSince {
		if !missing[key] {
			delete(l.orphanSince, key)
			if d := now.Sub(since); d > l.gcPeriod {
				l.report.Orphans.add(d, key+" outlived its parent")
			}
		}
	}
}

// Report returns the counts at now, with what is still open counted until
// now.
func (l *FaultLedger) Report(now time.Time) FaultReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.report
	r.Duplicates.Examples = append([]string(nil), r.Duplicates.Examples...)
	r.Orphans.Examples = append([]string(nil), r.Orphans.Examples...)
	parents := make([]string, 0, len(l.dupSince))
	for p := range l.dupSince {
		parents = append(parents, p)
	}
	sort.Strings(parents)
	for _, p := range parents {
		r.Duplicates.add(now.Sub(l.dupSince[p]), p+" has 2 delegates alive (still at the end)")
	}
	for key, since := range l.orphanSince {
		if d := now.Sub(since); d > l.gcPeriod {
			r.Orphans.add(d, key+" outlived its parent (still at the end)")
		}
	}
	return r
}

func (c *FaultCount) add(d time.Duration, example string) {
	c.N++
	c.Worst = max(c.Worst, d)
	if len(c.Examples) < 3 {
		c.Examples = append(c.Examples, example)
	}
}
