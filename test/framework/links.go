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
type Link struct {
	Child, Parent string
	// URL is what the child's Target points at instead of the parent.
	URL string

	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	cut   bool
}

var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
)

// newLink starts a proxy from a free loopback port to the parent's API
// server.
func newLink(child, parent *launcher.Cluster) (*Link, error) {
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
	p := toxiproxy.NewProxy(toxiServer, child.Name+"->"+parent.Name, "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("starting the link %s -> %s: %w", child.Name, parent.Name, err)
	}
	// Start sets Listen to the address it bound; Restore binds it again.
	return &Link{Child: child.Name, Parent: parent.Name, URL: "https://" + p.Listen, proxy: p}, nil
}

// Cut refuses new connections and resets those open (the parent is
// unreachable).
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut {
		l.proxy.Stop()
		l.cut = true
	}
}

// Blackhole keeps connections open but passes no byte either way (packets
// lost, no reset).
func (l *Link) Blackhole() error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := l.toxic("blackhole-"+stream, "timeout", stream, `{"timeout":0}`); err != nil {
			return err
		}
	}
	return nil
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
