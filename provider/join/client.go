package join

import (
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// OwnClient returns a client for cfg over a transport (and so connections)
// of its own, and a function that closes its idle connections, to call when
// the client is done with.
//
// client-go shares one transport between the clients of a process whose TLS
// settings are equal. The requests of a join carry no client certificate
// (none, or a bootstrap token, over the parent's CA), so every join to the
// same parent from one process would share one HTTP/2 connection: an agent
// with several Targets, or a process holding many hollow agents, whose joins
// then fail together when that connection breaks, and back off together.
// A transport with a Proxy function is never shared; this one is
// client-go's default (the environment's proxy settings).
func OwnClient(cfg *rest.Config) (*kubernetes.Clientset, func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Proxy = http.ProxyFromEnvironment
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	return client, func() { utilnet.CloseIdleConnectionsFor(hc.Transport) }, nil
}
