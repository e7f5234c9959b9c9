package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// PortRange is an inclusive range of TCP ports.
type PortRange struct{ First, Last int }

// ParsePortRange reads "FIRST-LAST" (empty: no range).
func ParsePortRange(s string) (PortRange, error) {
	if s == "" {
		return PortRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first < 1 || last > 65535 || first > last {
		return PortRange{}, fmt.Errorf("port range %q: want FIRST-LAST, e.g. 10300-10399", s)
	}
	return PortRange{First: first, Last: last}, nil
}

// Size is how many ports the range holds (0 for the zero range).
func (r PortRange) Size() int {
	if r.First == 0 {
		return 0
	}
	return r.Last - r.First + 1
}

func (r PortRange) contains(port int) bool { return port >= r.First && port <= r.Last }

// nodePorts gives each child's virtual node a kubelet port of its own on
// the proxy. The shared kubelet port serves the routes that name a pod,
// which say which tunnel to take; a node-level route (/stats/summary,
// /metrics/resource: what metrics-server and `kubectl top` read) names no
// node, and the API server and metrics-server call every node behind one
// proxy at the same address. On a port of its own a request is the node's
// whatever its path.
//
// The ports are recorded, node name to port, in kube-public/
// nestlet-proxy-ports, so that every replica of the proxy listens on the
// same ones and a restart keeps them. A child's agent asks for its port
// (GET /kubelet-endpoint on the tunnel port, with its node certificate)
// before its node registers, and advertises it.
type nodePorts struct {
	ports     PortRange
	client    kubernetes.Interface
	bind      string
	advertise string
	tlsCfg    *tls.Config
	handler   func(node string) http.Handler

	mu        sync.Mutex
	nodeOf    map[int]string // port -> node, as recorded
	listening map[int]*http.Server
	bindErr   map[int]error
	pending   *portBatch // the nodes waiting for the next write of the record
	// known is when this replica first saw each node of the record (its
	// own write, or another replica's through the informer or a read):
	// a node asks for its port before it registers, so a port is taken
	// back from a node that does not exist only once the record has held
	// it for releaseGrace.
	known map[string]time.Time
	clock clock.PassiveClock
	// last is the record as last seen (this replica's last write, or the
	// informer's latest event): a write starts from it, and reads the
	// record only when it was stale (a conflict).
	last *corev1.ConfigMap
	// listed is when release last listed the nodes (np.mu).
	listed time.Time

	// writing is held by the one write of the record this replica makes
	// at a time: the nodes that ask meanwhile wait in pending, and the
	// next write records them all (a burst of joins is a few writes, not
	// one conflicting write each).
	writing sync.Mutex
}

// portBatch is the nodes one write of the record gives ports to.
type portBatch struct {
	nodes map[string]bool
	done  chan struct{} // closed once written (or failed)
	ports map[string]int
	err   error
}

// nodePortsConfigMap records the ports given, in kube-public.
const nodePortsConfigMap = "nestlet-proxy-ports"

// endpointOf returns the host:port node's kubelet API is served at,
// giving it a free port of the range if it has none yet.
func (np *nodePorts) endpointOf(ctx context.Context, node string) (string, error) {
	if isEndpointKey(node) {
		return "", fmt.Errorf("node name %q is not a node's", node)
	}
	port, err := np.allocate(ctx, node)
	if err != nil {
		return "", err
	}
	np.listen(ctx, port, node)
	np.mu.Lock()
	err = np.bindErr[port]
	np.mu.Unlock()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(np.advertise, strconv.Itoa(port)), nil
}

// errNoFreePort: every port of the range is some live node's.
var errNoFreePort = errors.New("no free node port")

// allocate returns node's recorded port, or records a free one. Ports of
// nodes that no longer exist are taken back when the range is full.
//
// A node this replica serves already (the record as last seen: its own
// writes and the informer's copy) is answered without a request; the
// others join the next write of the record, which gives each a port.
func (np *nodePorts) allocate(ctx context.Context, node string) (int, error) {
	if p, ok := np.served(node); ok {
		return p, nil
	}
	np.mu.Lock()
	b := np.pending
	if b == nil {
		b = &portBatch{nodes: map[string]bool{}, done: make(chan struct{})}
		np.pending = b
		go np.write(b)
	}
	b.nodes[node] = true
	np.mu.Unlock()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-b.done:
	}
	if b.err != nil {
		return 0, b.err
	}
	p, ok := b.ports[node]
	if !ok {
		return 0, fmt.Errorf("%w: all %d ports of %d-%d are given to nodes that exist; widen --node-ports", errNoFreePort, np.ports.Size(), np.ports.First, np.ports.Last)
	}
	return p, nil
}

