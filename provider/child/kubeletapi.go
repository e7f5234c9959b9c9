package child

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeletapi"
	"github.com/nestlet/nestlet/pkg/tunnel"
	"github.com/nestlet/nestlet/provider/join"
)

// Kubelet API modes (Config.KubeletAPI).
const (
	// KubeletAPIAuto uses the parent's nestlet-proxy when it publishes
	// one, else direct mode when a direct address is set, else none.
	KubeletAPIAuto = "auto"
	// KubeletAPITunnel requires the parent's nestlet-proxy: the agent
	// dials out and listens on nothing.
	KubeletAPITunnel = "tunnel"
	// KubeletAPIDirect listens on Config.DirectAddress; the virtual node
	// advertises it.
	KubeletAPIDirect = "direct"
	// KubeletAPIOff serves no kubelet API (logs and exec are refused by
	// the parent's API server).
	KubeletAPIOff = "off"
)

// kubeletAPI serves one virtual node's kubelet API, through a tunnel or
// directly. It is chosen, and its listener bound, before the node registers
// (the node advertises its endpoint); serve starts it once the forwarder
// whose delegates it reaches exists.
type kubeletAPI struct {
	mode string
	// follow is set when the configured mode follows the parent's
	// nestlet-proxy (auto, tunnel): watchProxy watches it.
	follow bool
	// proxy is what the parent published when the mode was chosen (the
	// nestlet-proxy keys of kube-public/nestlet-info).
	proxy map[string]string
	// endpoint is the host:port advertised by the virtual node: in tunnel
	// mode the node's own port on the proxy once it gave one, else the
	// proxy's shared port (set again as the proxy answers: mu).
	mu       sync.Mutex
	endpoint string
	// advertised is called when endpoint changes after the node registered
	// (its status is reported again); set by registered.
	advertised func()
	// answered is closed at the proxy's first final answer about the
	// node's own port (tunnel mode): the node registers with it when it
	// comes in time (nodePortWait).
	answered     chan struct{}
	answeredOnce sync.Once
	// tunnel is the proxy's tunnel (tunnel mode, Handler unset).
	tunnel tunnel.ClientConfig
	// tunnelDown is signalled when the tunnel drops: the proxy may have
	// moved, so watchProxy looks at once rather than at its next tick.
	tunnelDown chan struct{}
	// listener and auth serve direct mode.
	listener net.Listener
	auth     *kubeletapi.Auth
	// serving is direct mode's certificate, requested from the parent with
	// nodeClient once served.
	serving    *servingCert
	nodeClient kubernetes.Interface
}

// describe says how the kubelet API is served, for the Ready condition.
func (k *kubeletAPI) describe() string {
	switch k.mode {
	case KubeletAPITunnel:
		return fmt.Sprintf("kubelet API (logs, exec, attach, port-forward) through the parent's nestlet-proxy at %s over a reverse tunnel", k.advertisedEndpoint())
	case KubeletAPIDirect:
		return fmt.Sprintf("kubelet API (logs, exec, attach, port-forward, stats) served directly at %s", k.advertisedEndpoint())
	}
	return "no kubelet API: the parent publishes no nestlet-proxy and this agent has no --kubelet-direct-address, so kubectl logs/exec at the parent cannot reach these pods"
}

