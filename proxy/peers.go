package proxy

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rancher/remotedialer"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// PeerConfig makes the replicas of one proxy serve as one, with
// rancher/remotedialer's peers: each replica holds a connection to every
// other, over which it learns the tunnels the other holds and dials
// through them. A child's tunnel lands on whichever replica its load
// balancer chose; the API server's request for a pod lands on any replica,
// which routes it through the replica that holds the tunnel of the pod's
// node.
type PeerConfig struct {
	// ID is this replica's address as the others dial it (its pod IP).
	ID string
	// Token is shared by the replicas (a Secret the chart makes): a peer
	// connection that does not present it is refused.
	Token string
	// Namespace and Service name the headless Service whose EndpointSlices
	// list the replicas (their ready pod IPs); the peers are dialled at
	// wss://<IP>:<the tunnel port>/connect.
	Namespace, Service string
}

// peerWarmUp bounds how long a new replica waits, before it says it is
// ready, for the replicas listed at its start to connect to it.
var peerWarmUp = 20 * time.Second

// peers keeps remotedialer's peers in step with the replicas listed, and
// counts the peer connections that came in.
type peers struct {
	cfg  PeerConfig
	port int
	p    *Proxy

	mu      sync.Mutex
	current map[string]bool // peer IDs added
	in      map[string]int  // live connections from each peer
}

func (p *Proxy) newPeers() *peers {
	return &peers{cfg: *p.cfg.Peers, port: p.tunnelLn.Addr().(*net.TCPAddr).Port, p: p,
		current: map[string]bool{}, in: map[string]int{}}
}

// fromPeer tells whether req is a listed peer's connection, with the
// shared token (remotedialer checks it again). Nil-safe: no peers, none.
func (ps *peers) fromPeer(req *http.Request) (string, bool) {
	if ps == nil {
		return "", false
	}
	id, token := req.Header.Get(remotedialer.ID), req.Header.Get(remotedialer.Token)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return id, ps.current[id] && subtle.ConstantTimeCompare([]byte(token), []byte(ps.cfg.Token)) == 1
}

// connected counts a peer's connection while it lasts: call the function
// returned when it ends.
func (ps *peers) connected(id string) func() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.in[id]++
	return func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		if ps.in[id]--; ps.in[id] <= 0 {
			delete(ps.in, id)
		}
	}
}

// allIn reports whether every peer listed has connected to this replica,
// so that it knows the tunnels they hold.
func (ps *peers) allIn() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id := range ps.current {
		if ps.in[id] == 0 {
			return false
		}
	}
	return true
}

// warmUp marks the proxy ready once the replicas listed at start have
// connected to it, or after peerWarmUp: a new replica takes requests only
// once it can route them to the others' tunnels. Once ready it stays so (a
// peer gone dead must not take every replica out).
func (ps *peers) warmUp(ctx context.Context, synced func() bool) {
	deadline := time.Now().Add(peerWarmUp)
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return time.Now().After(deadline) || (synced() && ps.allIn()), nil
	})
	if ctx.Err() == nil {
		klog.FromContext(ctx).Info("Ready", "peersConnected", ps.allIn())
		ps.p.ready.Store(true)
	}
}

// run follows the Service's EndpointSlices until ctx ends.
func (ps *peers) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(ps.p.cfg.Client, 0, informers.WithNamespace(ps.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{discoveryv1.LabelServiceName: ps.cfg.Service}.String()
		}))
	inf := factory.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	refresh := func() {
		slices, err := lister.List(labels.Everything())
		if err != nil {
			return
		}
		ps.set(peerIDs(slices, ps.cfg.ID))
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { refresh() },
		UpdateFunc: func(any, any) { refresh() },
		DeleteFunc: func(any) { refresh() },
	})
	factory.Start(ctx.Done())
	go ps.warmUp(ctx, inf.Informer().HasSynced)
	<-ctx.Done()
	factory.Shutdown()
	ps.set(nil)
}

// peerIDs returns the ready addresses the slices list, but self.
func peerIDs(slices []*discoveryv1.EndpointSlice, self string) map[string]bool {
	out := map[string]bool{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if a != self {
					out[a] = true
				}
			}
		}
	}
	return out
}

// set makes the peers exactly ids: dials the new ones, drops the gone.
func (ps *peers) set(ids map[string]bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id := range ids {
		if !ps.current[id] {
			url := "wss://" + net.JoinHostPort(id, strconv.Itoa(ps.port)) + "/connect"
			ps.p.tunnels.AddPeer(url, id, ps.cfg.Token)
			ps.current[id] = true
			klog.Background().Info("Peer replica added", "peer", id, "url", url)
		}
	}
	for id := range ps.current {
		if !ids[id] {
			ps.p.tunnels.RemovePeer(id)
			delete(ps.current, id)
			klog.Background().Info("Peer replica removed", "peer", id)
		}
	}
}

// heldElsewhere reports why a tunnel of name must wait: another replica
// holds one (a child has one live tunnel, whichever replica it reached).
func (p *Proxy) heldElsewhere(name string) error {
	if _, anywhere := p.tunnelKey(name); p.cfg.Peers == nil || p.guard.holds(name) || !anywhere {
		return nil
	}
	return fmt.Errorf("%w: node %q already has a live tunnel on another replica of this proxy; a second one is refused until that one closes", errTunnelConflict, name)
}
