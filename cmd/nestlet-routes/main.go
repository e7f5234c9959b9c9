// Command nestlet-routes runs on every node of a cluster whose agent runs a
// gateway (the chart's DaemonSet): it routes the rest of the tree's pod
// CIDRs from its node to the node the gateway runs on, through a VXLAN
// interface (provider/noderoutes), so that the pods of every node, not only
// those of the gateway's, reach the other clusters.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/nftables"
	"github.com/spf13/pflag"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/command"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/provider/noderoutes"
)

type options struct {
	kubeconfig       string
	namespace        string
	nodeName         string
	daemonSet        string
	port, vni        int
	anySource        bool
	resync           time.Duration
	printPermissions bool
}

func main() {
	var o options
	fs := pflag.CommandLine
	fs.BoolVar(&o.printPermissions, "print-permissions", false, "print, as JSON, what the route agent does with the API of its cluster (what the chart grants its ServiceAccount) and exit")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (default: in-cluster config, or $KUBECONFIG)")
	fs.StringVar(&o.namespace, "namespace", api.DefaultNamespace, "the agent's namespace, where it publishes its gateway (ConfigMap "+noderoutes.ConfigMapName+")")
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default: $NODE_NAME)")
	fs.StringVar(&o.daemonSet, "daemonset-name", "", "the DaemonSet this route agent is a pod of, in --namespace: on exit the node keeps its interface, routes and table for the next route agent while the DaemonSet exists and would run a pod on this node again (an update), and loses them once it is gone (uninstall) or no longer selects the node (its labels or taints changed); empty: always removed on exit")
	fs.IntVar(&o.port, "vxlan-port", noderoutes.DefaultPort, "UDP port of the VXLAN between the nodes and the gateway's node (the same on every node)")
	fs.IntVar(&o.vni, "vxlan-vni", noderoutes.DefaultVNI, "VXLAN network identifier (the same on every node)")
	fs.BoolVar(&o.anySource, "vxlan-from-any", false, "accept VXLAN packets from any address (by default only from the cluster's nodes' InternalIP and ExternalIP addresses)")
	fs.DurationVar(&o.resync, "resync", 30*time.Second, "how often the interface and the routes are set again without a change")
	command.Main("nestlet-routes", fs, &o.printPermissions, noderoutes.Permissions, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	cfg, err := kubeclient.RESTConfig(o.kubeconfig, "")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
	if err != nil {
		return err
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	nat, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	a := &noderoutes.Applier{Handle: h, Port: o.port, VNI: o.vni, NAT: nat}
	return noderoutes.Run(ctx, client, a, noderoutes.Options{Namespace: o.namespace, NodeName: o.nodeName, Resync: o.resync, DaemonSet: o.daemonSet, AnySource: o.anySource})
}
