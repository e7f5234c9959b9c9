package launcher

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// needHosts skips where hosts cannot be made, unless the machine is meant to
// (NESTLET_REQUIRE_REAL_NODES=1, as in CI), where it fails.
func needHosts(t *testing.T) {
	t.Helper()
	if err := CheckHosts(); err != nil {
		if os.Getenv("NESTLET_REQUIRE_REAL_NODES") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// reachable reports whether a TCP connection from the namespace from (this
// machine's when empty) to addr opens within a second.
func reachable(t *testing.T, from, addr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if from == "" {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = DialIn(ctx, from, "tcp", addr)
	}
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// serve accepts and closes connections on a listener in the host's
// namespace, on its WAN address, and returns that address.
func serve(t *testing.T, h *Host) string {
	t.Helper()
	l, err := ListenIn(h.Netns, "tcp", h.IP+":0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// TestHostsBehindNAT: two hosts on the WAN accept new connections only from
// this machine (the operator) and from the hosts they admit; removing them
// leaves no namespace, veth or bridge; a host whose owner died is removed
// by the next one made.
func TestHostsBehindNAT(t *testing.T) {
	needHosts(t)
	dir := t.TempDir()
	parent, err := newHost("nat-parent", "north", dir, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = parent.Remove() })
	child, err := newHost("nat-child", "south", dir, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = child.Remove() })
	require.NotEqual(t, parent.IP, child.IP)

	atParent, atChild := serve(t, parent), serve(t, child)
	require.True(t, reachable(t, "", atParent), "the operator reaches the parent")
	require.True(t, reachable(t, "", atChild), "the operator reaches the child")
	require.False(t, reachable(t, child.Netns, atParent), "the parent admitted a child it was not told of")
	require.False(t, reachable(t, parent.Netns, atChild), "the child admitted its parent")

	require.NoError(t, parent.Admit(child)) // a join
	require.True(t, reachable(t, child.Netns, atParent), "the child cannot reach the parent that admits it")
	require.False(t, reachable(t, parent.Netns, atChild), "the parent reached its child behind NAT")

	// A cut link carries nothing, either way, until healed.
	require.NoError(t, child.Cut(parent))
	require.False(t, reachable(t, child.Netns, atParent), "the child reached its parent across a cut")
	require.True(t, reachable(t, "", atParent), "the cut reached beyond the pair")
	require.NoError(t, child.Heal(parent))
	require.NoError(t, child.Heal(parent), "healing twice")
	require.True(t, reachable(t, child.Netns, atParent), "the child cannot reach its parent after the heal")

	// A redirection sends the child's connections to the parent to a
	// listener of this machine (a link proxy), until undone.
	l, err := net.Listen("tcp", OperatorIP()+":0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			accepted <- struct{}{}
		}
	}()
	routes := map[netip.AddrPort]netip.AddrPort{netip.MustParseAddrPort(atParent): netip.MustParseAddrPort(l.Addr().String())}
	require.NoError(t, child.Redirect("t1", routes))
	require.True(t, reachable(t, child.Netns, atParent))
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the redirected connection did not reach this machine's listener")
	}
	require.NoError(t, child.Unredirect("t1"))
	require.NoError(t, child.Unredirect("t1"), "undoing twice")
	// With the listener gone, only the parent can take the connection.
	_ = l.Close()
	require.True(t, reachable(t, child.Netns, atParent), "the child does not reach its parent after Unredirect")

	// A host whose owner is gone is stale: the next host made removes it
	// (and may take its index, hence its names: a mark inside tells the
	// old namespace from a new one).
	require.NoError(t, ipCommand("-n", child.Netns, "link", "add", "stale0", "type", "bridge"))
	child.record.Owner.StartTime++
	require.NoError(t, saveJSON(child.record.path(), child.record))
	other, err := newHost("nat-other", "", dir, false)
	require.NoError(t, err)
	if other.Netns == child.Netns {
		require.Error(t, ipCommand("-n", other.Netns, "link", "show", "stale0"), "the stale host's namespace %s is left", child.Netns)
	} else {
		_, err = os.Stat(filepath.Join(netnsDir, child.Netns))
		require.True(t, errors.Is(err, fs.ErrNotExist), "the stale host's namespace %s is left", child.Netns)
		_, err = net.InterfaceByName(child.record.rootVeth())
		require.Error(t, err, "the stale host's veth is left")
	}

	require.NoError(t, other.Remove())
	require.NoError(t, parent.Remove())
	for _, h := range []*Host{parent, other} {
		_, err = os.Stat(filepath.Join(netnsDir, h.Netns))
		require.True(t, errors.Is(err, fs.ErrNotExist), "namespace %s left", h.Netns)
		_, err = net.InterfaceByName(h.record.rootVeth())
		require.Error(t, err, "veth %s left", h.record.rootVeth())
	}
	records, err := readNetHostRecords()
	require.NoError(t, err)
	if len(records) == 0 {
		_, err = net.InterfaceByName(WANBridge)
		require.Error(t, err, "the WAN bridge outlived the last host")
	}
}

func TestFirewallNamesTheHost(t *testing.T) {
	r := &netHostRecord{IP: "10.250.0.7"}
	fw := r.firewall()
	for _, want := range []string{
		`iifname != "wan0" accept`, "ip saddr " + OperatorIP() + " accept", "ip saddr @children accept", "counter drop",
		`iifname "wan0" ct state new counter drop`, "ip saddr @cut drop",
		`iifname "wan0" ct status dnat ip saddr @children accept`, `iifname "wan0" ct status dnat ip saddr ` + OperatorIP() + " accept", "ip daddr @cut drop", `oifname "wan0" ip saddr != 10.250.0.7 masquerade`,
	} {
		require.Contains(t, fw, want)
	}
}

func TestRealNodeLinks(t *testing.T) {
	seen := map[string]bool{}
	for i := range 256 {
		r := &hostRecord{Index: i}
		h, n := r.link()
		require.Equal(t, h.Next(), n)
		require.True(t, strings.HasPrefix(h.String(), "10.252."), h.String())
		require.False(t, seen[h.String()] || seen[n.String()], "index %d reuses %s", i, h)
		seen[h.String()], seen[n.String()] = true, true
		require.Equal(t, byte(1), h.As4()[3]%4, "host end of index %d is not the first of its /30", i)
	}
}
