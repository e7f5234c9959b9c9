// Command nestlet-proxy runs in a parent cluster: children's agents dial it
// and hold reverse tunnels, and it serves the kubelet port the children's
// virtual nodes advertise, routing each request to the tunnel of the node
// the pod is bound to.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/pkg/command"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/proxy"
)

func main() {
	var o options
	o.addFlags(pflag.CommandLine)
	command.Main("nestlet-proxy", pflag.CommandLine, &o.printPermissions, proxy.Permissions, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	if o.advertiseAddress == "" {
		return fmt.Errorf("--advertise-address is required: the address at which this cluster's API server and the children's agents reach the proxy")
	}
	cfg, err := kubeclient.RESTConfig(o.kubeconfig, "")
	if err != nil {
		return err
	}
	kubeclient.ControllerLimits(cfg)
	client, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
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
	if o.certFile == "" {
		klog.FromContext(ctx).Info("WARNING: serving a self-signed certificate, made anew at each start: an API server that verifies kubelets (--kubelet-certificate-authority) refuses it. Give one issued by the CA that API server trusts (--tls-cert-file, --tls-private-key-file)")
	}
	peers, err := peerConfig(o)
	if err != nil {
		return err
	}
	nodePorts, err := proxy.ParsePortRange(o.nodePorts)
	if err != nil {
		return fmt.Errorf("--node-ports: %w", err)
	}
	p, err := proxy.New(proxy.Config{
		Client: client, ClientCA: clientCA, ServingCert: cert, ServingCA: ca,
		BindAddress: o.bindAddress, KubeletPort: o.kubeletPort, TunnelPort: o.tunnelPort,
		AdvertiseAddress: o.advertiseAddress, TunnelURL: o.tunnelURL, Publish: true, Peers: peers,
		NodePorts: nodePorts, DirectNodes: o.directNodes, ServiceNodePorts: o.serviceNodePorts,
	})
	if err != nil {
		return err
	}
	if o.webhookPort == 0 {
		return p.Run(ctx)
	}
	if o.webhookCertFile == "" || o.webhookKeyFile == "" {
		return fmt.Errorf("--webhook-port needs --webhook-tls-cert-file and --webhook-tls-private-key-file: a certificate for the name the API server calls the webhook by")
	}
	webhookCert, err := tls.LoadX509KeyPair(o.webhookCertFile, o.webhookKeyFile)
	if err != nil {
		return fmt.Errorf("the webhook's certificate: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() {
		errs <- proxy.ServeWebhook(ctx, net.JoinHostPort(o.bindAddress, fmt.Sprint(o.webhookPort)), webhookCert, &proxy.SchedulingWebhook{SchedulerName: o.schedulerName})
	}()
	go func() { errs <- p.Run(ctx) }()
	err = <-errs
	cancel()
	if other := <-errs; err == nil { // the other server, stopped by cancel
		err = other
	}
	return err
}

// peerConfig is the replicas' peering from the flags, or nil without
// --peer-service.
func peerConfig(o options) (*proxy.PeerConfig, error) {
	if o.peerService == "" {
		return nil, nil
	}
	if o.peerID == "" || o.peerTokenFile == "" {
		return nil, fmt.Errorf("--peer-service needs --peer-id (this replica's pod IP) and --peer-token-file (the token the replicas share)")
	}
	if o.certFile == "" {
		return nil, fmt.Errorf("--peer-service needs --tls-cert-file: every replica must serve the same certificate, which the children verify")
	}
	token, err := os.ReadFile(o.peerTokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading --peer-token-file: %w", err)
	}
	ns := o.peerNamespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, fmt.Errorf("--peer-namespace is needed outside a pod: %w", err)
		}
		ns = string(b)
	}
	return &proxy.PeerConfig{ID: o.peerID, Token: strings.TrimSpace(string(token)), Namespace: strings.TrimSpace(ns), Service: o.peerService}, nil
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
