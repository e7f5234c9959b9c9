// Command coredns is CoreDNS's own server main, built from the Go module
// proxy at the version pinned in this directory's go.mod (the version
// kubeadm installs with the project's Kubernetes), with the plugins a
// cluster's DNS uses, in CoreDNS's own order (its plugin.cfg). The real
// clusters of the tests and the demo run it as their cluster DNS, in a pod,
// from the image nestlet.local/coredns (hack/install-node-runtime.sh). It
// answers for the cluster's own names only: no forward plugin, since these
// machines reach no resolver outside.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the plugins above, in the order of CoreDNS's plugin.cfg,
// which is the order a query passes them.
var directives = []string{
	"reload",
	"ready",
	"health",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
