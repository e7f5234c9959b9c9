package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// calls records the keys a reconcile function saw, in order.
type calls struct {
	mu   sync.Mutex
	keys []string
	seen chan string
}

func newCalls() *calls { return &calls{seen: make(chan string, 100)} }

func (c *calls) add(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, key)
	c.seen <- key
	n := 0
	for _, k := range c.keys {
		if k == key {
			n++
		}
	}
	return n
}

// wait returns the next key reconciled, failing after a while.
func (c *calls) wait(t *testing.T) string {
	t.Helper()
	select {
	case k := <-c.seen:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no key reconciled")
		return ""
	}
}

func fastRetries() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)
}

func TestWorker(t *testing.T) {
	tests := []struct {
		name string
		// reconcile answers the nth call of key (from 1).
		reconcile func(n int) (time.Duration, error)
		// want is the number of calls before the key rests.
		want int
	}{
		{name: "done at once", reconcile: func(int) (time.Duration, error) { return 0, nil }, want: 1},
		{name: "failures retried until it succeeds", reconcile: func(n int) (time.Duration, error) {
			if n < 3 {
				return 0, errors.New("not yet")
			}
			return 0, nil
		}, want: 3},
		{name: "looked at again when asked", reconcile: func(n int) (time.Duration, error) {
			if n == 1 {
				return 5 * time.Millisecond, nil
			}
			return 0, nil
		}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCalls()
			w := New(Config[string]{Name: "test", RateLimiter: fastRetries(), Failure: "Reconciling", KeyName: "key",
				Reconcile: func(_ context.Context, key string) (time.Duration, error) { return tt.reconcile(c.add(key)) }})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { w.Run(ctx, 2); close(done) }()
			w.Add("a")
			for range tt.want {
				assert.Equal(t, "a", c.wait(t))
			}
			// Nothing more comes for a while: the key rests.
			select {
			case k := <-c.seen:
				t.Fatalf("reconciled %s once more", k)
			case <-time.After(100 * time.Millisecond):
			}
			assert.Zero(t, w.NumRequeues("a"), "a key that rests is forgotten by the rate limiter")
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			assert.True(t, w.ShuttingDown())
		})
	}
}

// Run returns only once the key being reconciled is done, and a failure
// that comes as the worker stops is not retried.
func TestWorkerStops(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished bool
	w := New(Config[string]{Name: "test", RateLimiter: fastRetries(), Failure: "Reconciling",
		Reconcile: func(ctx context.Context, key string) (time.Duration, error) {
			close(started)
			<-release
			finished = true
			return 0, errors.New("failed while stopping")
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.Run(ctx, 1); close(done) }()
	w.Add("a")
	<-started
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a key was being reconciled")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	require.True(t, finished)
	assert.Zero(t, w.NumRequeues("a"), "not retried once stopping")
	assert.Zero(t, w.Len())
}
