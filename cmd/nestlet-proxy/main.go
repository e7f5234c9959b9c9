// Command nestlet-proxy runs in a parent cluster: children's agents dial it
// and hold reverse tunnels, and it serves the kubelet port the children's
// virtual nodes advertise, routing each request to the tunnel of the node
// the pod is bound to.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/provider/kubeutil"
	"github.com/nestlet/nestlet/proxy"
)

type options struct {
	kubeconfig       string
	bindAddress      string
	kubeletPort      int
	tunnelPort       int
	advertiseAddress string
	tunnelURL        string
	certFile         string
	keyFile          string
	clientCAFile     string
}

func main() {
	var o options
	pflag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of this (parent) cluster (default: in-cluster config, or $KUBECONFIG)")
	pflag.StringVar(&o.bindAddress, "bind-address", "0.0.0.0", "IP address both ports listen on")
	pflag.IntVar(&o.kubeletPort, "kubelet-port", 10250, "port the API server calls for logs/exec/attach/port-forward (advertised by the virtual nodes)")
	pflag.IntVar(&o.tunnelPort, "tunnel-port", 8443, "port children's agents dial with their node certificates")
	pflag.StringVar(&o.advertiseAddress, "advertise-address", "", "address (IP or DNS name) at which this cluster's API server and the children reach the proxy (required)")
	pflag.StringVar(&o.tunnelURL, "tunnel-url", "", "wss:// URL children dial, when it differs from wss://<advertise-address>:<tunnel-port>/connect (e.g. behind a load balancer)")
	pflag.StringVar(&o.certFile, "tls-cert-file", "", "serving certificate (PEM) for both ports; a self-signed one is generated when empty (its CA is published for the children)")
	pflag.StringVar(&o.keyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	pflag.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle that signs node client certificates and the API server's kubelet client certificate (default: the cluster CA of the kubeconfig)")
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	pflag.CommandLine.AddGoFlagSet(klogFlags)
	pflag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "nestlet-proxy:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	if o.advertiseAddress == "" {
		return fmt.Errorf("--advertise-address is required: the address at which this cluster's API server and the children's agents reach the proxy")
	}
	cfg, err := kubeutil.RESTConfig(o.kubeconfig, "")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	clientCA, err := readClientCA(cfg, o.clientCAFile)
	if err != nil {
		return err
	}
	hosts := []string{o.advertiseAddress}
	if ip := net.ParseIP(o.bindAddress); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, o.bindAddress)
	}
	cert, ca, err := proxy.ServingCertificate(o.certFile, o.keyFile, hosts)
	if err != nil {
		return err
	}
	p, err := proxy.New(proxy.Config{
		Client: client, ClientCA: clientCA, ServingCert: cert, ServingCA: ca,
		BindAddress: o.bindAddress, KubeletPort: o.kubeletPort, TunnelPort: o.tunnelPort,
		AdvertiseAddress: o.advertiseAddress, TunnelURL: o.tunnelURL, Publish: true,
	})
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

func readClientCA(cfg *rest.Config, file string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading --client-ca-file: %w", err)
		}
		return b, nil
	}
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, err
	}
	if len(c.CAData) == 0 {
		return nil, fmt.Errorf("the kubeconfig names no cluster CA: pass --client-ca-file")
	}
	return c.CAData, nil
}
