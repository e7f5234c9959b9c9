// Command nestlet is the Nestlet agent: it runs in every cluster, joins the
// parents named by this cluster's Targets, runs a virtual node in each, and
// decorates the virtual nodes of this cluster's own children.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/agent"
)

func main() {
	var (
		kubeconfig = pflag.String("kubeconfig", "", "kubeconfig of this cluster (default: in-cluster config, or $KUBECONFIG)")
		namespace  = pflag.String("namespace", "nestlet-system", "namespace of this cluster where node identities are kept")
		groupKeys  = pflag.StringSlice("group-keys", api.DefaultGroupKeys, "node label keys that group nodes in the summary sent to parents")
		lease      = pflag.Int32("lease-duration", 40, "lease duration of virtual nodes, in seconds")
	)
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	pflag.CommandLine.AddGoFlagSet(klogFlags)
	pflag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	vklog.L = klogv2.New(nil)

	if err := run(ctx, *kubeconfig, *namespace, *groupKeys, *lease); err != nil {
		fmt.Fprintln(os.Stderr, "nestlet:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig, namespace string, groupKeys []string, lease int32) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	a, err := agent.New(agent.Config{RESTConfig: cfg, Namespace: namespace, GroupKeys: groupKeys, LeaseDurationSeconds: lease})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
