package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrNoNodePort is returned by NodeEndpoint when the proxy gives this node
// no port of its own (it runs without --node-ports, predates them, or has
// none free): the node then advertises the proxy's shared kubelet port.
var ErrNoNodePort = errors.New("the proxy gives this node no kubelet port of its own")

// NodeEndpoint asks the proxy of cfg (URL, CA, and the node's client
// certificate) for the host:port at which it serves this node's kubelet
// API on a port of the node's own, which the virtual node then advertises:
// there the proxy serves node-level routes too (/stats/summary,
// /metrics/resource), which name no pod and so no tunnel on the shared
// port.
func NodeEndpoint(ctx context.Context, cfg ClientConfig) (string, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return "", fmt.Errorf("the proxy's tunnel URL %q: %w", cfg.URL, err)
	}
	u.Scheme, u.Path, u.RawQuery = "https", "/kubelet-endpoint", ""
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CA) {
		return "", errors.New("no certificate in the proxy CA bundle")
	}
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, GetClientCertificate: cfg.GetClientCertificate}
	if cfg.GetClientCertificate == nil {
		tlsCfg.Certificates = []tls.Certificate{cfg.Certificate}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("asking the proxy for this node's kubelet port: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		return msg, nil
	case http.StatusNotFound:
		return "", fmt.Errorf("%w: %s", ErrNoNodePort, msg)
	default:
		return "", fmt.Errorf("asking the proxy for this node's kubelet port: %s: %s", resp.Status, msg)
	}
}
