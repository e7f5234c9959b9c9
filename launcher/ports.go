package launcher

import (
	"fmt"
	"net"
	"strings"
	"sync"
)

var (
	portsMu sync.Mutex
	// handedOut keeps a port from being given twice by this process while
	// the program it was meant for has not bound it yet.
	handedOut = map[int]bool{}
)

// FreePort returns a loopback TCP port that nothing listens on now and that
// this process has not handed out before.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut[port] {
			handedOut[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port: none after 100 tries")
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// HostIP returns the first IPv4 address of an interface of this machine
// that is up and not loopback (nor a real node's bridge), else 127.0.0.1.
// nestlet-proxy advertises it: a kube-apiserver refuses to proxy
// (nodes/proxy: /stats/summary, /metrics/resource) to a node whose address
// is loopback, as a real node's never is.
func HostIP() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || strings.HasPrefix(ifc.Name, "nstl") {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
