package child

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultOutageTolerance is Config.OutageTolerance's default: a restart of
// the API server (its graceful stop, its start and its caches) fits in it.
const DefaultOutageTolerance = 30 * time.Second

// readyTTL is how long one check of this cluster's readiness answers the
// pings of every Target: a cluster with many parents asks once.
const readyTTL = time.Second

// readiness answers the virtual nodes' pings: whether this cluster's API
// server is ready, tolerating a short outage as a kubelet tolerates one of
// its container runtime (Config.OutageTolerance). Shared by every Target.
type readiness struct {
	clock     clock.PassiveClock
	tolerance time.Duration
	check     func(context.Context) error
	client    kubernetes.Interface

	mu  sync.Mutex // held while one checks
	at  time.Time  // the last check
	err error      // and its answer
	// The last check that passed, and the first that failed since then
	// (zero while the API server is ready).
	ok, failingSince time.Time
	outageLogged     bool // past the tolerance, said once
}

// newReadiness checks /readyz of client's API server, or calls check when
// set (a hollow child's simulated cluster).
func newReadiness(client kubernetes.Interface, check func(context.Context) error, tolerance time.Duration, clk clock.PassiveClock) *readiness {
	r := &readiness{clock: clk, tolerance: tolerance, check: check, client: client}
	if r.check == nil {
		r.check = r.checkReady
	}
	return r
}

// ready fails when this cluster's API server is not ready, and has not
// been for longer than Config.OutageTolerance since its last good check.
// One answer serves every Target for readyTTL.
func (r *readiness) ready(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.clock.Now(); !r.at.IsZero() && now.Sub(r.at) < readyTTL {
		return r.err
	}
	err := r.check(ctx)
	r.at = r.clock.Now()
	r.err = r.tolerate(ctx, err, r.at)
	return r.err
}

// tolerate returns err, or nil while this cluster's API server has been
// failing for less than the outage tolerance after a good check; it logs
// when an outage starts, when it is no longer tolerated and when it ends.
// Called with mu held.
func (r *readiness) tolerate(ctx context.Context, err error, now time.Time) error {
	logger := klog.FromContext(ctx)
	if err == nil {
		if !r.failingSince.IsZero() {
			logger.Info("This cluster's API server is ready again", "outage", now.Sub(r.failingSince).Round(time.Millisecond))
		}
		r.ok, r.failingSince, r.outageLogged = now, time.Time{}, false
		return nil
	}
	tol := r.tolerance
	if r.failingSince.IsZero() {
		r.failingSince = now
		if tol > 0 && !r.ok.IsZero() {
			logger.Info("This cluster's API server is not ready; the virtual nodes stay Ready in the parents meanwhile, for at most the outage tolerance", "err", err, "tolerance", tol)
		}
	}
	if tol <= 0 || r.ok.IsZero() {
		return err
	}
	if now.Sub(r.ok) < tol {
		return nil
	}
	if !r.outageLogged {
		r.outageLogged = true
		logger.Info("This cluster's API server has not been ready for longer than the outage tolerance: the virtual nodes stop renewing their leases, and the parents will mark them lost", "err", err, "tolerance", tol)
	}
	return err
}

func (r *readiness) checkReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := r.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("this cluster's API server is not ready: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("this cluster's API server is not ready: %s", body)
	}
	return nil
}
