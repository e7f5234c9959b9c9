package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// backendServer answers every TCP connection and UDP datagram on a free
// port of 127.0.0.1 (the same port for both) with its name.
func backendServer(t *testing.T, name string) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(); _ = pc.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, name)
			_ = c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+"\n"), from)
		}
	}()
	return int32(port)
}

func unusedPort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return int32(port)
}

// A NodePort Service's node port on the proxy reaches its ready
// endpoints, in turn, or one per client with ClientIP affinity, over TCP
// and UDP; the port closes with the Service.
func TestServiceNodePorts(t *testing.T) {
	// Two backends on 127.0.0.1, each on a port of its own: two slices
	// of the Service list them (and a third one not ready).
	a, b := backendServer(t, "a"), backendServer(t, "b")
	tcpPort, udpPort := unusedPort(t), unusedPort(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: tcpPort, Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, NodePort: udpPort, Protocol: corev1.ProtocolUDP}},
	}}
	slice := func(name string, port int32, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-" + name, Namespace: "app", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)},
				{Name: ptr.To("dns"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolUDP)}},
		}
	}
	client := fake.NewClientset(svc, slice("a", a, true), slice("b", b, true), slice("c", unusedPort(t), false))
	s := newServiceNodePorts(client, "127.0.0.1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.run(ctx)

	get := func() string {
		t.Helper()
		var line string
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(int(tcpPort)), time.Second)
			if err != nil {
				return false
			}
			defer func() { _ = c.Close() }()
			line, err = bufio.NewReader(c).ReadString('\n')
			return err == nil
		}, 10*time.Second, 20*time.Millisecond)
		return line
	}
	seen := map[string]int{}
	for range 6 {
		seen[get()]++
	}
	require.Equal(t, map[string]int{"a\n": 3, "b\n": 3}, seen, "in turn over the ready endpoints, never the one not ready")

	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(int(udpPort)))
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	var first string
	for i := range 3 {
		_, err := c.Write([]byte("q"))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		if i == 0 {
			first = line
		}
		require.Equal(t, first, line, "one flow, one endpoint")
	}

	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	_, err = client.CoreV1().Services("app").Update(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.targets[portKey{proto: corev1.ProtocolTCP, port: tcpPort}].affinity > 0
	}, 10*time.Second, 10*time.Millisecond)
	sticky := get()
	for range 4 {
		require.Equal(t, sticky, get(), "ClientIP affinity: one endpoint per client")
	}

	require.NoError(t, client.CoreV1().Services("app").Delete(ctx, "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(int(tcpPort)), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the node port closes with its Service")
}
