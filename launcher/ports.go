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

// ProxyNodePorts is how many children of one cluster the launcher's
// nestlet-proxy gives a kubelet port of their own (--node-ports); those
// beyond share its kubelet port, which serves the pod routes only.
const ProxyNodePorts = 64

// nodePortWindow returns a range of ProxyNodePorts ports for a proxy's
// --node-ports. A cluster on a host of its own has its own ports (the
// same range in each); on the shared network, a window below the
// ephemeral ports where nothing listens and that this process has not
// handed out.
func nodePortWindow(hosted bool) (string, error) {
	const first, last = 20000, 32000
	if hosted {
		return fmt.Sprintf("%d-%d", first, first+ProxyNodePorts-1), nil
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for base := first; base+ProxyNodePorts-1 <= last; base += ProxyNodePorts {
		if handedOut[base] || !allFree(base, base+ProxyNodePorts-1) {
			continue
		}
		for p := base; p < base+ProxyNodePorts; p++ {
			handedOut[p] = true
		}
		return fmt.Sprintf("%d-%d", base, base+ProxyNodePorts-1), nil
	}
	return "", fmt.Errorf("no %d free ports in a row between %d and %d for nestlet-proxy's node ports", ProxyNodePorts, first, last)
}

// allFree tells whether nothing listens on any port of first..last.
func allFree(first, last int) bool {
	for p := first; p <= last; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
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
