package framework

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nestlet/nestlet/launcher"
)

// ListeningTCPPorts returns the TCP ports (IPv4 and IPv6) the process
// listens on: the sockets among its open files that /proc/net/tcp{,6}
// shows in the LISTEN state. A gateway's API relay is left out: it listens
// on an address of the pod network (launcher.GatewayAPIRange), reached
// only through the tunnels.
func ListeningTCPPorts(p *launcher.Process) ([]int, error) {
	pid := p.PID()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			addrHex, portHex, ok := strings.Cut(fields[1], ":")
			if !ok || table == "tcp" && inAPIRange(addrHex) {
				continue
			}
			port, err := strconv.ParseInt(portHex, 16, 32)
			if err == nil {
				ports = append(ports, int(port))
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// inAPIRange reports whether the IPv4 address of /proc/net/tcp (hex, in
// the host's byte order: little-endian here) is in launcher.GatewayAPIRange.
func inAPIRange(addrHex string) bool {
	v, err := strconv.ParseUint(addrHex, 16, 32)
	if err != nil {
		return false
	}
	addr := netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
	return netip.MustParsePrefix(launcher.GatewayAPIRange).Contains(addr)
}

// DialFrom opens a TCP connection to addr from network namespace netns
// (this machine's when empty) and closes it: nil when it opened within
// timeout.
func DialFrom(ctx context.Context, netns, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn net.Conn
	var err error
	if netns == "" {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = launcher.DialIn(ctx, netns, "tcp", addr)
	}
	if err == nil {
		_ = conn.Close()
	}
	return err
}
