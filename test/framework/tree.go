package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
)

// Tree is a topology: clusters, and which joins which.
type Tree struct {
	Clusters []launcher.ClusterOptions
	// Edges are {child, parent} pairs.
	Edges [][2]string
	// JoinArgs are added to every `nestctl join` (e.g. --report-frequency).
	JoinArgs []string
	// AgentArgs are added to every agent's command line.
	AgentArgs []string
	// Metrics gives every agent a metrics port (TreeEnv.MetricsURL).
	Metrics bool
	// Proxies are the clusters that run a nestlet-proxy (started before
	// any join, so their children use tunnels).
	Proxies []string
	// ClusterAgentArgs are added to the agent of one cluster.
	ClusterAgentArgs map[string][]string
	// EdgeJoinArgs are added to the `nestctl join` of one edge ({child,
	// parent}), after JoinArgs.
	EdgeJoinArgs map[[2]string][]string
	// Links puts a breakable TCP proxy between every child and its parent's
	// API server (TreeEnv.Links).
	Links bool
	// Network lays the clusters out (launcher.DefaultNetwork when empty:
	// each its own host, children behind NAT). On hosts, every parent runs
	// a nestlet-proxy, as the chart installs it: behind NAT a parent
	// reaches its children's kubelet API only through the tunnels they
	// open.
	Network launcher.Network
	// Gateways runs a gateway in every agent on hosts
	// (launcher.Cluster.GatewayArgs): one pod network across the tree.
	Gateways bool
	// Reachable are {from, to} pairs of clusters on hosts where to's host
	// admits connections from from's (its firewall opened, as an operator
	// does with a VPN or a public address): a parent reaches a child that
	// serves its kubelet API directly (--kubelet-api=direct) only so, and
	// from's nestlet-proxy lets to's node advertise its own endpoint
	// (ProxyArgs).
	Reachable [][2]string
	// ServiceNodePorts: on hosts, every parent's nestlet-proxy serves its
	// cluster's Services' node ports (--service-node-ports), published to
	// the WAN, as launcher.StartPlayground runs them.
	ServiceNodePorts bool
}

// ProxyArgs are the arguments of cluster's nestlet-proxy in the tree: the
// children it reaches directly (Tree.Reachable) may advertise their own
// kubelet endpoints, pinned where they serve it (--direct-nodes
// NAME=IP:PORT), as their parent's operator says where they are.
func (te *TreeEnv) ProxyArgs(cluster string) []string { return slices.Clone(te.proxyArgs[cluster]) }

// argsOf returns the agent arguments of every cluster of tree, and the
// proxies': a child reachable from its parent (Tree.Reachable) that
// serves its kubelet API directly on an address without a port is given
// one, so that its parent's proxy pins it there.
func (te *TreeEnv) argsOf(tree Tree) (map[string][]string, error) {
	agents := map[string][]string{}
	for _, c := range te.Clusters() {
		args := append(append([]string(nil), tree.AgentArgs...), tree.ClusterAgentArgs[c.Name]...)
		if tree.Gateways {
			args = append(args, c.GatewayArgs()...)
		}
		for j, a := range args {
			args[j] = strings.ReplaceAll(a, ClusterAddress, c.Address())
		}
		agents[c.Name] = args
	}
	const flag = "--kubelet-direct-address="
	direct := map[string][]string{}
	for _, r := range tree.Reachable {
		from, to := te.Cluster(r[0]), te.Cluster(r[1])
		if from == nil || to == nil {
			return nil, fmt.Errorf("reachable pair %v names an unknown cluster", r)
		}
		args := agents[to.Name]
		i := len(args) - 1 // the last one counts
		for i >= 0 && !strings.HasPrefix(args[i], flag) {
			i--
		}
		entry := to.Name
		if i >= 0 {
			addr := strings.TrimPrefix(args[i], flag)
			if _, _, err := net.SplitHostPort(addr); err != nil {
				port, err := launcher.FreePort()
				if err != nil {
					return nil, err
				}
				addr = net.JoinHostPort(addr, strconv.Itoa(port))
				args[i] = flag + addr
			}
			entry += "=" + addr
		}
		direct[from.Name] = append(direct[from.Name], entry)
	}
	te.proxyArgs = map[string][]string{}
	for name, entries := range direct {
		te.proxyArgs[name] = []string{"--direct-nodes=" + strings.Join(entries, ",")}
	}
	return agents, nil
}

// ClusterAddress in an agent argument of a Tree is replaced by the address
// of the agent's cluster (Cluster.Address): its host's, on hosts.
const ClusterAddress = "$(CLUSTER_ADDRESS)"

// TreeEnv is a started Tree.
type TreeEnv struct {
	*launcher.Environment
	// Targets holds the name of the Target of each child, by child.
	Targets map[string]string
	// MetricsURL is each agent's /metrics, by cluster (with Tree.Metrics).
	MetricsURL map[string]string
	// Links holds the link of each edge {child, parent} (with Tree.Links).
	Links map[[2]string]*Link

	joinArgs  []string
	proxyArgs map[string][]string
}

// Link returns the link from child to parent (Tree.Links).
func (te *TreeEnv) Link(child, parent string) *Link { return te.Links[[2]string{child, parent}] }

