package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/pkg/tunnel"
)

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{"": {}, "10300-10399": {10300, 10399}, "7-7": {7, 7}} {
		got, err := ParsePortRange(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"10300", "10399-10300", "0-5", "1-70000", "a-b", "-"} {
		_, err := ParsePortRange(in)
		require.Error(t, err, in)
	}
	require.Equal(t, 100, PortRange{10300, 10399}.Size())
	require.Zero(t, PortRange{}.Size())
}

// Each node keeps its port, across replicas (they read the same record);
// a full range takes back only the ports of nodes that do not exist and
// have been recorded for releaseGrace (a node asks before it registers).
func TestNodePortsAllocate(t *testing.T) {
	ctx := t.Context()
	client := versioned(fake.NewClientset())
	clk := clocktesting.NewFakePassiveClock(time.Now())
	replica := func() *nodePorts { return &nodePorts{ports: PortRange{100, 102}, client: client, clock: clk} }
	a, b := replica(), replica()
	for _, n := range []string{"east", "west", "north", "south"} {
		_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, tt := range []struct {
		np   *nodePorts
		node string
		want int
	}{{a, "east", 100}, {a, "east", 100}, {b, "east", 100}, {b, "west", 101}, {a, "north", 102}, {a, "west", 101}} {
		got, err := tt.np.allocate(ctx, tt.node)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, tt.node)
	}
	_, err := a.allocate(ctx, "south")
	require.ErrorIs(t, err, errNoFreePort, "every port is a live node's")
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "west", metav1.DeleteOptions{}))
	_, err = b.allocate(ctx, "south")
	require.ErrorIs(t, err, errNoFreePort, "west was given its port just now: it may not have registered yet")
	clk.SetTime(clk.Now().Add(releaseGrace))
	got, err := b.allocate(ctx, "south")
	require.NoError(t, err)
	require.Equal(t, 101, got, "west is gone: its port goes to south")
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"east": "100", "south": "101", "north": "102"}, cm.Data)

	// A replica that sees a record of a node that does not exist for the
	// first time holds it for the grace from then.
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "north", metav1.DeleteOptions{}))
	c := replica()
	_, err = c.allocate(ctx, "later")
	require.ErrorIs(t, err, errNoFreePort, "replica c has just seen north's record")
	clk.SetTime(clk.Now().Add(releaseGrace))
	got, err = c.allocate(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, 102, got, "north is gone and recorded for the grace: its port goes to later")
}

// Nodes that ask while the record is being written are recorded together
// by the next write: a burst of joins is one read and one write of the
// record, not one each (and no conflicts between them); a node asking
// again is answered from what the replica serves, without a request.
func TestNodePortsBurstIsOneWrite(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	np := &nodePorts{ports: PortRange{100, 199}, client: client, nodeOf: map[int]string{}}
	np.writing.Lock() // a write under way
	const n = 20
	type answer struct {
		node string
		port int
		err  error
	}
	answers := make(chan answer, n)
	for i := range n {
		node := fmt.Sprintf("node-%02d", i)
		go func() {
			p, err := np.allocate(ctx, node)
			answers <- answer{node, p, err}
		}()
	}
	require.Eventually(t, func() bool {
		np.mu.Lock()
		defer np.mu.Unlock()
		return np.pending != nil && len(np.pending.nodes) == n
	}, 5*time.Second, time.Millisecond, "every node waits for the next write")
	client.ClearActions()
	np.writing.Unlock()
	ports := map[int]string{}
	for range n {
		a := <-answers
		require.NoError(t, a.err, a.node)
		require.NotContains(t, ports, a.port, "%s got %s's port", a.node, ports[a.port])
		ports[a.port] = a.node
	}
	np.mu.Lock()
	np.nodeOf = ports // what endpointOf then serves (listen)
	np.mu.Unlock()
	verbs := []string{}
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	require.Equal(t, []string{"get", "create"}, verbs, "one read and one write for the burst")
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, cm.Data, n)
	require.Equal(t, "100", cm.Data["node-00"], "the lowest free ports in the order of the names")

	client.ClearActions()
	p, err := np.allocate(ctx, "node-07")
	require.NoError(t, err)
	require.Equal(t, 107, p)
	require.Empty(t, client.Actions(), "a node served already is answered without a request")
}

