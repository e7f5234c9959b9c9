package launcher

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Etcd is one etcd member. Several clusters share it, each under its own
// key prefix.
type Etcd struct {
	// URL is the client URL, http://<ip>:<port>.
	URL     string
	process *Process
}

// startEtcd starts etcd in the network namespace netns (this machine's when
// empty), listening on ip, with its data and log under dir, and waits until
// it answers its health endpoint.
func startEtcd(ctx context.Context, bins *Binaries, dir, netns, ip string, procs *processGroup) (*Etcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "etcd-data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://%s:%d", ip, ports[0])
	peerURL := fmt.Sprintf("http://%s:%d", ip, ports[1])
	p, err := startProcessIn(netns, dir, "etcd", bins.Etcd, nil,
		"--name=nestlet-test",
		"--data-dir="+dataDir,
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=nestlet-test="+peerURL,
		// Test data is disposable: trade durability for speed on a
		// shared, slow disk.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	procs.add(p)
	e := &Etcd{URL: clientURL, process: p}
	err = waitHealthy(ctx, p, 60*time.Second, func(ctx context.Context) bool { return httpOK(ctx, clientURL+"/health") })
	if err != nil {
		return nil, err
	}
	return e, nil
}

// httpOK reports whether a GET of url answers 200.
func httpOK(ctx context.Context, url string) bool { return httpOKIn(ctx, "", url) }

// httpOKIn is httpOK from the network namespace ns (this machine's when
// empty).
func httpOKIn(ctx context.Context, ns, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	client := http.DefaultClient
	if ns != "" {
		client = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return DialIn(ctx, ns, network, addr)
			},
			DisableKeepAlives: true,
		}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy polls ok until it is true, failing fast with the log tail when
// the process exits.
func waitHealthy(ctx context.Context, p *Process, timeout time.Duration, ok func(context.Context) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("%s exited (%w); last log lines:\n%s", p.Name, err, p.Tail(30))
		}
		return ok(ctx), nil
	})
	if err != nil && ctx.Err() == nil {
		if exited, _ := p.Exited(); !exited {
			return fmt.Errorf("waiting for %s to become healthy: %w; last log lines:\n%s", p.Name, err, p.Tail(30))
		}
	}
	return err
}
