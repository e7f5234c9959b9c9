package framework

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
)

// Link is the connection of a child to its parent, through TCP proxies
// (Shopify's toxiproxy, in this process) that a test can break: Cut refuses
// new connections and resets open ones, Blackhole accepts and never
// answers, Latency and Bandwidth slow it; Restore heals it.
//
// On hosts (launcher.NetworkHosts) the link is the WAN between the child's
// host and its parent's: the child dials its parent's real addresses, and
// its host redirects every connection to the parent's API server and to
// its nestlet-proxy (the tunnel) through the link's proxies, which listen
// on the operator's address (launcher.Host.Redirect). Cut and Blackhole
// also drop every other packet between the two hosts (launcher.Host.Cut).
// Sharing this machine's network, the link proxies the API server only, and
// the child's Target points at URL.
type Link struct {
	Child, Parent string
	// URL is what the child's Target points at: the parent's own URL on
	// hosts, the link proxy's otherwise.
	URL string

	mu      sync.Mutex
	proxies []*toxiproxy.Proxy
	cut     bool
	// childHost and parentHost are the clusters' hosts (nil when they
	// share this machine's network); wanCut is set while they are cut;
	// redirect names the child host's redirection.
	childHost, parentHost *launcher.Host
	wanCut                bool
	redirect              string
}

var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
	linkSeq    atomic.Int64
)

// NewLink starts a link from child to parent: on hosts every connection of
// the child's host to the parent's API server and proxy goes through it at
// once; otherwise point a Target's parentURL at URL. Close it after use.
func NewLink(ctx context.Context, child, parent *launcher.Cluster) (l *Link, err error) {
	toxiOnce.Do(func() {
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	})
	l = &Link{Child: child.Name, Parent: parent.Name, childHost: child.Host, parentHost: parent.Host}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	api, err := hostPort(parent.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("parent %s: %w", parent.Name, err)
	}
	if child.Host == nil || parent.Host == nil {
		p, err := l.start("api", "127.0.0.1:0", api)
		if err != nil {
			return nil, err
		}
		l.URL = "https://" + p.Listen
		return l, nil
	}
	l.URL = parent.URL
	dests := []netip.AddrPort{api}
	if tunnel, err := proxyTunnel(ctx, parent); err != nil {
		return nil, err
	} else if tunnel.IsValid() {
		dests = append(dests, tunnel)
	}
	routes := map[netip.AddrPort]netip.AddrPort{}
	for i, dest := range dests {
		p, err := l.start(fmt.Sprint(i), launcher.OperatorIP()+":0", dest)
		if err != nil {
			return nil, err
		}
		via, err := netip.ParseAddrPort(p.Listen)
		if err != nil {
			return nil, err
		}
		routes[dest] = via
	}
	name := fmt.Sprintf("link%d", linkSeq.Add(1))
	if err := child.Host.Redirect(name, routes); err != nil {
		return nil, err
	}
	l.redirect = name
	return l, nil
}

// start starts one proxy of the link, from listen to dest. Port 0: the
// proxy keeps the port the kernel gives it (a port found free first and
// bound later could be taken in between by a process starting at the same
// time); Start sets Listen to the address it bound, Restore binds it again.
func (l *Link) start(suffix, listen string, dest netip.AddrPort) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(toxiServer, l.Child+"->"+l.Parent+"/"+suffix, listen, dest.String())
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("starting the link %s -> %s: %w", l.Child, l.Parent, err)
	}
	l.proxies = append(l.proxies, p)
	return p, nil
}

// hostPort returns the address and port of an https URL with an IP host.
func hostPort(rawURL string) (netip.AddrPort, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.ParseAddrPort(u.Host)
}

// proxyTunnel returns where parent's nestlet-proxy takes tunnels, as it
// publishes it; invalid when it runs none.
func proxyTunnel(ctx context.Context, parent *launcher.Cluster) (netip.AddrPort, error) {
	cm, err := parent.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
	if err != nil {
		return netip.AddrPort{}, nil //nolint:nilerr // no nestlet-info: no proxy
	}
	raw := cm.Data[api.ClusterInfoProxyTunnelURL]
	if raw == "" {
		return netip.AddrPort{}, nil
	}
	ap, err := hostPort(raw)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("parent %s publishes tunnel URL %q: %w", parent.Name, raw, err)
	}
	return ap, nil
}

// cutWAN cuts the WAN between the hosts, once. The caller holds l.mu.
func (l *Link) cutWAN() error {
	if l.childHost == nil || l.parentHost == nil || l.wanCut {
		return nil
	}
	if err := l.childHost.Cut(l.parentHost); err != nil {
		return err
	}
	l.wanCut = true
	return nil
}

// Cut refuses new connections and resets those open (the parent is
// unreachable).
func (l *Link) Cut() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		for _, p := range l.proxies {
			p.Stop()
		}
		l.cut = true
	}
	return l.cutWAN()
}

// Blackhole keeps connections open but passes no byte either way (packets
// lost, no reset).
func (l *Link) Blackhole() error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := l.toxic("blackhole-"+stream, "timeout", stream, `{"timeout":0}`); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cutWAN()
}

// Latency adds d to every chunk each way, give or take jitter (uniformly
// spread, toxiproxy's latency toxic).
func (l *Link) Latency(d, jitter time.Duration) error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := l.toxic("latency-"+stream, "latency", stream, fmt.Sprintf(`{"latency":%d,"jitter":%d}`, d.Milliseconds(), jitter.Milliseconds())); err != nil {
			return err
		}
	}
	return nil
}

// Bandwidth limits each direction to kbPerSecond.
func (l *Link) Bandwidth(kbPerSecond int) error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := l.toxic("bandwidth-"+stream, "bandwidth", stream, fmt.Sprintf(`{"rate":%d}`, kbPerSecond)); err != nil {
			return err
		}
	}
	return nil
}

// toxic adds a toxic to every proxy of the link.
func (l *Link) toxic(name, typ, stream, attributes string) error {
	for _, p := range l.proxies {
		_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attributes)))
		if err != nil {
			return err
		}
	}
	return nil
}

// Restore removes every fault: the link works again.
func (l *Link) Restore() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.proxies {
		p.Toxics.ResetToxics(context.Background())
	}
	if l.wanCut {
		if err := l.childHost.Heal(l.parentHost); err != nil {
			return err
		}
		l.wanCut = false
	}
	if l.cut {
		for _, p := range l.proxies {
			if err := p.Start(); err != nil {
				return err
			}
		}
		l.cut = false
	}
	return nil
}

// Close stops the proxies for good and, on hosts, the child's host goes to
// its parent directly again.
func (l *Link) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.redirect != "" {
		errs = append(errs, l.childHost.Unredirect(l.redirect))
		l.redirect = ""
	}
	if l.wanCut {
		errs = append(errs, l.childHost.Heal(l.parentHost))
		l.wanCut = false
	}
	for _, p := range l.proxies {
		p.Stop()
	}
	_ = errors.Join(errs...) // the hosts go with the Environment anyway
}