// served returns the port this replica serves node on, if any.
func (np *nodePorts) served(node string) (int, bool) {
	np.mu.Lock()
	defer np.mu.Unlock()
	for p, n := range np.nodeOf {
		if n == node && np.ports.contains(p) {
			return p, true
		}
	}
	return 0, false
}

// portWriteTimeout bounds one write of the record (its retries included).
const portWriteTimeout = 30 * time.Second

// write records ports for the nodes of b, once the write before it is
// done; nodes that ask until then join b.
func (np *nodePorts) write(b *portBatch) {
	np.writing.Lock()
	defer np.writing.Unlock()
	np.mu.Lock()
	if np.pending == b {
		np.pending = nil // who asks from now on waits for the next write
	}
	nodes := make([]string, 0, len(b.nodes))
	for n := range b.nodes {
		nodes = append(nodes, n)
	}
	np.mu.Unlock()
	slices.Sort(nodes) // the lowest free ports in the order of the names
	ctx, cancel := context.WithTimeout(context.Background(), portWriteTimeout)
	defer cancel()
	b.ports, b.err = np.record(ctx, nodes)
	close(b.done)
}

// record gives each of nodes its recorded port, or a free one, in one
// write of the record (retried on a conflict with another replica's).
// A node left out of the answer found no free port.
func (np *nodePorts) record(ctx context.Context, nodes []string) (map[string]int, error) {
	cms := np.client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	var ports map[string]int
	np.mu.Lock()
	cur := np.last
	np.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ports = map[string]int{}
		var err error
		if cur == nil {
			cur, err = cms.Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
		}
		missing := apierrors.IsNotFound(err)
		if missing {
			cur = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: nodePortsConfigMap, Namespace: metav1.NamespacePublic}}
		} else if err != nil {
			return err
		}
		next := cur.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		changed, released, tried := false, false, false
		for _, node := range nodes {
			if p, err := strconv.Atoi(next.Data[node]); err == nil && np.ports.contains(p) {
				ports[node] = p
				continue
			}
			port := freePort(np.ports, next.Data)
			if port == 0 && !tried {
				tried = true
				released = np.release(ctx, next.Data)
				port = freePort(np.ports, next.Data)
			}
			if port == 0 {
				continue // errNoFreePort, for this node
			}
			next.Data[node] = strconv.Itoa(port)
			ports[node] = port
			changed = true
			np.mu.Lock()
			np.knownMap()[node] = np.now() // given now, whatever it held before
			np.mu.Unlock()
		}
		var written *corev1.ConfigMap
		switch {
		case !changed && !released:
			return nil
		case missing:
			written, err = cms.Create(ctx, next, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				err = apierrors.NewConflict(corev1.Resource("configmaps"), nodePortsConfigMap, err)
			}
		default:
			written, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		}
		cur = nil // a conflict: read the record again
		if err == nil {
			np.seen(written)
		} else {
			np.seen(nil) // stale, or gone: the next write reads it
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recording the kubelet port of nodes %s in kube-public/%s: %w", strings.Join(nodes, ", "), nodePortsConfigMap, err)
	}
	return ports, nil
}

// seen keeps cm as the record last seen.
func (np *nodePorts) seen(cm *corev1.ConfigMap) {
	np.mu.Lock()
	np.last = cm
	np.mu.Unlock()
}

// freePort returns the lowest port of r that data does not give, or 0.
func freePort(r PortRange, data map[string]string) int {
	used := map[int]bool{}
	for k, v := range data {
		if isEndpointKey(k) {
			continue
		}
		if p, err := strconv.Atoi(v); err == nil {
			used[p] = true
		}
	}
	for p := r.First; p <= r.Last; p++ {
		if !used[p] {
			return p
		}
	}
	return 0
}

// releaseGrace is how long a node recorded with a port may not exist
// before its port can be given to another: it asks before it registers.
const releaseGrace = 2 * time.Minute

// releaseEvery bounds how often release lists the nodes.
const releaseEvery = 10 * time.Second

// now is the replica's clock (real unless a test sets one).
func (np *nodePorts) now() time.Time {
	if np.clock == nil {
		return time.Now()
	}
	return np.clock.Now()
}

// knownSince returns when this replica first saw node in the record,
// noting now as that time if it had not: np.mu held.
func (np *nodePorts) knownSince(node string) time.Time {
	t, ok := np.knownMap()[node]
	if !ok {
		t = np.now()
		np.known[node] = t
	}
	return t
}

// knownMap is np.known, made on first use: np.mu held.
func (np *nodePorts) knownMap() map[string]time.Time {
	if np.known == nil {
		np.known = map[string]time.Time{}
	}
	return np.known
}

