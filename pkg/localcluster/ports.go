package localcluster

import (
	"fmt"
	"net"
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