// hostPort splits the advertised endpoint (empty host when off).
func (k *kubeletAPI) hostPort() (string, int32) {
	if k == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(k.advertisedEndpoint())
	if err != nil {
		return "", 0
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

func (k *kubeletAPI) advertisedEndpoint() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.endpoint
}

// close releases what chooseKubeletAPI bound, when serve will not run.
func (k *kubeletAPI) close() {
	if k.listener != nil {
		_ = k.listener.Close()
	}
}

// chooseKubeletAPI picks the mode for this parent, from the configured
// mode and directAddress (Config.KubeletAPI, Config.DirectAddress), and
// binds what it needs: the listener in direct mode, so that its port is
// known before the node registers. discovered is the parent as a join
// just discovered it (its nestlet-info then is not read again), or nil.
func chooseKubeletAPI(ctx context.Context, nodeClient kubernetes.Interface, id *join.Identity, cert *join.ClientCert, mode, directAddress string, discovered *join.Parent) (*kubeletAPI, error) {
	follow := mode == KubeletAPIAuto || mode == KubeletAPITunnel
	var info, proxy map[string]string
	if follow {
		var err error
		if discovered != nil {
			info = discovered.Info
		} else if cm, gerr := nodeClient.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{}); gerr == nil {
			info = cm.Data
		} else {
			err = gerr
		}
		proxy = proxyKeys(info)
		switch {
		case info[api.ClusterInfoProxyTunnelURL] != "":
			mode = KubeletAPITunnel
		case mode == KubeletAPITunnel:
			return nil, join.Errorf(v1alpha1.ReasonKubeletAPIUnavailable, err,
				"--kubelet-api=tunnel, but the parent publishes no nestlet-proxy in kube-public/%s: install the proxy in the parent (helm chart value proxy.enabled) or use --kubelet-api=direct", api.ClusterInfoConfigMap)
		case directAddress != "":
			mode = KubeletAPIDirect
		default:
			mode = KubeletAPIOff
		}
	}
	k := &kubeletAPI{mode: mode, follow: follow, proxy: proxy, tunnelDown: make(chan struct{}, 1), answered: make(chan struct{})}
	switch mode {
	case KubeletAPIOff:
	case KubeletAPITunnel:
		k.endpoint = info[api.ClusterInfoProxyKubeletEndpoint]
		k.tunnel = tunnel.ClientConfig{
			URL: info[api.ClusterInfoProxyTunnelURL], CA: []byte(info[api.ClusterInfoProxyCA]),
			GetClientCertificate: cert.GetClientCertificate,
		}
		// The node's own port is asked for as soon as runNode starts
		// (askEarly), and again each time the tunnel comes up (serve);
		// runNode waits for the first answer, up to nodePortWait, before
		// the node registers: registered with its own port, the node is
		// not updated again for it (a read, two patches and its Target's
		// status at every join). Past that wait, or when the proxy gives
		// none, the node registers with the proxy's shared port (which
		// the parent's policy nestlet-children-kubelet allows too), and
		// its next status carries its own once the proxy answers.
	case KubeletAPIDirect:
		auth, err := kubeletapi.NewAuth(nodeClient, id.CAData)
		if err != nil {
			return nil, err
		}
		l, serving, err := listenDirect(directAddress)
		if err != nil {
			return nil, join.Errorf(v1alpha1.ReasonKubeletAPIUnavailable, err, "cannot serve the kubelet API on --kubelet-direct-address %s", directAddress)
		}
		k.auth, k.listener, k.serving, k.nodeClient, k.endpoint = auth, l, serving, nodeClient, l.Addr().String()
	default:
		return nil, join.Errorf(v1alpha1.ReasonKubeletAPIUnavailable, nil, "unknown kubelet API mode %q: use auto, tunnel, direct or off", mode)
	}
	return k, nil
}

// serve builds the kubelet API server of cfg (its virtual node, and the
// forwarder's delegates through which it reaches the pods) and serves it
// in the background until ctx ends.
func (k *kubeletAPI) serve(ctx context.Context, cfg kubeletapi.Config) error {
	if k.mode == KubeletAPIOff {
		return nil
	}
	nodeName := cfg.NodeName
	srv, err := kubeletapi.New(cfg)
	if err != nil {
		k.close()
		return err
	}
	logger := klog.FromContext(ctx)
	switch k.mode {
	case KubeletAPITunnel:
		tc := k.tunnel
		tc.Handler = srv.Handler()
		// Each time the tunnel comes up (a proxy restarted, moved or
		// reconfigured), the node's port is asked for again.
		asking := make(chan struct{}, 1)
		tc.Connected = func(up bool) {
			if !up {
				select {
				case k.tunnelDown <- struct{}{}:
				default: // a look is due already
				}
				return
			}
			select {
			case asking <- struct{}{}:
				go func() {
					defer func() { <-asking }()
					// Every 5 s at first, backing off to every 2 minutes.
					backoff := wait.Backoff{Duration: 5 * time.Second, Factor: 2, Cap: 2 * time.Minute, Steps: math.MaxInt32}
					_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
						return k.askNodePort(ctx), nil
					})
				}()
			default: // already asking
			}
		}
		go func() {
			if err := tunnel.Run(ctx, tc); err != nil {
				logger.Error(err, "Tunnel to the parent's proxy")
			}
		}()
		// And every nodePortRecheck while it runs: the question goes
		// through the proxy's Service, so in a rollout between releases
		// of the proxy with and without node ports it can be answered by
		// another replica than the one holding the tunnel, whose answer
		// would otherwise stand until the tunnel next comes up.
		go func() {
			tick := time.NewTicker(nodePortRecheck)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					k.askNodePort(ctx)
				}
			}
		}()
	case KubeletAPIDirect:
		host, _ := k.hostPort()
		if err := k.serving.request(ctx, k.nodeClient, nodeName, host); err != nil {
			k.close()
			return err
		}
		hs := &http.Server{Handler: k.auth.Wrap(nodeName, srv.Handler()), ReadHeaderTimeout: 30 * time.Second}
		go func() {
			<-ctx.Done()
			_ = hs.Close()
		}()
		go func() {
			if err := hs.Serve(k.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Serving the kubelet API")
			}
		}()
	}
	return nil
}

