package framework

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/nestlet/nestlet/launcher"
)

// Link is the connection of a child to its parent's API server, through a
// TCP proxy (Shopify's toxiproxy, in this process) that a test can break:
// Cut refuses new connections and resets open ones, Blackhole accepts and
// never answers, Latency and Bandwidth slow it; Restore heals it.
//
// On hosts (launcher.NetworkHosts) Cut and Blackhole also cut the WAN
// between the two hosts (launcher.Host.Cut): the child's tunnel to the
// parent's nestlet-proxy, and anything else between them, goes down too.
type Link struct {
	Child, Parent string
	// URL is what the child's Target points at instead of the parent.
	URL string

	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	cut   bool
	// childHost and parentHost are the clusters' hosts (nil when they
	// share this machine's network); wanCut is set while they are cut.
	childHost, parentHost *launcher.Host
	wanCut                bool
}

var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
)

// NewLink starts a link from child to parent's API server (a proxy on a
// free port): point a Target's parentURL at its URL. Close it after use.
func NewLink(child, parent *launcher.Cluster) (*Link, error) {
	toxiOnce.Do(func() {
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	})
	u, err := url.Parse(parent.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("parent %s: %w", parent.Name, err)
	}
	// Port 0: the proxy keeps the port the kernel gives it. A port found
	// free first and bound later could be taken in between by a process
	// of another cluster starting at the same time.
	// On hosts (NetworkHosts) the proxy listens on this machine's address
	// on the WAN, where the child's host reaches it.
	listen := "127.0.0.1:0"
	if child.Host != nil {
		listen = launcher.OperatorIP() + ":0"
	}
	p := toxiproxy.NewProxy(toxiServer, child.Name+"->"+parent.Name, listen, u.Host)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("starting the link %s -> %s: %w", child.Name, parent.Name, err)
	}
	// Start sets Listen to the address it bound; Restore binds it again.
	return &Link{Child: child.Name, Parent: parent.Name, URL: "https://" + p.Listen, proxy: p, childHost: child.Host, parentHost: parent.Host}, nil
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
		l.proxy.Stop()
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

// Latency adds d to every chunk each way.
func (l *Link) Latency(d time.Duration) error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := l.toxic("latency-"+stream, "latency", stream, fmt.Sprintf(`{"latency":%d}`, d.Milliseconds())); err != nil {
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

func (l *Link) toxic(name, typ, stream, attributes string) error {
	_, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attributes)))
	return err
}

// Restore removes every fault: the link works again.
func (l *Link) Restore() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proxy.Toxics.ResetToxics(context.Background())
	if l.wanCut {
		if err := l.childHost.Heal(l.parentHost); err != nil {
			return err
		}
		l.wanCut = false
	}
	if l.cut {
		if err := l.proxy.Start(); err != nil {
			return err
		}
		l.cut = false
	}
	return nil
}

// Close stops the proxy for good.
func (l *Link) Close() {
	l.proxy.Stop()
}
