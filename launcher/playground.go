package launcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nestlet/nestlet/api"
)

// PlaygroundKubeconfig is the name of the root's kubeconfig in a playground
// directory.
const PlaygroundKubeconfig = "kubeconfig"

// PlaygroundOptions tune StartPlayground.
type PlaygroundOptions struct {
	// Dir holds everything: state file, clusters, logs, the root's
	// kubeconfig. It must be missing, empty, or a stopped playground.
	// Required.
	Dir string
	// BinDir holds the control-plane binaries (see FindBinaries).
	BinDir string
	// NestletBinDir holds nestlet, nestctl, nestlet-scheduler and
	// nestlet-proxy (see FindNestletBinaries).
	NestletBinDir string
	// JoinArgs are added to every `nestctl join`.
	JoinArgs []string
	// AgentArgs are added to every agent's command line.
	AgentArgs []string
	// Images are more images every real node imports, by the name pods
	// use: OCI archives (such as the conformance suite's images,
	// hack/conformance.sh).
	Images map[string]string
	// KwokOnly runs the topology's real nodes with kwok too. Without it,
	// they run with kwok only where the machine cannot run real nodes,
	// which Progress is told in one line.
	KwokOnly bool
	// Progress receives one line per step; nil discards them.
	Progress func(format string, args ...any)
}

// Playground is a started topology whose processes outlive the program that
// started it; StopDetached(Dir) stops it.
type Playground struct {
	*Environment
	Topology *Topology
	// Kubeconfig is a self-contained admin kubeconfig of the root.
	Kubeconfig string
}

// ErrPlaygroundRunning is returned by StartPlayground when its directory
// holds a playground of which some process still runs.
var ErrPlaygroundRunning = errors.New("a playground is running there already")

