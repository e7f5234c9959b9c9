// Package proxy is nestlet-proxy, the parent's end of its children's
// reverse tunnels. Each child's agent dials the tunnel port with its node
// certificate and holds a rancher/remotedialer tunnel; the virtual nodes
// advertise the proxy's kubelet port; the parent's API server calls that
// port for `kubectl logs / exec / attach / port-forward`, and the proxy
// routes each request through the tunnel of the node the pod is bound to.
// Callers are authenticated and authorised against the parent, as a kubelet
// does, before anything goes through a tunnel.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rancher/remotedialer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeletapi"
	"github.com/nestlet/nestlet/pkg/version"
	"github.com/nestlet/nestlet/proxy/bootstrap"
)

// FieldManager is the proxy's field manager.
const FieldManager = "nestlet-proxy"

// Config of a Proxy. Fields without a stated default are required.
type Config struct {
	// Client is a client of the parent cluster (reads pods, reviews tokens
	// and access, writes kube-public/nestlet-info).
	Client kubernetes.Interface
	// ClientCA verifies client certificates: the children's node
	// certificates on the tunnel port, and the API server's kubelet client
	// certificate on the kubelet port (PEM).
	ClientCA []byte
	// ServingCert is presented on both ports; ServingCA (PEM) verifies it
	// and is published for the children.
	ServingCert tls.Certificate
	ServingCA   []byte
	// BindAddress is the IP both ports listen on (default 0.0.0.0).
	BindAddress string
	// KubeletPort and TunnelPort (defaults 10250 and 8443; 0 in tests
	// picks free ports).
	KubeletPort int
	TunnelPort  int
	// AdvertiseAddress is the host the parent's API server and the
	// children reach the proxy at.
	AdvertiseAddress string
	// TunnelURL overrides the published wss:// URL of the tunnel port
	// (default wss://AdvertiseAddress:TunnelPort/connect).
	TunnelURL string
	// Publish writes the endpoints into kube-public/nestlet-info (default
	// true through the command; tests may turn it off).
	Publish bool
	// Peers, when set, joins this replica to the others of the same proxy
	// (peers.go); all of them must serve the same certificate.
	Peers *PeerConfig
	// NodePorts, when set, gives each child's virtual node a kubelet port
	// of its own from this range, where node-level routes (/stats/summary,
	// /metrics/resource) are served too (nodeports.go).
	NodePorts PortRange
	// DirectNodes are the children's virtual nodes that may advertise a
	// kubelet endpoint of their own: "NAME=HOST:PORT" at that endpoint
	// only (the parent's operator says where the child is), "NAME" at any,
	// "*" every node at any. Every other child's node advertises this
	// proxy (endpoints.go), as a pinned one may too.
	DirectNodes []string
	// ServiceNodePorts serves the node ports of this cluster's NodePort
	// and LoadBalancer Services on BindAddress, at the address its
	// children's virtual nodes advertise (servicenodeports.go).
	ServiceNodePorts bool
}

// Proxy is a running nestlet-proxy.
type Proxy struct {
	cfg     Config
	tunnels *remotedialer.Server
	guard   *tunnelGuard
	auth    *kubeletapi.Auth
	peers   *peers // with Config.Peers
	// nodePorts serves Config.NodePorts (nil without).
	nodePorts *nodePorts
	// serviceNodePorts serves Config.ServiceNodePorts (nil without).
	serviceNodePorts *serviceNodePorts
	// ready: serving (with peers, once they connected: peers.go).
	ready atomic.Bool

	kubeletLn, tunnelLn net.Listener
}

