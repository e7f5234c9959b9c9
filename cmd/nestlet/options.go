package main

import (
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/config"
	componentoptions "k8s.io/component-base/config/options"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/agent"
)

// options are the options of the nestlet agent, as command-line flags.
type options struct {
	kubeconfig        string
	namespace         string
	groupKeys         []string
	lease             int32
	outage            time.Duration
	podWorkers        int
	profiling         bool
	printPermissions  bool
	bounceTimeout     time.Duration
	heldMaxAge        time.Duration
	namespaceIdle     time.Duration
	trustedSchedulers []string
	metricsAddr       string
	kubeletAPI        string
	podAPI            string
	directAddress     string
	gateway           agent.GatewayConfig
	gatewayOn         bool
	podCIDRPool       []string
	podCIDRPoolShare  int
	childTaintEffect  string
	leaderElection    config.LeaderElectionConfiguration
}

// addFlags registers the options' flags on fs.
func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (default: in-cluster config, or $KUBECONFIG)")
	fs.StringVar(&o.namespace, "namespace", api.DefaultNamespace, "namespace of this cluster where node identities are kept")
	fs.StringSliceVar(&o.groupKeys, "group-keys", api.DefaultGroupKeys, "node label keys that group nodes in the summary sent to parents")
	fs.Int32Var(&o.lease, "lease-duration", 40, "lease duration of virtual nodes, in seconds")
	fs.DurationVar(&o.outage, "apiserver-outage-tolerance", agent.DefaultOutageTolerance, "how long this cluster's API server may be unready while its virtual nodes keep renewing their leases in the parents (its pods keep running meanwhile); past it the parents mark the nodes lost after their grace period. 0: not at all")
	fs.IntVar(&o.podWorkers, "pod-workers", 50, "pods forwarded concurrently per parent")
	fs.DurationVar(&o.bounceTimeout, "bounce-timeout", 30*time.Second, "how long a pod bound here without a reservation (by hand, with PersistentVolumeClaims) may stay unschedulable here before it is bounced back to the parent")
	fs.DurationVar(&o.namespaceIdle, "namespace-idle", agent.DefaultNamespaceIdle, "how long a namespace the agent made here for its parents' pods may hold none of their pods, Services or claims before it is deleted (a parent's namespace deleted there leaves nothing behind here); it is made again when needed. Negative: never deleted")
	fs.DurationVar(&o.heldMaxAge, "held-max-age", api.HeldMaxAge, "how long a place held here for a parent's pod is kept without the parent asking for it again or binding the pod (parents ask every 30s for a pod that waits for room)")
	fs.StringSliceVar(&o.trustedSchedulers, "trusted-schedulers", agent.DefaultTrustedSchedulers, "the parents' schedulers (spec.schedulerName) whose pods the virtual nodes take without the toleration of their taint; any other pod bound to a virtual node must tolerate virtual-kubelet.io/provider=nestlet:NoSchedule, and DaemonSet pods are never taken (each is failed with reason NestletNotAdmitted)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "", "address serving Prometheus metrics at /metrics, e.g. :9090 (off when empty: a child in tunnel mode listens on nothing)")
	fs.StringVar(&o.podAPI, "pod-api", agent.PodAPIAuto, "which API server the parents' pods call: origin (the parent's, with tokens the parent issues for the pod and refreshes: a pod made at the root calls the root however deep it runs, through the gateways' peers where the parent's gateway offers its API server (--gateway-api-address), else at its URL, which the leaves' pods must then reach), local (this cluster's, with its service account tokens, as a kubelet mounts them), or auto (origin where the parent's gateway offers its API server to this cluster's pods, else local)")
	fs.StringVar(&o.kubeletAPI, "kubelet-api", agent.KubeletAPIAuto, "how virtual nodes serve the kubelet API (logs, exec, attach, port-forward): auto (the parent's nestlet-proxy if it publishes one, else direct if --kubelet-direct-address is set, else off), tunnel, direct or off")
	fs.StringVar(&o.directAddress, "kubelet-direct-address", "", "direct mode: the IP the kubelet API listens on and virtual nodes advertise (a port is chosen per Target; IP:port with a single Target); the parent's API server must reach it")
	fs.BoolVar(&o.gatewayOn, "gateway", false, "run a gateway: WireGuard peers (the kernel's WireGuard, else userspace on a TUN device; needs CAP_NET_ADMIN and /dev/net/tun) that carry pod traffic to the parents' gateways and from the children's, routing every joined cluster's pod CIDRs")
	fs.StringVar(&o.gateway.Interface, "gateway-interface", "nestlet0", "name of the gateway's interface")
	fs.IntVar(&o.gateway.ListenPort, "gateway-listen-port", 51820, "UDP port the gateway listens on for the children's gateways")
	fs.StringVar(&o.gateway.Endpoint, "gateway-endpoint", "", "host:port where children reach --gateway-listen-port (told to each child on its virtual node); without it no child's gateway can dial this cluster's")
	fs.DurationVar(&o.gateway.Keepalive, "gateway-keepalive", 25*time.Second, "keepalive of the peers of the parents' gateways, which keeps them open through NAT")
	fs.IntVar(&o.gateway.DirectPaths, "direct-paths", 8, "how many direct paths to the gateways of other clusters (not through the tree) this cluster's gateway tries at most, dialled where their parents see them, through NAT; 0: none, all traffic climbs the tree")
	fs.StringVar(&o.gateway.APIAddress, "gateway-api-address", "", "an IP (or IP:port; port 443 by default) the gateway holds and relays to this cluster's API server, routed to the clusters below through the peers: the pods made here that run below (their agents with --pod-api=origin) call this cluster there; one address per cluster of the tree, outside every pod CIDR. Empty: none, and they call the URL their cluster joined with")
	fs.StringVar(&o.gateway.NodeName, "gateway-node-name", "", "the node this agent runs on, on the node's network (the chart passes the pod's node): published with the CIDRs the gateway routes to its peers (into the ConfigMap nestlet-gateway of --namespace, which the chart makes), for the route agents of the cluster's other nodes (nestlet-routes). Empty: not published")
	fs.StringVar(&o.gateway.Implementation, "gateway-implementation", "auto", "WireGuard to run the gateway on: auto (the kernel's where the host has it, else wireguard-go in userspace), kernel or userspace")
	fs.StringSliceVar(&o.podCIDRPool, "pod-cidr-pool", nil, "as a parent: the pod CIDRs a child without a grant of its own (nestctl grant, in configmap kube-system/nestlet-pod-cidrs) may claim a share of, first come (e.g. 10.128.0.0/9); a child is routed, carried up and told to the other children only the pod CIDRs it is granted, never this cluster's own (its nodes' pod CIDRs and addresses, its Service CIDRs). Empty: only grants")
	fs.StringVar(&o.childTaintEffect, "child-taint-effect", string(corev1.TaintEffectNoSchedule), "as a parent: the effect of the taint virtual-kubelet.io/provider on the children's virtual nodes: NoSchedule (the stock scheduler keeps ordinary pods off), or PreferNoSchedule for a cluster made only of clusters whose default scheduler is Nestlet's (its nodes then take pods as one cluster's do, as tests like Kubernetes conformance expect)")
	fs.IntVar(&o.podCIDRPoolShare, "pod-cidr-pool-share", agent.DefaultPodCIDRPoolShareBits, "the most a child may take of --pod-cidr-pool, as a prefix length of IPv4 (16: a /16's addresses; as many /64s of IPv6); a larger claim is refused whole")
	fs.BoolVar(&o.printPermissions, "print-permissions", false, "print, as JSON, what the agent does with the API of its own cluster (what the chart grants its ServiceAccount) and exit")
	fs.BoolVar(&o.profiling, "profiling", false, "also serve Go's pprof profiles under /debug/pprof/ on --metrics-bind-address")
	// Replicas elect a leader as kube-scheduler's do, with its flags and
	// defaults; the Lease is in --namespace unless said otherwise.
	o.leaderElection = config.LeaderElectionConfiguration{
		ResourceLock: "leases", ResourceName: "nestlet-agent",
		LeaseDuration: metav1.Duration{Duration: 15 * time.Second}, RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
		RetryPeriod: metav1.Duration{Duration: 2 * time.Second},
	}
	componentoptions.BindLeaderElectionFlags(&o.leaderElection, fs)
}
