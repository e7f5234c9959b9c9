package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/nestlet/nestlet/launcher"
)

func newPlaygroundCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playground",
		Short: "Run a local tree of real clusters with simulated (kwok) nodes, to try Nestlet",
		Long: `A playground is a tree of real control planes (etcd, kube-apiserver, kube-controller-manager,
nestlet-scheduler, kwok for the nodes) running as local processes, an agent in each cluster,
each child joined to its parent with 'nestctl token create' and 'nestctl join'. It keeps running
after 'up' returns, until 'down'.`,
	}
	cmd.AddCommand(newPlaygroundUpCommand(), newPlaygroundDownCommand())
	return cmd
}

type playgroundUpOptions struct {
	config, dir, binDir, nestletBinDir string
	imageArchives, agentArgs           []string
	reportFrequency, timeout           time.Duration
	kwokOnly                           bool
}

func newPlaygroundUpCommand() *cobra.Command {
	var o playgroundUpOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a playground and leave it running",
		Long: `Start every cluster of the topology (--config; by default root <- east, west, each with two
leaves of two kwok nodes labelled with region and zone), an agent in each, join every cluster
to its parent, wait until every child is a Ready node of its parent, write an admin kubeconfig
of the root to <dir>/kubeconfig, and return, leaving everything running.

The topology file:

  clusters:
  - name: root              # exactly one cluster without a parent
  - name: edge
    parent: root            # joins root, appears there as node "edge"
    nodes:                  # kwok nodes
    - name: edge-a
      labels: {topology.kubernetes.io/region: edge}
      cpu: "4"              # optional, default 8
      memory: 16Gi          # optional, default 32Gi
      pods: 50              # optional, default 110

The control-plane binaries are looked up in --bin-dir, $NESTLET_BIN_DIR, beside nestctl, or in
_output/bin of the Nestlet repository holding the working directory ('make binaries' puts
them there). nestlet, nestctl, nestlet-scheduler and nestlet-proxy are taken from
--nestlet-bin-dir, or from beside nestctl, or else from that repository's _output/bin ('make
build' puts them there); nothing is built.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return playgroundUp(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "topology file (default: the built-in root, east, west and four leaves)")
	f.StringVar(&o.dir, "dir", defaultPlaygroundDir(), "directory for the playground's state, clusters, logs and kubeconfig")
	f.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok")
	f.StringVar(&o.nestletBinDir, "nestlet-bin-dir", "", "directory of nestlet, nestctl, nestlet-scheduler and nestlet-proxy (make build)")
	f.StringSliceVar(&o.imageArchives, "image-archive", nil, "an OCI archive (docker-archive tarball) every real node imports into its containerd, under the names it holds (repeated); nothing is pulled from a registry")
	f.StringArrayVar(&o.agentArgs, "agent-arg", nil, "an argument added to every cluster's agent (repeated), e.g. --agent-arg=--child-taint-effect=PreferNoSchedule")
	f.DurationVar(&o.reportFrequency, "report-frequency", 0, "report frequency of every Target (default: nestctl join's)")
	f.BoolVar(&o.kwokOnly, "kwok-only", false, "run the topology's real nodes (real: true) with kwok too; without it they fall back to kwok only where this machine cannot run them (Linux, root, make node-runtime)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up (and stop everything) after this long")
	return cmd
}

func newPlaygroundDownCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop every process of a playground and remove its directory",
		Long: `Stop every process the playground's state file lists (SIGTERM, then SIGKILL after 10s),
check that none is left, and remove the directory. Running it again, or with no playground,
does nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return playgroundDown(cmd.OutOrStdout(), dir) },
	}
	cmd.Flags().StringVar(&dir, "dir", defaultPlaygroundDir(), "the playground's directory")
	return cmd
}

