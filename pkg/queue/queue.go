// Package queue runs a controller's work queue: the loop that takes a key,
// reconciles it, and retries it with backoff on failure, written once for
// every controller of ours (sample-controller's processNextWorkItem).
// A controller supplies only its reconcile function.
package queue

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Reconcile brings the object of key to what it should be. It returns how
// long to wait before looking at key again (0: not again unless queued),
// or an error: key is then retried with the queue's backoff.
type Reconcile[K comparable] func(ctx context.Context, key K) (requeueAfter time.Duration, err error)

// Config of a Worker.
type Config[K comparable] struct {
	// Name names the queue (its workqueue metrics).
	Name string
	// RateLimiter spaces the retries of a failing key. Default client-go's
	// controller limiter (per-key exponential backoff, overall bucket).
	RateLimiter workqueue.TypedRateLimiter[K]
	// Reconcile is called with each key taken. Required.
	Reconcile Reconcile[K]
	// Failure is the message logged when Reconcile fails ("Syncing
	// target"), with the key under KeyName ("target").
	Failure string
	KeyName string
}

// Worker is a rate-limited work queue (add keys to it as to any
// workqueue) and the workers that reconcile its keys.
type Worker[K comparable] struct {
	workqueue.TypedRateLimitingInterface[K]
	cfg Config[K]
}

// New returns the queue of cfg; nothing is reconciled before Run.
func New[K comparable](cfg Config[K]) *Worker[K] {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[K]()
	}
	if cfg.KeyName == "" {
		cfg.KeyName = "key"
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter, workqueue.TypedRateLimitingQueueConfig[K]{Name: cfg.Name})
	return &Worker[K]{TypedRateLimitingInterface: q, cfg: cfg}
}

// Run reconciles keys with workers goroutines until ctx ends, then shuts
// the queue down and returns once every worker has finished its key.
func (w *Worker[K]) Run(ctx context.Context, workers int) {
	go func() {
		<-ctx.Done()
		w.ShutDown()
	}()
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	wg.Wait()
}

// next reconciles one key; false once the queue is shut down.
func (w *Worker[K]) next(ctx context.Context) bool {
	key, shutdown := w.Get()
	if shutdown {
		return false
	}
	defer w.Done(key)
	after, err := w.cfg.Reconcile(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, w.cfg.Failure, w.cfg.KeyName, key)
			w.AddRateLimited(key)
			return true
		}
		after = 0 // stopping: nothing is looked at again
	}
	w.Forget(key)
	if after > 0 {
		w.AddAfter(key, after)
	}
	return true
}
