// Command nestlet is the Nestlet agent: it runs in every cluster, joins the
// parents named by this cluster's Targets, runs a virtual node in each,
// forwards the pods bound to it into this cluster, and decorates the
// virtual nodes of this cluster's own children.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/command"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/provider/agent"
)

func main() {
	var o options
	o.addFlags(pflag.CommandLine)
	command.Main("nestlet", pflag.CommandLine, &o.printPermissions, agent.Permissions, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	vklog.L = klogv2.New(nil)
	cfg, err := kubeclient.RESTConfig(o.kubeconfig, "")
	if err != nil {
		return err
	}
	kubeclient.ControllerLimits(cfg)

	var reg *prometheus.Registry
	if o.metricsAddr != "" {
		reg = prometheus.NewRegistry()
		// go_goroutines, go_memstats_*, process_resident_memory_bytes, ...
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	outage := o.outage
	if outage <= 0 {
		outage = -1 // none (0 in Config is the default)
	}
	acfg := agent.Config{
		RESTConfig: cfg, Namespace: o.namespace, GroupKeys: o.groupKeys, LeaseDurationSeconds: o.lease, OutageTolerance: outage,
		PodWorkers: o.podWorkers, BounceTimeout: o.bounceTimeout, HeldMaxAge: o.heldMaxAge, NamespaceIdle: o.namespaceIdle,
		TrustedSchedulers: o.trustedSchedulers,
		KubeletAPI:        o.kubeletAPI, DirectAddress: o.directAddress,
		PodAPI: o.podAPI,
	}
	if reg != nil {
		acfg.Metrics = reg
	}
	if o.gatewayOn {
		acfg.Gateway = &o.gateway
	}
	if o.heldMaxAge <= api.RenewWaiting {
		return fmt.Errorf("--held-max-age %s: must be longer than %s, how often parents ask again for a pod that waits for room", o.heldMaxAge, api.RenewWaiting)
	}
	for _, c := range o.podCIDRPool {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return fmt.Errorf("--pod-cidr-pool %q: want CIDRs, e.g. 10.128.0.0/9", c)
		}
		acfg.PodCIDRPool = append(acfg.PodCIDRPool, p.Masked())
	}
	acfg.PodCIDRPoolShareBits = o.podCIDRPoolShare
	acfg.ChildTaintEffect = corev1.TaintEffect(o.childTaintEffect)
	if !slices.Contains(api.ChildTaintEffects, acfg.ChildTaintEffect) {
		return fmt.Errorf("--child-taint-effect %q: want one of %v", o.childTaintEffect, api.ChildTaintEffects)
	}
	election := o.leaderElection
	if election.ResourceNamespace == "" {
		election.ResourceNamespace = o.namespace
	}
	// One client for the election, the volumes and the agent.
	client, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
	if err != nil {
		return err
	}
	acfg.Client = client
	// First, before anything of this process decodes (agent.NewVolumes).
	acfg.Volumes = agent.NewVolumes(ctx, client)
	// A replica that does not lead waits, serving only its metrics.
	return kubeclient.RunElected(ctx, client, election, func(ctx context.Context) error {
		a, err := agent.New(acfg)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	})
}