// defaultPlaygroundDir is playground/ in Nestlet's cache directory, the one
// hack/lib.sh uses: $NESTLET_CACHE_DIR, else $XDG_CACHE_HOME/nestlet, else
// ~/.cache/nestlet.
func defaultPlaygroundDir() string {
	if d := os.Getenv("NESTLET_CACHE_DIR"); d != "" {
		return filepath.Join(d, "playground")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "nestlet", "playground")
}

func playgroundUp(cmd *cobra.Command, o playgroundUpOptions) error {
	out := cmd.OutOrStdout()
	topo, err := launcher.LoadTopology(o.config)
	if err != nil {
		return err
	}
	binDir := o.binDir
	if binDir == "" && os.Getenv(launcher.BinDirEnv) == "" {
		binDir = besideNestctl("kube-apiserver")
	}
	if _, err := launcher.FindBinaries(binDir); err != nil {
		return fmt.Errorf("%w\nbuild them with 'make binaries' in the Nestlet repository, or point --bin-dir at them", err)
	}
	nestletBinDir := o.nestletBinDir
	if nestletBinDir == "" {
		nestletBinDir = besideNestctl("nestlet", "nestlet-scheduler", "nestlet-proxy")
	}
	var joinArgs []string
	if o.reportFrequency > 0 {
		joinArgs = append(joinArgs, "--report-frequency="+o.reportFrequency.String())
	}

	images := map[string]string{}
	for _, a := range o.imageArchives {
		abs, err := filepath.Abs(a)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return fmt.Errorf("--image-archive: %w", err)
		}
		images[filepath.Base(abs)] = abs
	}

	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	var mu sync.Mutex
	start := time.Now()
	fmt.Fprintf(out, "playground in %s\n", o.dir)
	pg, err := launcher.StartPlayground(ctx, topo, launcher.PlaygroundOptions{
		Dir:           o.dir,
		BinDir:        binDir,
		NestletBinDir: nestletBinDir,
		JoinArgs:      joinArgs,
		AgentArgs:     o.agentArgs,
		KwokOnly:      o.kwokOnly,
		Images:        images,
		Progress: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		return err
	}
	root := pg.Cluster(topo.Root())
	if hosts := pg.HostLines(); len(hosts) > 0 {
		fmt.Fprintf(out, "\neach cluster is a host of its own on a simulated WAN (%s; this machine is %s):\n  %s\n", launcher.WANCIDR, launcher.OperatorIP(), strings.Join(hosts, "\n  "))
	}
	fmt.Fprintf(out, `
%d clusters running; the root, cluster %q, at %s
logs: %s/<cluster>/*.log and %s/<cluster>-nestlet.log

export KUBECONFIG=%s
kubectl get nodes
nestctl tree
nestctl playground down%s    # stops everything
`, len(topo.Clusters), root.Name, root.URL, pg.Dir, pg.Dir, pg.Kubeconfig, dirFlag(o.dir))
	return nil
}

func playgroundDown(out io.Writer, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	s, err := launcher.ReadState(abs)
	switch {
	case errors.Is(err, launcher.ErrNoState):
		if _, statErr := os.Stat(abs); errors.Is(statErr, os.ErrNotExist) {
			fmt.Fprintf(out, "no playground in %s: nothing to stop\n", abs)
			return nil
		}
		return fmt.Errorf("%s holds no playground state file (%s): left as it is", abs, launcher.StateFileName)
	case err != nil:
		return err
	}
	if alive := s.Alive(); len(alive) > 0 {
		fmt.Fprintf(out, "stopping %d processes of the playground in %s\n", len(alive), abs)
	} else {
		fmt.Fprintf(out, "nothing of the playground in %s is running\n", abs)
	}
	if _, err := launcher.StopDetached(abs, 10*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(out, "removed %s\n", abs)
	return nil
}

// besideNestctl returns the directory of the running nestctl when it holds
// every one of names (as _output/bin does), else "".
func besideNestctl(names ...string) string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(self)
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return ""
		}
	}
	return dir
}

func dirFlag(dir string) string {
	if dir == defaultPlaygroundDir() {
		return ""
	}
	return " --dir " + dir
}
