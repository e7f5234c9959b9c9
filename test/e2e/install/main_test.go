// Package install tests Nestlet installed as an operator installs it, in
// clusters made elsewhere:
//
//	root <- east <- east-1
//	root, east: one real node each, for Nestlet's own pods
//	east-1: one real node, region east, where the workloads run
//
// Every cluster is a host of its own on the simulated WAN, each child
// behind NAT, each with a real node (kubelet, containerd, kube-proxy, CoreDNS) and no
// Nestlet process on its host: Nestlet gets into each cluster only through
// `helm install` of charts/nestlet, with the image `make images` builds
// (hack/images.sh), which the real nodes import. The agent, the scheduler
// and the proxy then run as pods on the real nodes, under the chart's
// ServiceAccounts and RBAC.
//
// Each parent's proxy is published as an operator publishes a NodePort
// Service: the chart's Service of type NodePort, and a load balancer on the
// parent's WAN address in front of the real node's nodePorts
// (launcher.Host.Publish). Its serving certificate is issued by the
// parent's cluster CA, which the API server verifies kubelet endpoints
// with.
//
// On a machine that cannot run real nodes the tests skip and say why;
// .ci/run makes that a failure (framework.RequireRealNodesEnv).
package install

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env *launcher.Environment
	// image is Nestlet's image, which every real node imports.
	image framework.Image
)

const (
	region   = "east"
	rootNode = "root-node-1"
	// rootNode2 is the root's second node, where its agent does not run:
	// its pods reach the tree through the route agents.
	rootNode2 = "root-node-2"
	eastNode  = "east-node-1"
	leafNode  = "east-1-node-1"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunRealMain(m, start))
}

// start builds the image, starts the clusters and installs Nestlet in
// each with helm.
func start() (teardown func(failed bool), err error) {
	dir, err := os.MkdirTemp("", "nestlet-image-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if image, err = framework.BuildImage(dir); err != nil {
		return nil, err
	}
	images := map[string]string{image.Ref: image.Archive}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err = launcher.Start(ctx, launcher.Config{Network: launcher.NetworkHosts}, launcher.Spec{Clusters: []launcher.ClusterOptions{
		{Name: "root", StockScheduler: true, RealNodes: []launcher.RealNodeOptions{{Name: rootNode, KubeProxy: true, Images: images},
			{Name: rootNode2, KubeProxy: true, Images: images}}},
		{Name: "east", Region: region, StockScheduler: true, RealNodes: []launcher.RealNodeOptions{{Name: eastNode, KubeProxy: true, Images: images}}},
		{Name: "east-1", Region: region, StockScheduler: true, RealNodes: []launcher.RealNodeOptions{{Name: leafNode, KubeProxy: true, Images: images,
			Labels: map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": region + "-a"}}}},
	}})
	if err != nil {
		return nil, err
	}
	teardown = func(failed bool) {
		if failed {
			dumpComponentLogs()
		}
		env.Cleanup(failed, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
		_ = os.RemoveAll(dir)
	}
	if err := installTree(ctx); err != nil {
		teardown(true)
		return nil, err
	}
	return teardown, nil
}
