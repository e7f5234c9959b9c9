package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nestlet/nestlet/pkg/permissions"
)

// Spec is a set of clusters to start together.
type Spec struct {
	Clusters []ClusterOptions
}

// Config tunes an Environment.
type Config struct {
	// BinDir holds the binaries; see FindBinaries for the default.
	BinDir string
	// NestletBinDir holds the project's programs; see
	// FindNestletBinaries for the default.
	NestletBinDir string
	// Dir is where certificates, kubeconfigs and logs go; a new temporary
	// directory when empty.
	Dir string
	// Detach starts every process in a session of its own, without the
	// death signal that otherwise ends it with this program, and records
	// it, and each cluster, in Dir/state.json (StateFileName) as it starts:
	// the Environment outlives the program that started it, and
	// StopDetached stops it from its state file. Stop still works while
	// this program runs. Dir must not hold a state file already.
	Detach bool
	// Network lays the clusters out: each on a host of its own behind NAT
	// (NetworkHosts), or all on this machine's network (NetworkShared).
	// DefaultNetwork when empty.
	Network Network
	// Identities are the permissions Nestlet's components run with, by
	// component (ComponentAgent, ComponentProxy), instead of the cluster's
	// admin credentials: StartAgent and StartProxy then make each its
	// ServiceAccount, bind it the rules as the chart does, and give it a
	// token of that ServiceAccount. A component without an entry runs as
	// admin.
	Identities map[string][]permissions.Rule
	// LeastPrivilege gives the agent and the proxy, where Identities has
	// no entry, the permissions their programs print
	// (--print-permissions): what the chart grants them. The launcher
	// links none of their code.
	LeastPrivilege bool
}

// Environment is a set of clusters sharing one etcd.
type Environment struct {
	Dir      string
	Binaries *Binaries
	Nestlet  *NestletBinaries
	Etcd     *Etcd
	// Network is how its clusters are laid out.
	Network Network
	// Identities are Config.Identities.
	Identities map[string][]permissions.Rule

	mu       sync.Mutex
	hosts    []*Host
	clusters map[string]*Cluster
	order    []string
	procs    processGroup
	// state is the state file of a detached Environment, else nil.
	state *stateWriter
}

// Start starts etcd and then every cluster of spec concurrently. On error,
// everything already started is stopped before Start returns.
func Start(ctx context.Context, cfg Config, spec Spec) (env *Environment, err error) {
	bins, err := FindBinaries(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	own, err := FindNestletBinaries(cfg.NestletBinDir)
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nestlet-env-"); err != nil {
			return nil, err
		}
	}
	network := cfg.Network
	if network == "" {
		network = DefaultNetwork()
	}
	switch network {
	case NetworkHosts:
		if err := CheckHosts(); err != nil {
			return nil, err
		}
	case NetworkShared:
	default:
		return nil, fmt.Errorf("unknown network %q: use %s or %s", network, NetworkHosts, NetworkShared)
	}
	identities := cfg.Identities
	if cfg.LeastPrivilege {
		if identities, err = printedIdentities(own, cfg.Identities); err != nil {
			return nil, err
		}
	}
	env = &Environment{Dir: dir, Binaries: bins, Nestlet: own, Network: network, Identities: identities, clusters: map[string]*Cluster{}}
	if cfg.Detach {
		if env.Dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(env.Dir, 0o755); err != nil {
			return nil, err
		}
		if env.state, err = registerDetached(env.Dir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			env.Stop()
			err = fmt.Errorf("%w (logs kept in %s)", err, dir)
		}
	}()
	// The shared etcd listens where the API servers reach it: loopback,
	// or the operator's address on the WAN, reachable from every host.
	etcdIP := "127.0.0.1"
	if network == NetworkHosts {
		if err := EnsureWAN(); err != nil {
			return env, err
		}
		etcdIP = OperatorIP()
	}
	if env.Etcd, err = startEtcd(ctx, bins, dir, "", etcdIP, &env.procs); err != nil {
		return env, err
	}
	if err := env.AddClusters(ctx, spec.Clusters...); err != nil {
		return env, err
	}
	return env, nil
}