// A child's agent asks the proxy for its port with its node certificate
// (pkg/tunnel.NodeEndpoint), and the proxy serves that port at once, for
// that node, behind the kubelet API's authentication. A proxy without
// --node-ports says so (tunnel.ErrNoNodePort).
func TestNodeEndpoint(t *testing.T) {
	clientCA := newTestCA(t, "parent-client-ca")
	servingCA := newTestCA(t, "proxy-ca")
	serving := servingCA.issue(t, "proxy", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	nodeCert := clientCA.issue(t, "system:node:east", []string{"system:nodes"}, x509.ExtKeyUsageClientAuth)
	start := func(ports PortRange) *Proxy {
		p, err := New(Config{Client: fake.NewClientset(), ClientCA: clientCA.pem, ServingCert: serving, ServingCA: servingCA.pem,
			BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1", NodePorts: ports})
		require.NoError(t, err)
		go func() { _ = p.Run(t.Context()) }()
		return p
	}
	ask := func(p *Proxy) (string, error) {
		return tunnel.NodeEndpoint(t.Context(), tunnel.ClientConfig{URL: p.TunnelURL(), CA: servingCA.pem, Certificate: nodeCert})
	}

	_, err := ask(start(PortRange{}))
	require.ErrorIs(t, err, tunnel.ErrNoNodePort)

	window := freeWindow(t, 2)
	p := start(window)
	ep, err := ask(p)
	require.NoError(t, err)
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(window.First)), ep)
	again, err := ask(p)
	require.NoError(t, err)
	require.Equal(t, ep, again, "the same node, the same port")

	// The port is served: an anonymous caller is refused by the kubelet
	// API's authentication (not a 404 of the shared port).
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(servingCA.pem)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://" + ep + "/stats/summary")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Without a node certificate, no port.
	resp, err = client.Get("https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.tunnelLn.Addr().(*net.TCPAddr).Port)) + "/kubelet-endpoint")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// freeWindow finds n consecutive loopback ports nothing listens on.
func freeWindow(t *testing.T, n int) PortRange {
	t.Helper()
	for base := 41000; base < 49000; base += n {
		free := true
		for p := base; p < base+n && free; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				free = false
				continue
			}
			_ = l.Close()
		}
		if free {
			return PortRange{First: base, Last: base + n - 1}
		}
	}
	t.Fatal("no free ports")
	return PortRange{}
}

// The proxy records beside the node ports the endpoint its children's
// nodes advertise (the parameter of the policy nestlet-children-kubelet),
// and the ports' bookkeeping leaves those keys alone: a full range takes
// back nodes' ports only.
func TestRecordEndpoints(t *testing.T) {
	ctx := t.Context()
	clientCA := newTestCA(t, "parent-client-ca")
	servingCA := newTestCA(t, "proxy-ca")
	serving := servingCA.issue(t, "proxy", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: nodePortsConfigMap, Namespace: metav1.NamespacePublic},
		Data: map[string]string{"east": "100"}})
	p, err := New(Config{Client: client, ClientCA: clientCA.pem, ServingCert: serving, ServingCA: servingCA.pem,
		BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1", DirectNodes: []string{"west", "north"}})
	require.NoError(t, err)
	defer func() { _ = p.kubeletLn.Close(); _ = p.tunnelLn.Close() }()
	require.NoError(t, p.recordEndpoints(ctx))
	require.NoError(t, p.recordEndpoints(ctx), "recorded again (a restart)")
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(p.KubeletEndpoint())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"east": "100", ".host": "127.0.0.1", ".port": port, ".direct": "west,north"}, cm.Data)

	// east's node is gone, recorded for longer than the grace, and the
	// range full: south takes its port, the endpoint keys stay.
	clk := clocktesting.NewFakePassiveClock(time.Now())
	np := &nodePorts{ports: PortRange{100, 100}, client: client, clock: clk}
	np.known = map[string]time.Time{"east": clk.Now()} // seen now
	clk.SetTime(clk.Now().Add(releaseGrace))
	got, err := np.allocate(ctx, "south")
	require.NoError(t, err)
	require.Equal(t, 100, got)
	cm, err = client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"south": "100", ".host": "127.0.0.1", ".port": port, ".direct": "west,north"}, cm.Data)
	_, err = np.endpointOf(ctx, ".host")
	require.Error(t, err, "no node is named like an endpoint key")
}

