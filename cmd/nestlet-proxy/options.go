package main

import "github.com/spf13/pflag"

// options are the options of nestlet-proxy, as command-line flags.
type options struct {
	kubeconfig       string
	bindAddress      string
	kubeletPort      int
	tunnelPort       int
	nodePorts        string
	directNodes      []string
	serviceNodePorts bool
	advertiseAddress string
	tunnelURL        string
	certFile         string
	keyFile          string
	clientCAFile     string
	webhookPort      int
	webhookCertFile  string
	webhookKeyFile   string
	schedulerName    string
	peerID           string
	peerTokenFile    string
	peerNamespace    string
	peerService      string
	printPermissions bool
}

// addFlags registers the options' flags on fs.
func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.printPermissions, "print-permissions", false, "print, as JSON, what the proxy does with the API of its cluster (what the chart grants its ServiceAccount) and exit")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of this (parent) cluster (default: in-cluster config, or $KUBECONFIG)")
	fs.StringVar(&o.bindAddress, "bind-address", "0.0.0.0", "IP address both ports listen on")
	fs.IntVar(&o.kubeletPort, "kubelet-port", 10250, "port the API server calls for logs/exec/attach/port-forward (advertised by the virtual nodes)")
	fs.IntVar(&o.tunnelPort, "tunnel-port", 8443, "port children's agents dial with their node certificates")
	fs.StringVar(&o.nodePorts, "node-ports", "", "FIRST-LAST: give each child's virtual node a kubelet port of its own from this range, where node-level routes are served too (/stats/summary, /metrics/resource: kubectl top, metrics-server); empty: every node shares --kubelet-port, which serves the pod routes only")
	fs.StringSliceVar(&o.directNodes, "direct-nodes", nil, "children's virtual nodes that may advertise a kubelet endpoint of their own (their agents' --kubelet-api=direct) instead of this proxy's: NAME=IP:PORT at that endpoint only (where this cluster reaches the child), NAME at any, * every node at any. Every other child's node advertises the proxy, enforced by the admission policy nestlet-children-kubelet")
	fs.BoolVar(&o.serviceNodePorts, "service-node-ports", false, "serve the node ports of this cluster's NodePort and LoadBalancer Services on --bind-address, the address the children's virtual nodes advertise: each connection (TCP) or flow (UDP) goes to one of the Service's ready endpoints wherever it runs in the tree, through the pod network (this cluster's gateway), as kube-proxy does on a real node. Publish the Services' node port range at --advertise-address as the proxy's other ports")
	fs.StringVar(&o.advertiseAddress, "advertise-address", "", "address (IP or DNS name) at which this cluster's API server and the children reach the proxy (required)")
	fs.StringVar(&o.tunnelURL, "tunnel-url", "", "wss:// URL children dial, when it differs from wss://<advertise-address>:<tunnel-port>/connect (e.g. behind a load balancer)")
	fs.StringVar(&o.certFile, "tls-cert-file", "", "serving certificate (PEM) for both ports; a self-signed one is generated when empty (its CA is published for the children)")
	fs.StringVar(&o.keyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.IntVar(&o.webhookPort, "webhook-port", 0, "serve the scheduling webhook (a mutating admission webhook that routes pods to Nestlet's scheduler with the virtual nodes' toleration) on this port; 0: off")
	fs.StringVar(&o.webhookCertFile, "webhook-tls-cert-file", "", "serving certificate (PEM) of the webhook, for the name the API server calls it by (required with --webhook-port)")
	fs.StringVar(&o.webhookKeyFile, "webhook-tls-private-key-file", "", "key of --webhook-tls-cert-file")
	fs.StringVar(&o.schedulerName, "scheduler-name", "nestlet-scheduler", "Nestlet's scheduler's name, which the webhook gives pods")
	fs.StringVar(&o.peerService, "peer-service", "", "serve as one with the other replicas of this proxy: a headless Service whose EndpointSlices list them (their pod IPs); each replica routes requests through the tunnels the others hold. Needs --peer-id and --peer-token-file, and every replica serving the same certificate")
	fs.StringVar(&o.peerNamespace, "peer-namespace", "", "namespace of --peer-service (default: the namespace of the pod's service account)")
	fs.StringVar(&o.peerID, "peer-id", "", "this replica's address as the others dial it (its pod IP)")
	fs.StringVar(&o.peerTokenFile, "peer-token-file", "", "file holding the token the replicas share, which a peer connection must present")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle that signs node client certificates and the API server's kubelet client certificate (default: the cluster CA of the kubeconfig)")
}