// New validates cfg, builds the authenticator and binds both ports.
func New(cfg Config) (*Proxy, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("proxy: Client is required")
	case len(cfg.ClientCA) == 0:
		return nil, errors.New("proxy: ClientCA is required")
	case cfg.AdvertiseAddress == "":
		return nil, errors.New("proxy: AdvertiseAddress is required (the address the parent's API server and the children use to reach the proxy)")
	}
	if err := ValidateDirectNodes(cfg.DirectNodes); err != nil {
		return nil, err
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "0.0.0.0"
	}
	auth, err := kubeletapi.NewAuth(cfg.Client, cfg.ClientCA)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, auth: auth, guard: newTunnelGuard(cfg.Client, clock.RealClock{})}
	p.tunnels = remotedialer.New(tunnelClientKey, remotedialer.DefaultErrorWriter)
	if pc := cfg.Peers; pc != nil {
		if pc.ID == "" || pc.Token == "" || pc.Namespace == "" || pc.Service == "" {
			return nil, errors.New("proxy: peers need this replica's ID, the shared token, and the namespace and Service that list the replicas")
		}
		p.tunnels.PeerID, p.tunnels.PeerToken = pc.ID, pc.Token
	}
	tlsCfg, err := p.tlsConfig()
	if err != nil {
		return nil, err
	}
	if p.kubeletLn, err = tls.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.KubeletPort)), tlsCfg); err != nil {
		return nil, fmt.Errorf("listening on the kubelet port: %w", err)
	}
	if p.tunnelLn, err = tls.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.TunnelPort)), tlsCfg); err != nil {
		_ = p.kubeletLn.Close()
		return nil, fmt.Errorf("listening on the tunnel port: %w", err)
	}
	if cfg.Peers != nil {
		p.peers = p.newPeers()
	}
	if cfg.ServiceNodePorts {
		p.serviceNodePorts = newServiceNodePorts(cfg.Client, cfg.BindAddress)
	}
	if cfg.NodePorts.Size() > 0 {
		p.nodePorts = &nodePorts{ports: cfg.NodePorts, client: cfg.Client, bind: cfg.BindAddress, advertise: cfg.AdvertiseAddress,
			tlsCfg: tlsCfg, handler: p.nodeHandler,
			nodeOf: map[int]string{}, listening: map[int]*http.Server{}, bindErr: map[int]error{}}
	}
	return p, nil
}

// KubeletEndpoint is the host:port virtual nodes advertise.
func (p *Proxy) KubeletEndpoint() string {
	return net.JoinHostPort(p.cfg.AdvertiseAddress, strconv.Itoa(p.kubeletLn.Addr().(*net.TCPAddr).Port))
}

// TunnelURL is where children dial in.
func (p *Proxy) TunnelURL() string {
	if p.cfg.TunnelURL != "" {
		return p.cfg.TunnelURL
	}
	return "wss://" + net.JoinHostPort(p.cfg.AdvertiseAddress, strconv.Itoa(p.tunnelLn.Addr().(*net.TCPAddr).Port)) + "/connect"
}

// Run publishes the endpoints and serves both ports until ctx ends.
func (p *Proxy) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if p.cfg.Publish {
		err := bootstrap.SetClusterInfo(ctx, p.cfg.Client, FieldManager, map[string]string{
			api.ClusterInfoProxyTunnelURL:       p.TunnelURL(),
			api.ClusterInfoProxyCA:              string(p.cfg.ServingCA),
			api.ClusterInfoProxyKubeletEndpoint: p.KubeletEndpoint(),
		})
		if err != nil {
			return fmt.Errorf("publishing the proxy's endpoints: %w", err)
		}
		if err := p.recordEndpoints(ctx); err != nil {
			return err
		}
	}
	tunnelMux := http.NewServeMux()
	tunnelMux.Handle("/connect", http.HandlerFunc(p.serveTunnel))
	tunnelMux.Handle("/readyz", http.HandlerFunc(p.serveReadyz))
	tunnelMux.Handle("/kubelet-endpoint", http.HandlerFunc(p.serveKubeletEndpoint))
	go p.guard.run(ctx)
	if p.nodePorts != nil {
		go p.nodePorts.run(ctx)
	}
	if p.serviceNodePorts != nil {
		go p.serviceNodePorts.run(ctx)
	}
	if p.peers != nil {
		go p.peers.run(ctx)
	} else {
		p.ready.Store(true)
	}
	servers := []*http.Server{
		{Handler: http.HandlerFunc(p.serveKubelet), ReadHeaderTimeout: 30 * time.Second},
		{Handler: tunnelMux, ReadHeaderTimeout: 30 * time.Second},
	}
	errs := make(chan error, 2)
	for i, l := range []net.Listener{p.kubeletLn, p.tunnelLn} {
		go func() { errs <- servers[i].Serve(l) }()
	}
	logger.Info("Serving", "version", version.String(), "kubeletEndpoint", p.KubeletEndpoint(), "tunnelURL", p.TunnelURL())
	select {
	case <-ctx.Done():
	case err := <-errs:
		logger.Error(err, "Server stopped")
	}
	for _, s := range servers {
		_ = s.Close()
	}
	return ctx.Err()
}

// serveReadyz answers the readiness probe (no credentials needed): 200
// once the proxy serves every tunnel it can reach.
func (p *Proxy) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if !p.ready.Load() {
		http.Error(w, "waiting for the other replicas to connect", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// tlsConfig serves ServingCert and asks for (without requiring) client
// certificates: the kubelet port also takes bearer tokens, and each port
// checks what it needs.
func (p *Proxy) tlsConfig() (*tls.Config, error) {
	pool, err := certPool(p.cfg.ClientCA)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{p.cfg.ServingCert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}, nil
}
