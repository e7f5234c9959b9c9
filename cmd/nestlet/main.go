// Command nestlet is the Nestlet agent: it runs in every cluster, joins the
// parents named by this cluster's Targets, runs a virtual node in each,
// forwards the pods bound to it into this cluster, and decorates the
// virtual nodes of this cluster's own children.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/agent"
	"github.com/nestlet/nestlet/provider/kubeutil"
)

type options struct {
	kubeconfig    string
	namespace     string
	groupKeys     []string
	lease         int32
	podWorkers    int
	profiling     bool
	bounceTimeout time.Duration
	metricsAddr   string
	kubeletAPI    string
	directAddress string
}

func main() {
	var o options
	pflag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (default: in-cluster config, or $KUBECONFIG)")
	pflag.StringVar(&o.namespace, "namespace", "nestlet-system", "namespace of this cluster where node identities are kept")
	pflag.StringSliceVar(&o.groupKeys, "group-keys", api.DefaultGroupKeys, "node label keys that group nodes in the summary sent to parents")
	pflag.Int32Var(&o.lease, "lease-duration", 40, "lease duration of virtual nodes, in seconds")
	pflag.IntVar(&o.podWorkers, "pod-workers", 50, "pods forwarded concurrently per parent")
	pflag.DurationVar(&o.bounceTimeout, "bounce-timeout", 30*time.Second, "how long a forwarded pod may stay unschedulable here before it is bounced back to the parent")
	pflag.StringVar(&o.metricsAddr, "metrics-bind-address", "", "address serving Prometheus metrics at /metrics, e.g. :9090 (off when empty: a child in tunnel mode listens on nothing)")
	pflag.StringVar(&o.kubeletAPI, "kubelet-api", agent.KubeletAPIAuto, "how virtual nodes serve the kubelet API (logs, exec, attach, port-forward): auto (the parent's nestlet-proxy if it publishes one, else direct if --kubelet-direct-address is set, else off), tunnel, direct or off")
	pflag.StringVar(&o.directAddress, "kubelet-direct-address", "", "direct mode: the IP the kubelet API listens on and virtual nodes advertise (a port is chosen per Target; IP:port with a single Target); the parent's API server must reach it")
	pflag.BoolVar(&o.profiling, "profiling", false, "also serve Go's pprof profiles under /debug/pprof/ on --metrics-bind-address")
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	pflag.CommandLine.AddGoFlagSet(klogFlags)
	pflag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	vklog.L = klogv2.New(nil)

	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "nestlet:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	cfg, err := kubeutil.RESTConfig(o.kubeconfig, "")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000

	var reg *prometheus.Registry
	if o.metricsAddr != "" {
		reg = prometheus.NewRegistry()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if o.profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		srv := &http.Server{Addr: o.metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Serving metrics")
			}
		}()
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
	}
	acfg := agent.Config{
		RESTConfig: cfg, Namespace: o.namespace, GroupKeys: o.groupKeys, LeaseDurationSeconds: o.lease,
		PodWorkers: o.podWorkers, BounceTimeout: o.bounceTimeout,
		KubeletAPI: o.kubeletAPI, DirectAddress: o.directAddress,
	}
	if reg != nil {
		acfg.Metrics = reg
	}
	a, err := agent.New(acfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
