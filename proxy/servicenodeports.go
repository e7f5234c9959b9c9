package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// A cluster made of clusters has no node of its own to open its Services'
// node ports on: every node is a child's virtual node, whose address is
// this proxy's. With --service-node-ports the proxy serves them there, as
// kube-proxy does on a real node: a connection (TCP) or a flow of
// datagrams (UDP) to a node port of a NodePort or LoadBalancer Service goes
// to one of its ready endpoints, wherever in the tree it runs (through the
// pod network: the gateways route the leaves' pod CIDRs here), one per
// client address for as long as the Service's ClientIP session affinity
// says, else the next in turn.

// serviceNodePorts serves the Services' node ports on the proxy's address.
type serviceNodePorts struct {
	bind     string
	factory  informers.SharedInformerFactory
	services cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	dialer   net.Dialer
	clock    clock.Clock

	mu        sync.Mutex
	targets   map[portKey]portTarget
	listeners map[portKey]io.Closer
	failed    map[portKey]string // why a port could not be opened, logged once
	affinity  map[affinityKey]affinityEntry
	turn      map[string]int
}

// portKey is a node port and its protocol.
type portKey struct {
	proto corev1.Protocol
	port  int32
}

// portTarget is the Service port behind a node port.
type portTarget struct {
	service  string // namespace/name
	port     corev1.ServicePort
	affinity time.Duration // ClientIP session affinity's timeout; 0 for none
}

type affinityKey struct{ service, client string }

type affinityEntry struct {
	backend string
	until   time.Time
}

// udpIdle is how long a UDP flow without a datagram keeps its backend.
const udpIdle = 60 * time.Second

// backendDialTimeout bounds the connection to an endpoint.
const backendDialTimeout = 5 * time.Second

func newServiceNodePorts(client kubernetes.Interface, bind string) *serviceNodePorts {
	f := informers.NewSharedInformerFactory(client, 0)
	s := &serviceNodePorts{bind: bind, factory: f,
		services: f.Core().V1().Services().Informer(), slices: f.Discovery().V1().EndpointSlices().Informer(),
		dialer: net.Dialer{Timeout: backendDialTimeout}, clock: clock.RealClock{},
		targets: map[portKey]portTarget{}, listeners: map[portKey]io.Closer{}, failed: map[portKey]string{},
		affinity: map[affinityKey]affinityEntry{}, turn: map[string]int{}}
	_ = s.slices.AddIndexers(cache.Indexers{serviceIndex: func(obj any) ([]string, error) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]}, nil
	}})
	return s
}

const serviceIndex = "service"

// run serves until ctx ends.
func (s *serviceNodePorts) run(ctx context.Context) {
	resync := func(any) { s.sync(ctx) }
	_, _ = s.services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: resync, UpdateFunc: func(_, obj any) { resync(obj) }, DeleteFunc: resync,
	})
	s.factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), s.services.HasSynced, s.slices.HasSynced)
	s.sync(ctx)
	<-ctx.Done()
	s.factory.Shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.listeners {
		_ = l.Close()
		delete(s.listeners, k)
	}
}

// sync opens a listener for every node port of the Services, and closes
// those no Service has any more.
func (s *serviceNodePorts) sync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	want := map[portKey]portTarget{}
	for _, obj := range s.services.GetStore().List() {
		svc := obj.(*corev1.Service)
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		var affinity time.Duration
		if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			affinity = time.Duration(corev1.DefaultClientIPServiceAffinitySeconds) * time.Second
			if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
			}
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				want[portKey{proto: protocolOf(p), port: p.NodePort}] = portTarget{service: svc.Namespace + "/" + svc.Name, port: p, affinity: affinity}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets = want
	for k, l := range s.listeners {
		if _, ok := want[k]; !ok {
			_ = l.Close()
			delete(s.listeners, k)
		}
	}
	for k := range s.failed {
		if _, ok := want[k]; !ok {
			delete(s.failed, k)
		}
	}
	for k, t := range want {
		if _, ok := s.listeners[k]; ok {
			continue
		}
		l, err := s.listen(ctx, k)
		if err != nil {
			if s.failed[k] != err.Error() {
				s.failed[k] = err.Error()
				logger.Info("Cannot serve a Service's node port", "service", t.service, "protocol", k.proto, "nodePort", k.port, "err", err)
			}
			continue
		}
		delete(s.failed, k)
		s.listeners[k] = l
		logger.V(2).Info("Serving a Service's node port", "service", t.service, "protocol", k.proto, "nodePort", k.port)
	}
}