// StartPlayground starts a Topology detached (Config.Detach): etcd, every
// cluster, an agent in each, then joins every cluster to its parent as an
// operator does (nestctl token create / nestctl join). It returns once every
// Target is Ready and every child is a Ready node of its parent, with the
// cluster role and a summary covering its whole subtree. On error it stops
// whatever it started and keeps the directory (and its logs) for
// StopDetached to remove.
func StartPlayground(ctx context.Context, topo *Topology, o PlaygroundOptions) (*Playground, error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if o.Dir == "" {
		return nil, errors.New("playground: a directory is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	if _, err := FindBinaries(o.BinDir); err != nil {
		return nil, err
	}
	if _, err := FindNestletBinaries(o.NestletBinDir); err != nil {
		return nil, err
	}
	if err := preparePlaygroundDir(dir); err != nil {
		return nil, err
	}

	start := time.Now()
	progress("starting etcd")
	env, err := Start(ctx, Config{BinDir: o.BinDir, NestletBinDir: o.NestletBinDir, Dir: dir, Detach: true, LeastPrivilege: true}, Spec{})
	if err != nil {
		return nil, err
	}
	pg := &Playground{Environment: env, Topology: topo}
	if err := pg.setup(ctx, o, progress); err != nil {
		env.Stop()
		return nil, fmt.Errorf("%w (logs kept in %s; nestctl playground down removes them)", err, dir)
	}
	progress("playground ready in %s", time.Since(start).Round(time.Second))
	return pg, nil
}

// HostLines describe the clusters' hosts, one line each: address on the
// WAN, region, and whom it admits (NetworkHosts; none else).
func (pg *Playground) HostLines() []string {
	var out []string
	for _, h := range pg.Hosts() {
		region := h.Region
		if region == "" {
			region = "-"
		}
		admits := "admits no host: behind NAT, it only dials out"
		if children := pg.Topology.Children(h.Cluster); len(children) > 0 {
			admits = "admits only its children (" + strings.Join(children, ", ") + ")"
			if pg.Topology.Root() != h.Cluster {
				admits += "; behind NAT to its parent"
			}
		}
		out = append(out, fmt.Sprintf("host of %-8s %-12s region %-7s %s", h.Cluster, h.IP, region, admits))
	}
	return out
}

// playgroundClusters is what the playground starts for each cluster of
// topo: with real nodes, metrics-server in every cluster (kubectl top and
// autoscalers at any level, the real leaves' kubelets read through the
// virtual nodes above them), and images in every real node.
func playgroundClusters(topo *Topology, kwokOnly bool, images map[string]string) []ClusterOptions {
	opts := topo.ClusterOptions(kwokOnly)
	for i := range opts {
		opts[i].MetricsServer = !kwokOnly
		for j := range opts[i].RealNodes {
			opts[i].RealNodes[j].Images = images
		}
	}
	return opts
}

func (pg *Playground) setup(ctx context.Context, o PlaygroundOptions, progress func(string, ...any)) error {
	topo := pg.Topology
	kwokOnly := o.KwokOnly
	if topo.HasRealNodes() && !kwokOnly {
		if err := realNodesAvailable(o.BinDir); err != nil {
			progress("real nodes run on kwok instead: %v", err)
			kwokOnly = true
		}
	}
	progress("starting %d clusters...", len(topo.Clusters))
	var wg sync.WaitGroup
	opts := playgroundClusters(topo, kwokOnly, o.Images)
	errs := make([]error, len(opts))
	for i, co := range opts {
		wg.Go(func() {
			t0 := time.Now()
			if errs[i] = pg.AddClusters(ctx, co); errs[i] == nil {
				progress("%s ready (%s, %s, %s)", co.Name, plural(len(co.Nodes), "kwok node"), plural(len(co.RealNodes), "real node"), time.Since(t0).Round(100*time.Millisecond))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, line := range pg.HostLines() {
		progress("%s", line)
	}

	// A nestlet-proxy in every parent, before the joins: the children's
	// agents find it and serve logs/exec through reverse tunnels.
	parents := map[string]bool{}
	for _, e := range topo.Edges() {
		parents[e[1]] = true
	}
	for _, c := range pg.Clusters() {
		if !parents[c.Name] {
			continue
		}
		if _, err := pg.StartProxyServingNodePorts(ctx, c); err != nil {
			return err
		}
		progress("%s runs a nestlet-proxy, which serves its Services' node ports", c.Name)
	}

	// Each agent runs a gateway on its host: one pod network across the
	// tree, through the tunnels the children open.
	progress("starting an agent in each cluster")
	clusters := pg.Clusters()
	errs = make([]error, len(clusters))
	for i, c := range clusters {
		args := append(append([]string(nil), o.AgentArgs...), c.GatewayArgs()...)
		wg.Go(func() { _, errs[i] = pg.StartAgent(ctx, c, args...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	edges := topo.Edges()
	errs = make([]error, len(edges))
	for i, e := range edges {
		child, parent := pg.Cluster(e[0]), pg.Cluster(e[1])
		wg.Go(func() {
			progress("joining %s -> %s", child.Name, parent.Name)
			target, err := Join(ctx, parent, child, JoinOptions{ExtraJoinArgs: o.JoinArgs})
			if err != nil {
				errs[i] = fmt.Errorf("joining %s to %s: %w", child.Name, parent.Name, err)
				return
			}
			progress("%s joined %s (target %s Ready)", child.Name, parent.Name, target)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	if len(edges) > 0 {
		progress("waiting for every child to be a Ready node of its parent, its summary covering its subtree")
	}
	for i, e := range edges {
		wg.Go(func() {
			covers := topo.Subtree(e[0])
			if errs[i] = pg.waitVirtualNode(ctx, e[1], e[0], covers); errs[i] == nil {
				progress("%s is a Ready node of %s covering %v", e[0], e[1], covers)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	pg.Kubeconfig = filepath.Join(pg.Dir, PlaygroundKubeconfig)
	return writeStandaloneKubeconfig(pg.Cluster(topo.Root()).KubeconfigPath, pg.Kubeconfig, "nestlet-playground")
}

// realNodesAvailable returns why this machine cannot run real nodes, or
// nil.
func realNodesAvailable(binDir string) error {
	if binDir == "" {
		bins, err := FindBinaries("")
		if err != nil {
			return err
		}
		binDir = bins.Dir
	}
	rt, err := FindNodeRuntime(binDir)
	if err != nil {
		return err
	}
	return CheckRealNodes(rt)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// waitVirtualNode waits until node child of cluster parent is Ready, has the
// cluster role, and its summary covers the clusters covers.
func (pg *Playground) waitVirtualNode(ctx context.Context, parent, child string, covers []string) error {
	var last *corev1.Node
	client := pg.Cluster(parent).Client
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		last = n
		_, role := n.Labels[api.LabelNodeRoleCluster]
		s, ok := api.ParseSummary(n)
		return NodeReady(n) && role && ok && slices.Equal(s.Covered, covers), nil
	})
	if err == nil {
		return nil
	}
	if last == nil {
		return fmt.Errorf("node %s did not appear in %s: %w", child, parent, err)
	}
	var covered []string
	if s, ok := api.ParseSummary(last); ok {
		covered = s.Covered
	}
	_, role := last.Labels[api.LabelNodeRoleCluster]
	return fmt.Errorf("node %s of %s: ready %t, cluster role %t, summary covers %v (want %v): %w",
		child, parent, NodeReady(last), role, covered, covers, err)
}

// preparePlaygroundDir makes sure dir can hold a new playground: missing,
// empty, or one whose processes are all gone (then it is removed first).
func preparePlaygroundDir(dir string) error {
	s, err := ReadState(dir)
	switch {
	case err == nil:
		if alive := s.Alive(); len(alive) > 0 {
			return fmt.Errorf("%s: %w (%d processes): stop it first (nestctl playground down)", dir, ErrPlaygroundRunning, len(alive))
		}
		if _, err := StopDetached(dir, 0); err != nil {
			return err
		}
	case !errors.Is(err, ErrNoState):
		return err
	default:
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("%s exists and is not a playground directory: choose another directory", dir)
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// writeStandaloneKubeconfig writes the kubeconfig at from to to, with the
// certificates embedded and the context named name.
func writeStandaloneKubeconfig(from, to, name string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return err
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil {
		return fmt.Errorf("%s has no current context", from)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cfg.Clusters[cur.Cluster]
	out.AuthInfos[name] = cfg.AuthInfos[cur.AuthInfo]
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	out.CurrentContext = name
	if err := clientcmd.WriteToFile(*out, to); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", to, err)
	}
	return nil
}
