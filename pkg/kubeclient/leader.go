package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/config"
	"k8s.io/klog/v2"
)

// ErrLostLeadership is returned by RunElected when the lease could not be
// renewed while run was running: the caller exits, and its replacement
// (the container restarted) stands for election again.
var ErrLostLeadership = errors.New("lost the leader election: the lease could not be renewed in time")

// RunElected runs run while this process holds the leader lease of cfg
// (client-go's leader election on a Lease), and returns run's error. It
// waits, doing nothing, while another replica leads. run's context ends on
// ctx's end or on a lost lease; the lease is released only after run has
// returned, so that two replicas never work at once and a replica that
// stops gracefully hands over at once, not after the lease duration.
// It returns nil when ctx ends before this replica led. Without
// cfg.LeaderElect it just runs run.
func RunElected(ctx context.Context, client kubernetes.Interface, cfg config.LeaderElectionConfiguration, run func(context.Context) error) error {
	if !cfg.LeaderElect {
		return run(ctx)
	}
	// The pod's name where the chart gives it (POD_NAME): a pod on its
	// node's network has the node's hostname, which several replicas share.
	host := os.Getenv("POD_NAME")
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
	}
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(cfg.ResourceLock, cfg.ResourceNamespace, cfg.ResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	logger := klog.FromContext(ctx).WithValues("lease", cfg.ResourceNamespace+"/"+cfg.ResourceName, "identity", identity)
	// The elector's own context ends when run has returned (or, while
	// waiting, when ctx ends): ending it releases the lease.
	elect, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	started := make(chan struct{})
	done := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration.Duration,
		RenewDeadline:   cfg.RenewDeadline.Duration,
		RetryPeriod:     cfg.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            cfg.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				close(started)
				logger.Info("Leading")
				runCtx, cancel := context.WithCancel(ctx)
				stop := context.AfterFunc(leading, cancel)
				err := run(runCtx)
				stop()
				cancel()
				if leading.Err() != nil && ctx.Err() == nil {
					err = errors.Join(ErrLostLeadership, err)
				}
				done <- err
				stopElecting()
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading") },
			OnNewLeader: func(id string) {
				if id != identity {
					logger.Info("Another replica leads; waiting", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-started: // run ends first, then the election
			default:
				stopElecting()
			}
		case <-elect.Done():
		}
	}()
	le.Run(elect)
	select {
	case <-started:
		return <-done
	default:
		return nil // ended while waiting
	}
}