func protocolOf(p corev1.ServicePort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

// listen opens node port k and serves it in the background.
func (s *serviceNodePorts) listen(ctx context.Context, k portKey) (io.Closer, error) {
	addr := net.JoinHostPort(s.bind, strconv.Itoa(int(k.port)))
	switch k.proto {
	case corev1.ProtocolTCP:
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		go s.serveTCP(ctx, k, l)
		return l, nil
	case corev1.ProtocolUDP:
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, err
		}
		go s.serveUDP(ctx, k, pc)
		return pc, nil
	}
	return nil, fmt.Errorf("protocol %s is not served", k.proto)
}

func (s *serviceNodePorts) serveTCP(ctx context.Context, k portKey, l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			backend, err := s.backend(k, clientIP(c.RemoteAddr()))
			if err != nil {
				klog.FromContext(ctx).V(2).Info("No endpoint for a node port", "protocol", k.proto, "nodePort", k.port, "err", err)
				return
			}
			b, err := s.dialer.DialContext(ctx, "tcp", backend)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Dialing an endpoint for a node port", "nodePort", k.port, "endpoint", backend, "err", err)
				return
			}
			defer func() { _ = b.Close() }()
			splice(c, b)
		}()
	}
}

// splice copies both ways until both directions end, passing half-closes on.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go copyHalf(a, b)
	go copyHalf(b, a)
	wg.Wait()
}

// udpFlow is a client's flow through a UDP node port.
type udpFlow struct {
	conn net.Conn
	last time.Time
}

func (s *serviceNodePorts) serveUDP(ctx context.Context, k portKey, pc net.PacketConn) {
	var mu sync.Mutex
	flows := map[string]*udpFlow{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range flows {
			_ = f.conn.Close()
		}
	}()
	buf := make([]byte, 64*1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		now := s.clock.Now()
		mu.Lock()
		for key, f := range flows {
			if now.Sub(f.last) > udpIdle {
				_ = f.conn.Close()
				delete(flows, key)
			}
		}
		f := flows[from.String()]
		if f == nil {
			backend, err := s.backend(k, clientIP(from))
			if err == nil {
				var conn net.Conn
				if conn, err = s.dialer.DialContext(ctx, "udp", backend); err == nil {
					f = &udpFlow{conn: conn}
					flows[from.String()] = f
					go func() {
						reply := make([]byte, 64*1024)
						for {
							n, err := conn.Read(reply)
							if err != nil {
								return
							}
							_, _ = pc.WriteTo(reply[:n], from)
						}
					}()
				}
			}
			if err != nil {
				mu.Unlock()
				klog.FromContext(ctx).V(2).Info("No endpoint for a node port", "protocol", k.proto, "nodePort", k.port, "err", err)
				continue
			}
		}
		f.last = now
		mu.Unlock()
		_, _ = f.conn.Write(buf[:n])
	}
}

func clientIP(a net.Addr) string {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().String()
	}
	return a.String()
}

var errNoEndpoint = errors.New("the Service has no ready endpoint")

// backend returns the endpoint (ip:port) a new connection or flow from
// client to node port k goes to.
func (s *serviceNodePorts) backend(k portKey, client string) (string, error) {
	s.mu.Lock()
	t, ok := s.targets[k]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("node port %d/%s: no Service has it", k.port, k.proto)
	}
	ready := s.endpoints(t)
	if len(ready) == 0 {
		return "", fmt.Errorf("port %d of Service %s: %w", t.port.Port, t.service, errNoEndpoint)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	ak := affinityKey{service: t.service, client: client}
	if t.affinity > 0 {
		if e, ok := s.affinity[ak]; ok && now.Before(e.until) && slices.Contains(ready, e.backend) {
			s.affinity[ak] = affinityEntry{backend: e.backend, until: now.Add(t.affinity)}
			return e.backend, nil
		}
	}
	i := s.turn[t.service]
	if i == 0 {
		i = rand.IntN(len(ready)) + 1 // the first in turn: anywhere, not always the first listed
	}
	backend := ready[i%len(ready)]
	s.turn[t.service] = i + 1
	if t.affinity > 0 {
		s.affinity[ak] = affinityEntry{backend: backend, until: now.Add(t.affinity)}
	}
	return backend, nil
}

// endpoints are the ready endpoints (ip:port) of t's Service port, sorted.
func (s *serviceNodePorts) endpoints(t portTarget) []string {
	objs, _ := s.slices.GetIndexer().ByIndex(serviceIndex, t.service)
	var out []string
	for _, obj := range objs {
		es := obj.(*discoveryv1.EndpointSlice)
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var port int32
		for _, p := range es.Ports {
			if ptr.Deref(p.Name, "") == t.port.Name && ptr.Deref(p.Protocol, corev1.ProtocolTCP) == protocolOf(t.port) && p.Port != nil {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range es.Endpoints {
			if !ptr.Deref(e.Conditions.Ready, true) || ptr.Deref(e.Conditions.Terminating, false) {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