// release drops from data the nodes that do not exist and have been in
// the record for releaseGrace: one list of the nodes, from the API
// server's cache (a read per recorded node made each full range cost as
// many requests as the range has ports). Nothing is dropped when the list
// fails. It reports whether it dropped any.
func (np *nodePorts) release(ctx context.Context, data map[string]string) bool {
	np.mu.Lock()
	recent := !np.listed.IsZero() && np.now().Sub(np.listed) < releaseEvery
	if !recent {
		np.listed = np.now()
	}
	np.mu.Unlock()
	if recent {
		return false // a burst of joins on a full range lists once
	}
	nodes, err := np.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list the nodes to take back the kubelet ports of those gone")
		return false
	}
	exist := make(map[string]bool, len(nodes.Items))
	for i := range nodes.Items {
		exist[nodes.Items[i].Name] = true
	}
	np.mu.Lock()
	defer np.mu.Unlock()
	dropped := false
	for node := range data {
		if isEndpointKey(node) || exist[node] {
			continue
		}
		if np.now().Sub(np.knownSince(node)) >= releaseGrace {
			delete(data, node)
			delete(np.known, node)
			dropped = true
		}
	}
	return dropped
}

// listen serves port for node (a port recorded for another node before
// serves node from now on).
func (np *nodePorts) listen(ctx context.Context, port int, node string) {
	np.mu.Lock()
	defer np.mu.Unlock()
	np.nodeOf[port] = node
	if np.listening[port] != nil {
		return
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(np.bind, strconv.Itoa(port)), np.tlsCfg)
	if err != nil {
		np.bindErr[port] = fmt.Errorf("listening on node port %d for node %s: %w", port, node, err)
		klog.FromContext(ctx).Error(err, "Cannot serve a node's kubelet port", "port", port, "node", node)
		return
	}
	delete(np.bindErr, port)
	srv := &http.Server{Handler: np.serve(port), ReadHeaderTimeout: 30 * time.Second}
	np.listening[port] = srv
	go func() { _ = srv.Serve(l) }()
}

// serve answers a node port: the node recorded for it, every route.
func (np *nodePorts) serve(port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		np.mu.Lock()
		node := np.nodeOf[port]
		np.mu.Unlock()
		if node == "" {
			http.Error(w, fmt.Sprintf("port %d of nestlet-proxy serves no node now", port), http.StatusNotFound)
			return
		}
		np.handler(node).ServeHTTP(w, r)
	})
}

// sync serves the ports recorded in data (the ConfigMap, as another
// replica may have written it). A port is given back only to be given to
// another node, so none is closed here: an event older than this
// replica's own write must not close the port it just opened.
func (np *nodePorts) sync(ctx context.Context, data map[string]string) {
	np.mu.Lock()
	for node := range np.known {
		if _, ok := data[node]; !ok {
			delete(np.known, node) // seen again later, it is younger: safe
		}
	}
	for node := range data {
		if !isEndpointKey(node) {
			np.knownSince(node)
		}
	}
	np.mu.Unlock()
	for node, v := range data {
		if isEndpointKey(node) {
			continue
		}
		if p, err := strconv.Atoi(v); err == nil && np.ports.contains(p) {
			np.listen(ctx, p, node)
		}
	}
}

// run keeps the listeners in step with kube-public/nestlet-proxy-ports
// until ctx ends, then closes them.
func (np *nodePorts) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(np.client, 10*time.Minute,
		informers.WithNamespace(metav1.NamespacePublic),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, nodePortsConfigMap).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	onChange := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			np.seen(cm)
			np.sync(ctx, cm.Data)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	np.mu.Lock()
	defer np.mu.Unlock()
	for p, srv := range np.listening {
		_ = srv.Close()
		delete(np.listening, p)
	}
}

// serveKubeletEndpoint answers a child's agent, authenticated by its node
// certificate, with the host:port its virtual node advertises: 404 when
// the proxy gives no node ports (the agent then advertises the shared
// port, which serves the pod routes).
func (p *Proxy) serveKubeletEndpoint(w http.ResponseWriter, r *http.Request) {
	node, ok, _ := p.authorizeTunnel(r)
	if !ok {
		http.Error(w, "a node client certificate is required", http.StatusUnauthorized)
		return
	}
	if p.nodePorts == nil {
		http.Error(w, "this nestlet-proxy gives no node ports (--node-ports): advertise "+p.KubeletEndpoint(), http.StatusNotFound)
		return
	}
	ep, err := p.nodePorts.endpointOf(r.Context(), node)
	switch {
	case errors.Is(err, errNoFreePort):
		http.Error(w, err.Error()+": advertise "+p.KubeletEndpoint(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		_, _ = w.Write([]byte(ep))
	}
}