// StartTree starts the clusters, an agent in each, and joins every edge as
// an operator does (nestctl token create / nestctl join), all joins at once;
// it returns once every Target is Ready.
func StartTree(ctx context.Context, cfg launcher.Config, tree Tree) (*TreeEnv, error) {
	if cfg.Network == "" {
		cfg.Network = tree.Network
	}
	env, err := launcher.Start(ctx, withChartIdentities(cfg), launcher.Spec{Clusters: tree.Clusters})
	if err != nil {
		return nil, err
	}
	if env.Network == launcher.NetworkHosts {
		tree.Proxies = withParents(tree.Proxies, tree.Edges)
	}
	te := &TreeEnv{Environment: env, Targets: map[string]string{}, MetricsURL: map[string]string{}, Links: map[[2]string]*Link{}, joinArgs: tree.JoinArgs}
	if err := te.setup(ctx, tree); err != nil {
		te.closeLinks()
		env.Stop()
		return nil, fmt.Errorf("%w (logs kept in %s)", err, env.Dir)
	}
	return te, nil
}

func (te *TreeEnv) setup(ctx context.Context, tree Tree) error {
	clusters := te.Clusters()
	errs := make([]error, len(clusters)+len(tree.Edges))
	var wg sync.WaitGroup
	agentArgs, err := te.argsOf(tree)
	if err != nil {
		return err
	}
	for _, name := range tree.Proxies {
		c := te.Cluster(name)
		if c == nil {
			return fmt.Errorf("proxy for unknown cluster %q", name)
		}
		start := te.StartProxy
		if tree.ServiceNodePorts {
			start = te.StartProxyServingNodePorts
		}
		if _, err := start(ctx, c, te.ProxyArgs(name)...); err != nil {
			return err
		}
	}
	for _, r := range tree.Reachable {
		from, to := te.Cluster(r[0]), te.Cluster(r[1])
		if from.Host != nil && to.Host != nil {
			if err := to.Host.Admit(from.Host); err != nil {
				return err
			}
		}
	}
	for i, c := range clusters {
		args := agentArgs[c.Name]
		if tree.Metrics {
			port, err := launcher.FreePort()
			if err != nil {
				return err
			}
			addr := fmt.Sprintf("%s:%d", c.Address(), port)
			args = append(append([]string(nil), args...), "--metrics-bind-address="+addr)
			te.MetricsURL[c.Name] = "http://" + addr + "/metrics"
		}
		wg.Go(func() { _, errs[i] = te.StartAgent(ctx, c, args...) })
	}
	wg.Wait()
	var mu sync.Mutex
	for i, e := range tree.Edges {
		child, parent := te.Cluster(e[0]), te.Cluster(e[1])
		if child == nil || parent == nil {
			return fmt.Errorf("edge %v names an unknown cluster", e)
		}
		opts := launcher.JoinOptions{ExtraJoinArgs: append(slices.Clone(tree.JoinArgs), tree.EdgeJoinArgs[e]...)}
		if tree.Links {
			l, err := NewLink(ctx, child, parent)
			if err != nil {
				return err
			}
			te.Links[e] = l
			opts.ParentURL = l.URL
		}
		wg.Go(func() {
			name, err := launcher.Join(ctx, parent, child, opts)
			errs[len(clusters)+i] = err
			mu.Lock()
			te.Targets[e[0]] = name
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// withParents returns proxies with every parent of edges added.
func withParents(proxies []string, edges [][2]string) []string {
	out := append([]string(nil), proxies...)
	for _, e := range edges {
		if !slices.Contains(out, e[1]) {
			out = append(out, e[1])
		}
	}
	return out
}

// Rejoin joins child to parent again (after a test deleted its Target), as
// StartTree did: through the edge's link when there is one, with the tree's
// join arguments; it returns once the new Target is Ready.
func (te *TreeEnv) Rejoin(ctx context.Context, child, parent string) error {
	opts := launcher.JoinOptions{ExtraJoinArgs: te.joinArgs}
	if l := te.Link(child, parent); l != nil {
		opts.ParentURL = l.URL
	}
	name, err := launcher.Join(ctx, te.Cluster(parent), te.Cluster(child), opts)
	if err != nil {
		return err
	}
	te.Targets[child] = name
	return nil
}

// RunTreeMain starts tree for a test package's TestMain, runs the tests and
// stops everything, keeping the logs (and printing their tails) on failure.
// It returns the exit code.
func RunTreeMain(m *testing.M, tree Tree, started func(*TreeEnv)) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	te, err := StartTree(ctx, launcher.Config{}, tree)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the tree:", err)
		return 1
	}
	defer func() {
		if refused := Refusals(te.Environment); code == 0 && len(refused) > 0 {
			fmt.Fprintf(os.Stderr, "Nestlet's components were refused by their own cluster (a permission the chart lacks):\n%s\n", strings.Join(refused, "\n"))
			code = 1
		}
		te.Cleanup(code != 0, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
		te.closeLinks()
	}()
	started(te)
	return m.Run()
}

// closeLinks stops the link proxies.
func (te *TreeEnv) closeLinks() {
	for _, l := range te.Links {
		l.Close()
	}
}