// AddClusters starts more clusters, concurrently, against the shared etcd.
func (e *Environment) AddClusters(ctx context.Context, clusters ...ClusterOptions) error {
	seen := map[string]bool{}
	for _, o := range clusters {
		if seen[o.Name] || e.Cluster(o.Name) != nil {
			return fmt.Errorf("cluster %q given twice", o.Name)
		}
		seen[o.Name] = true
	}
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, o := range clusters {
		wg.Go(func() {
			var host *Host
			if e.Network == NetworkHosts {
				h, err := newHost(o.Name, o.Region, e.Dir, e.state != nil)
				if err != nil {
					errs[i] = fmt.Errorf("cluster %s: %w", o.Name, err)
					return
				}
				e.mu.Lock()
				e.hosts = append(e.hosts, h)
				e.mu.Unlock()
				host = h
			}
			c, err := startCluster(ctx, e.Binaries, e.Nestlet, e.Etcd, e.Dir, host, o, &e.procs)
			if err != nil {
				if c != nil {
					err = errors.Join(err, c.stopRealNodes())
				}
				errs[i] = err
				return
			}
			if e.state != nil {
				if err := e.state.addCluster(c); err != nil {
					errs[i] = err
					return
				}
			}
			e.mu.Lock()
			e.clusters[o.Name] = c
			e.order = append(e.order, o.Name)
			e.mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Cluster returns the named cluster, or nil.
func (e *Environment) Cluster(name string) *Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clusters[name]
}

// Clusters returns the clusters by name, sorted.
func (e *Environment) Clusters() []*Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	names := slices.Sorted(slices.Values(e.order))
	out := make([]*Cluster, 0, len(names))
	for _, n := range names {
		out = append(out, e.clusters[n])
	}
	return out
}

// Hosts returns the hosts of the clusters (NetworkHosts), by cluster name.
func (e *Environment) Hosts() []*Host {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]*Host(nil), e.hosts...)
	slices.SortFunc(out, func(a, b *Host) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

// StartProcess starts a program (an agent, say) that the Environment then
// stops with everything else; its log is Dir/<name>.log.
func (e *Environment) StartProcess(name, bin string, args ...string) (*Process, error) {
	return e.StartProcessIn(nil, name, bin, args...)
}

// StartProcessIn is StartProcess on the host of cluster c (on this
// machine when c is nil or has no host).
func (e *Environment) StartProcessIn(c *Cluster, name, bin string, args ...string) (*Process, error) {
	p, err := startProcessIn(c.netns(), e.Dir, name, bin, nil, args...)
	if err != nil {
		return nil, err
	}
	e.procs.add(p)
	return p, nil
}

// Processes returns every process the Environment started, stopped or not.
func (e *Environment) Processes() []*Process { return e.procs.list() }

// Stop stops every process the Environment started, real nodes first (so
// that they clean up the host while their runtime still runs). It is
// idempotent. What a real node could not undo is reported by StopErr.
func (e *Environment) Stop() {
	_ = e.StopErr()
}

// StopErr is Stop, returning what could not be cleaned up on the host.
func (e *Environment) StopErr() error {
	clusters := e.Clusters()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { errs[i] = c.stopRealNodes() })
	}
	wg.Wait()
	e.procs.stopAll(10 * time.Second)
	e.mu.Lock()
	hosts := e.hosts
	e.hosts = nil
	e.mu.Unlock()
	for _, h := range hosts {
		errs = append(errs, h.Remove())
	}
	if e.Network == NetworkHosts {
		errs = append(errs, removeUnusedWAN())
	}
	return errors.Join(errs...)
}

// RemoveDir deletes the Environment's directory (call after Stop, when the
// logs are not needed).
func (e *Environment) RemoveDir() error {
	if e.state != nil {
		unregisterDetached(e.Dir)
	}
	return os.RemoveAll(e.Dir)
}

// LogTails returns the last n lines of every process's log, for a failure
// report.
func (e *Environment) LogTails(n int) string {
	var b strings.Builder
	for _, p := range e.procs.list() {
		rel, _ := filepath.Rel(e.Dir, p.LogPath)
		fmt.Fprintf(&b, "=== %s (%s)\n%s\n", p.Name, rel, p.Tail(n))
	}
	return b.String()
}

// Cleanup stops the Environment; when failed it logs the tails of the logs
// and keeps the directory, else it removes it.
func (e *Environment) Cleanup(failed bool, logf func(format string, args ...any)) {
	if err := e.StopErr(); err != nil {
		logf("cleaning up real nodes: %v", err)
	}
	if failed {
		logf("logs kept in %s; last lines:\n%s", e.Dir, e.LogTails(25))
		return
	}
	_ = e.RemoveDir()
}