// --direct-nodes takes "*", names, and names pinned at an IP and port;
// anything else is refused at start with what is wrong.
func TestValidateDirectNodes(t *testing.T) {
	require.NoError(t, ValidateDirectNodes([]string{"*", "west", "east=10.0.0.5:10250", "north=[fd00::5]:10250"}))
	for entries, why := range map[string]string{
		"west,west=10.0.0.5:1":  "names west twice",
		"west=10.0.0.5":         "want NAME=IP:PORT",
		"west=host.example:443": "is not an IP address",
		"west=10.0.0.5:0":       "is not a port",
		"West=10.0.0.5:1":       "is not a node's name",
		"*=10.0.0.5:1":          "is not a node's name",
	} {
		err := ValidateDirectNodes(strings.Split(entries, ","))
		require.ErrorContains(t, err, why, entries)
	}
}

// versioned makes client's ConfigMap writes check and bump the
// resourceVersion as an API server does (the fake's tracker does not): a
// write from a stale copy is a conflict.
func versioned(client *fake.Clientset) *fake.Clientset {
	var mu sync.Mutex
	next := 1
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		o, ok := a.(interface{ GetObject() runtime.Object })
		if !ok || (a.GetVerb() != "create" && a.GetVerb() != "update") {
			return false, nil, nil
		}
		cm := o.GetObject().(*corev1.ConfigMap).DeepCopy()
		if a.GetVerb() == "update" {
			stored, err := client.Tracker().Get(a.GetResource(), cm.Namespace, cm.Name)
			if err != nil {
				return true, nil, err
			}
			if stored.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), cm.Name, errors.New("stale resourceVersion"))
			}
		}
		next++
		cm.ResourceVersion = strconv.Itoa(next)
		var err error
		if a.GetVerb() == "create" {
			err = client.Tracker().Create(a.GetResource(), cm, cm.Namespace)
		} else {
			err = client.Tracker().Update(a.GetResource(), cm, cm.Namespace)
		}
		return true, cm, err
	})
	return client
}

// A write starts from the record as last seen, without reading it; a copy
// gone stale (another replica wrote) costs a conflict and a read, and a
// record deleted meanwhile is made again by the write after.
func TestNodePortsWriteFromLastSeen(t *testing.T) {
	ctx := t.Context()
	client := versioned(fake.NewClientset())
	a := &nodePorts{ports: PortRange{100, 199}, client: client}
	b := &nodePorts{ports: PortRange{100, 199}, client: client}
	verbs := func() []string {
		var out []string
		for _, act := range client.Actions() {
			if act.GetResource().Resource == "configmaps" {
				out = append(out, act.GetVerb())
			}
		}
		client.ClearActions()
		return out
	}
	_, err := a.record(ctx, []string{"east"})
	require.NoError(t, err)
	require.Equal(t, []string{"get", "create"}, verbs(), "nothing seen yet: read, then made")
	_, err = a.record(ctx, []string{"west"})
	require.NoError(t, err)
	require.Equal(t, []string{"update"}, verbs(), "written from its own last write")

	_, err = b.record(ctx, []string{"north"})
	require.NoError(t, err)
	verbs()
	ports, err := a.record(ctx, []string{"south"})
	require.NoError(t, err)
	require.Equal(t, []string{"update", "get", "update"}, verbs(), "b wrote since: a conflict, then a read")
	require.Equal(t, 103, ports["south"], "east, west and north keep theirs")

	require.NoError(t, client.CoreV1().ConfigMaps(metav1.NamespacePublic).Delete(ctx, nodePortsConfigMap, metav1.DeleteOptions{}))
	verbs()
	_, err = a.record(ctx, []string{"up"})
	require.Error(t, err, "the copy names a record that is gone")
	_, err = a.record(ctx, []string{"up"})
	require.NoError(t, err)
	require.Equal(t, []string{"update", "get", "create"}, verbs(), "the failed write forgot the copy: read, then made again")
}
