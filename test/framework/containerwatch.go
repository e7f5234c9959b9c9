package framework

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nestlet/nestlet/launcher"
)

// ContainerWatch counts, beneath every API server, a pod whose container
// ran twice at once: it reads the containers of one namespace from the
// runtimes of real nodes (CRI) from Start to Stop, and keeps each one's
// start and finish as the runtime stamped them. Two containers of the same
// pod name and container name (a StatefulSet's pod, or a Job's, made again
// or forwarded twice, on one node or on two) whose runs overlap count as
// one duplicate, lasting as long as the overlap. The runtimes are read
// every ContainerPollPeriod, so a container is missed only if it was
// created and removed between two reads; the overlap itself comes from the
// runtime's own timestamps, not from when it was read.
type ContainerWatch struct {
	ledger *ContainerLedger
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// ContainerPollPeriod is how often a ContainerWatch reads the runtimes.
const ContainerPollPeriod = 250 * time.Millisecond

// StartContainerWatch watches the containers of namespace ns on nodes. It
// returns once every runtime answered a first time.
func StartContainerWatch(ctx context.Context, nodes []*launcher.RealNode, ns string) (*ContainerWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &ContainerWatch{ledger: NewContainerLedger(), cancel: cancel}
	for _, n := range nodes {
		svc, err := n.Runtime()
		if err != nil {
			cancel()
			return nil, err
		}
		read := func(ctx context.Context) error {
			list, err := svc.ListContainers(ctx, &runtimeapi.ContainerFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns},
			})
			if err != nil {
				return err
			}
			for _, c := range list {
				if !w.ledger.Wants(c.Id, c.State) {
					continue
				}
				st, err := svc.ContainerStatus(ctx, c.Id, false)
				if err != nil || st.GetStatus() == nil {
					continue // removed meanwhile: read again next time if it is still there
				}
				s := st.GetStatus()
				w.ledger.Observe(ContainerRun{
					ID:        c.Id,
					Pod:       ns + "/" + c.Labels["io.kubernetes.pod.name"] + "/" + c.Labels["io.kubernetes.container.name"],
					Node:      n.Name,
					Started:   s.StartedAt,
					Finished:  s.FinishedAt,
					Remaining: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING,
				})
			}
			return nil
		}
		if err := read(ctx); err != nil {
			_ = svc.Close()
			cancel()
			w.done.Wait()
			return nil, fmt.Errorf("container watch: %s's runtime: %w", n.Name, err)
		}
		w.done.Go(func() {
			defer func() { _ = svc.Close() }()
			t := time.NewTicker(ContainerPollPeriod)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					// A last read, so that Stop sees every container
					// there when it is called, however short its run.
					last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					defer cancel()
					_ = read(last)
					return
				case <-t.C:
					_ = read(ctx) // a runtime that does not answer once is read again
				}
			}
		})
	}
	return w, nil
}

// Report returns the duplicates so far, a run still going counted until
// now.
func (w *ContainerWatch) Report() FaultCount { return w.ledger.Report(time.Now()) }

// Stop ends the watch, after a last read of every runtime (so that it
// counts every container there now, however short its run), and returns
// its count.
func (w *ContainerWatch) Stop() FaultCount {
	w.cancel()
	w.done.Wait()
	return w.ledger.Report(time.Now())
}

// Runs returns how many containers the watch saw started.
func (w *ContainerWatch) Runs() int { return w.ledger.Runs() }

// ContainerRun is one container as a runtime reported it.
type ContainerRun struct {
	// Pod is "namespace/pod name/container name".
	ID, Pod, Node string
	// Started and Finished are the runtime's, in Unix nanoseconds (0: not
	// yet); Remaining says it still runs.
	Started, Finished int64
	Remaining         bool
}

// ContainerLedger is ContainerWatch's bookkeeping: each container's last
// reported run, by ID.
type ContainerLedger struct {
	mu   sync.Mutex
	runs map[string]ContainerRun
}

// NewContainerLedger returns an empty ledger.
func NewContainerLedger() *ContainerLedger {
	return &ContainerLedger{runs: map[string]ContainerRun{}}
}

// Wants tells whether a container in state needs reading: one not seen
// yet, seen running, or seen before it started (a container created and
// exited between two reads is first seen created).
func (l *ContainerLedger) Wants(id string, state runtimeapi.ContainerState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[id]
	return !ok || r.Remaining || r.Started == 0 || state == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// Observe records what the runtime said of a container.
func (l *ContainerLedger) Observe(r ContainerRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[r.ID] = r
}

// Runs returns how many of the containers observed had started.
func (l *ContainerLedger) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if r.Started > 0 {
			n++
		}
	}
	return n
}

// Report counts the pairs of runs of one pod that overlapped, each with
// how long; a run not finished lasts until now.
func (l *ContainerLedger) Report(now time.Time) FaultCount {
	l.mu.Lock()
	byPod := map[string][]ContainerRun{}
	for _, r := range l.runs {
		if r.Started > 0 {
			byPod[r.Pod] = append(byPod[r.Pod], r)
		}
	}
	l.mu.Unlock()
	pods := make([]string, 0, len(byPod))
	for p := range byPod {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	var out FaultCount
	end := func(r ContainerRun) int64 {
		if r.Finished > 0 && !r.Remaining {
			return r.Finished
		}
		return now.UnixNano()
	}
	for _, p := range pods {
		runs := byPod[p]
		sort.Slice(runs, func(i, j int) bool { return runs[i].Started < runs[j].Started })
		for i := range runs {
			for j := i + 1; j < len(runs); j++ {
				overlap := min(end(runs[i]), end(runs[j])) - runs[j].Started
				if overlap > 0 {
					out.add(time.Duration(overlap), fmt.Sprintf("%s ran twice at once (on %s and %s)", p, runs[i].Node, runs[j].Node))
				}
			}
		}
	}
	return out
}