// listenDirect listens on address (an IP, port chosen by the system, or
// IP:port), presenting serving (self-signed until the parent issues its
// own) and asking callers for a client certificate (the parent's API
// server presents its kubelet client certificate).
func listenDirect(address string) (net.Listener, *servingCert, error) {
	host, port := address, "0"
	if h, p, err := net.SplitHostPort(address); err == nil {
		host, port = h, p
	}
	serving, err := newServingCert(host)
	if err != nil {
		return nil, nil, err
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(host, port), &tls.Config{
		GetCertificate: serving.getCertificate,
		ClientAuth:     tls.RequestClientCert,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listening for the kubelet API on %s: %w", address, err)
	}
	return l, serving, nil
}

// proxyKeys returns the nestlet-proxy keys of nestlet-info.
func proxyKeys(info map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{api.ClusterInfoProxyTunnelURL, api.ClusterInfoProxyCA, api.ClusterInfoProxyKubeletEndpoint} {
		if v := info[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

// proxyCheckPeriod is how often the agent reads what the parent publishes
// about its nestlet-proxy when it cannot watch it (a parent whose reader
// role grants get only), and how long it waits to watch again after a
// failed attempt.
const proxyCheckPeriod = 30 * time.Second

// watchProxy returns a channel closed when the parent's nestlet-proxy, as
// published in kube-public/nestlet-info, is no longer what the kubelet API
// was set up with: a proxy installed after the join, removed, or restarted
// with another certificate or address. Only in the modes that follow the
// proxy (auto, tunnel); a read that fails changes nothing.
//
// It watches nestlet-info (one open request per child, where reading it
// every proxyCheckPeriod cost a parent of a thousand children 33 reads a
// second); where the parent's reader role does not allow the watch (made by
// an older nestctl token create: running it again updates the role), it
// reads it every proxyCheckPeriod instead, and at once when the tunnel
// drops (while the watch runs, it tells a move without a read).
func (k *kubeletAPI) watchProxy(ctx context.Context, clk clock.WithTicker, nodeClient kubernetes.Interface) <-chan struct{} {
	changed := make(chan struct{})
	if !k.follow {
		return changed
	}
	cms := nodeClient.CoreV1().ConfigMaps(metav1.NamespacePublic)
	go func() {
		rv := ""
		canWatch := true
		for ctx.Err() == nil {
			if canWatch {
				w, err := cms.Watch(ctx, metav1.ListOptions{
					FieldSelector:       fields.OneTermEqualSelector("metadata.name", api.ClusterInfoConfigMap).String(),
					ResourceVersion:     rv,
					AllowWatchBookmarks: true,
				})
				if err == nil {
					start := clk.Now()
					var done bool
					if rv, done = k.followProxy(ctx, cms, w, rv); done {
						close(changed)
						return
					}
					if clk.Since(start) >= time.Second {
						continue
					}
					// A watch that ends at once (an API server
					// shutting down) is not opened again at once.
					select {
					case <-ctx.Done():
						return
					case <-clk.After(time.Second):
					}
					continue
				}
				if apierrors.IsForbidden(err) {
					klog.FromContext(ctx).V(2).Info("Cannot watch the parent's kube-public/nestlet-info; reading it every 30s instead (nestctl token create in the parent updates its role)", "err", err)
					canWatch = false
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-clk.After(proxyCheckPeriod):
			case <-k.tunnelDown:
			}
			if k.lookAtProxy(ctx, cms) {
				close(changed)
				return
			}
		}
	}()
	return changed
}

// proxyMoved says whether nestlet-info (nil: gone) no longer publishes the
// proxy the kubelet API was set up with.
func (k *kubeletAPI) proxyMoved(cm *corev1.ConfigMap) bool {
	var now map[string]string
	if cm != nil {
		now = proxyKeys(cm.Data)
	}
	return !maps.Equal(now, k.proxy) // a nil and an empty map are equal
}

// lookAtProxy reads nestlet-info: whether the proxy moved (a read that
// fails says no).
func (k *kubeletAPI) lookAtProxy(ctx context.Context, cms typedcorev1.ConfigMapInterface) bool {
	cm, err := cms.Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return k.proxyMoved(nil)
	}
	return err == nil && k.proxyMoved(cm)
}

// followProxy follows w, a watch of nestlet-info from rv, until it ends or
// the proxy moved (true); it returns the version to watch from next.
func (k *kubeletAPI) followProxy(ctx context.Context, cms typedcorev1.ConfigMapInterface, w watch.Interface, rv string) (string, bool) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, false
		case <-k.tunnelDown:
			// Nothing to read: a proxy that moved or restarted with
			// another certificate or address changes nestlet-info, which
			// this watch delivers. (A tunnel's first connections failing
			// while the proxy comes up cost a read each, a third of a
			// read per join measured over 60 joins.)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, false
			}
			if ev.Type == watch.Error {
				// Most often the version is too old (410 Gone): start
				// again from what nestlet-info holds now.
				return "", false
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM {
				continue
			}
			rv = cm.ResourceVersion
			if ev.Type == watch.Deleted {
				cm = nil
			}
			if ev.Type != watch.Bookmark && k.proxyMoved(cm) {
				return rv, true
			}
		}
	}
}
