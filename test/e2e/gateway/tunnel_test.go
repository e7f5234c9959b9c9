// Package gateway tests provider/gateway between two hosts of the
// launcher, one behind NAT: the tunnel its child opens, both ways, through
// a cut and a heal.
package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/provider/gateway"
	"github.com/nestlet/nestlet/test/framework"
)

// helperEnv, set, makes this test binary a gateway of one host (started
// in the host's namespace by startGateway) instead of running tests.
const helperEnv = "NESTLET_GATEWAY_HELPER"

// helperConfig is one gateway of a test, with an HTTP server on its
// tunnel address that answers / with the client's address and /status
// with the gateway's peers.
type helperConfig struct {
	Key        wgtypes.Key
	ListenPort int
	Address    netip.Prefix
	Peer       gateway.Peer
	Serve      string
}

func TestMain(m *testing.M) {
	if c := os.Getenv(helperEnv); c != "" {
		if err := runHelper(c); err != nil {
			fmt.Fprintln(os.Stderr, "gateway helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper runs a gateway until its stdin closes.
func runHelper(config string) error {
	var c helperConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return err
	}
	g, err := gateway.Start(gateway.Options{Interface: "nestlet0", PrivateKey: c.Key, ListenPort: c.ListenPort, Addresses: []netip.Prefix{c.Address},
		Logf: func(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.SetPeers([]gateway.Peer{c.Peer}); err != nil {
		return err
	}
	l, err := net.Listen("tcp", c.Serve)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.RemoteAddr) })
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		s, err := g.Status()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(s)
	})
	go func() { _ = http.Serve(l, mux) }()
	fmt.Printf("ready %d\n", g.Port())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startGateway runs a gateway in host's namespace (this binary, as a
// helper), and stops it at the end of the test.
func startGateway(t *testing.T, host *launcher.Host, c helperConfig) {
	t.Helper()
	config, err := json.Marshal(c)
	require.NoError(t, err)
	cmd := exec.Command("nsenter", "--net=/run/netns/"+host.Netns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(config))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway of %s: %v: %s", host.Cluster, err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("gateway of %s did not stop when told", host.Cluster)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "gateway of %s: %s", host.Cluster, stderr.String())
	require.True(t, strings.HasPrefix(line, "ready "), "gateway of %s said %q: %s", host.Cluster, line, stderr.String())
}

// get GETs url from inside namespace ns, within a second.
func get(ctx context.Context, ns, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	client := http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return launcher.DialIn(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestTunnelThroughNAT: a child's host behind NAT opens a tunnel to its
// parent's gateway, of which it knows the endpoint; the parent knows only
// the child's key, and learns where it is from its handshakes. Then each
// side reaches the other's addresses through the tunnel, with their
// source addresses kept, the parent through the path the child opened; a
// cut WAN fails requests fast, and the tunnel comes back by itself after
// the heal.
func TestTunnelThroughNAT(t *testing.T) {
	if err := launcher.CheckHosts(); err != nil {
		if os.Getenv("NESTLET_REQUIRE_REAL_NODES") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	parent, err := launcher.NewHost("wg-parent", "north", dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, parent.Remove()) })
	child, err := launcher.NewHost("wg-child", "south", dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, child.Remove()) })
	require.NoError(t, parent.Admit(child)) // a join: the child may reach its parent

	parentKey, err := wgtypes.GeneratePrivateKey()
	require.NoError(t, err)
	childKey, err := wgtypes.GeneratePrivateKey()
	require.NoError(t, err)
	parentAt, childAt := "10.99.1.1", "10.99.2.1"
	startGateway(t, parent, helperConfig{Key: parentKey, ListenPort: gateway.DefaultPort,
		Address: netip.MustParsePrefix(parentAt + "/32"), Serve: parentAt + ":8080",
		Peer: gateway.Peer{PublicKey: childKey.PublicKey(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.99.2.0/24")}}})
	startGateway(t, child, helperConfig{Key: childKey,
		Address: netip.MustParsePrefix(childAt + "/32"), Serve: childAt + ":8080",
		Peer: gateway.Peer{PublicKey: parentKey.PublicKey(), Endpoint: netip.AddrPortFrom(netip.MustParseAddr(parent.IP), gateway.DefaultPort),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.99.1.0/24")}, Keepalive: time.Second}})

	ctx := t.Context()
	reach := func(what, ns, url string) (string, time.Duration) {
		start := time.Now()
		var body string
		framework.EventuallyEvery(t, 100*time.Millisecond, 30*time.Second, what, func(ctx context.Context) (bool, string) {
			var err error
			body, err = get(ctx, ns, url)
			return err == nil, fmt.Sprint(err)
		})
		return body, time.Since(start)
	}
	// The child's request, from its own address to its parent's.
	from, took := reach("the child reaches its parent through the tunnel", child.Netns, "http://"+parentAt+":8080/")
	require.True(t, strings.HasPrefix(from, childAt+":"), "the parent saw the child's request from %s, not from the child's address", from)
	t.Logf("tunnel up, first request answered in %s", took.Round(time.Millisecond))
	// The parent's, through the path the child opened.
	from, _ = reach("the parent reaches its child through the tunnel", parent.Netns, "http://"+childAt+":8080/")
	require.True(t, strings.HasPrefix(from, parentAt+":"), "the child saw the parent's request from %s", from)

	status, _ := reach("the parent's status", parent.Netns, "http://"+parentAt+":8080/status")
	var peers []gateway.PeerStatus
	require.NoError(t, json.Unmarshal([]byte(status), &peers))
	require.Len(t, peers, 1)
	require.Equal(t, childKey.PublicKey(), peers[0].PublicKey)
	require.Equal(t, child.IP, peers[0].Endpoint.Addr().String(), "the parent learned the child's endpoint from its handshakes")
	require.False(t, peers[0].LastHandshake.IsZero(), "no handshake")
	require.Positive(t, peers[0].RxBytes)
	require.Positive(t, peers[0].TxBytes)
	require.Positive(t, peers[0].RTT, "the parent timed its answer to the child's handshake")
	status, _ = reach("the child's status", child.Netns, "http://"+childAt+":8080/status")
	require.NoError(t, json.Unmarshal([]byte(status), &peers))
	require.Len(t, peers, 1)
	require.Positive(t, peers[0].RTT, "the child timed its handshake")
	t.Logf("round trip measured at the handshake: %s from the child", peers[0].RTT)

	// A cut WAN: requests fail within the client's timeout, not hang.
	require.NoError(t, child.Cut(parent))
	start := time.Now()
	_, err = get(ctx, child.Netns, "http://"+parentAt+":8080/")
	require.Error(t, err, "a request crossed a cut WAN")
	t.Logf("a request across the cut failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	time.Sleep(3 * time.Second) // keepalives and handshakes are lost meanwhile
	require.NoError(t, child.Heal(parent))
	_, took = reach("the tunnel comes back after the heal", child.Netns, "http://"+parentAt+":8080/")
	t.Logf("tunnel back %s after the heal", took.Round(time.Millisecond))
	reach("the parent reaches its child again", parent.Netns, "http://"+childAt+":8080/")
}

// syncBuffer is a bytes buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
