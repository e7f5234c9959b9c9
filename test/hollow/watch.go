package hollow

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher is one watch on a store: events of one resource (and namespace,
// unless all), filtered by selectors, queued without bound and delivered
// by a goroutine of its own.
type watcher struct {
	gvr schema.GroupVersionResource
	ns  string
	sel selectors

	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
	onStop func()

	mu     sync.Mutex
	queue  []watch.Event
	wakeup chan struct{}
}

var _ watch.Interface = &watcher{}

func newWatcher(gvr schema.GroupVersionResource, ns string, sel selectors) *watcher {
	return &watcher{gvr: gvr, ns: ns, sel: sel, result: make(chan watch.Event), stop: make(chan struct{}), wakeup: make(chan struct{}, 1)}
}

// push queues ev if it concerns this watch. An object that enters the
// selectors is ADDED, one that leaves them DELETED (with its last matching
// state), as a real API server's watch does.
func (w *watcher) push(ev event) {
	if ev.gvr != w.gvr || (w.ns != "" && ev.ns != w.ns) {
		return
	}
	now := w.sel.matches(ev.obj)
	before := ev.prev != nil && w.sel.matches(ev.prev)
	switch ev.typ {
	case watch.Added:
		if now {
			w.send(watch.Event{Type: watch.Added, Object: ev.obj.DeepCopyObject()})
		}
	case watch.Modified:
		switch {
		case now && before:
			w.send(watch.Event{Type: watch.Modified, Object: ev.obj.DeepCopyObject()})
		case now:
			w.send(watch.Event{Type: watch.Added, Object: ev.obj.DeepCopyObject()})
		case before:
			w.send(watch.Event{Type: watch.Deleted, Object: withRV(ev.prev, ev.obj)})
		}
	case watch.Deleted:
		if before {
			w.send(watch.Event{Type: watch.Deleted, Object: ev.obj.DeepCopyObject()})
		}
	}
}

// withRV returns a copy of prev with the resourceVersion of cur.
func withRV(prev, cur runtime.Object) runtime.Object {
	out := prev.DeepCopyObject()
	if om, err := metaOf(out); err == nil {
		if cm, err := metaOf(cur); err == nil {
			om.SetResourceVersion(cm.GetResourceVersion())
		}
	}
	return out
}

// send queues an event and wakes the delivering goroutine; it never blocks.
func (w *watcher) send(ev watch.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wakeup <- struct{}{}:
	default:
	}
}

// run delivers queued events until Stop.
func (w *watcher) run() {
	defer close(w.result)
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range batch {
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		}
		select {
		case <-w.wakeup:
		case <-w.stop:
			return
		}
	}
}

// Stop ends the watch; its result channel is closed soon after.
func (w *watcher) Stop() {
	w.once.Do(func() {
		close(w.stop)
		if w.onStop != nil {
			w.onStop()
		}
	})
}

// ResultChan returns the events.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }
