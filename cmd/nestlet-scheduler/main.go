// Command nestlet-scheduler is kube-scheduler with Nestlet's plugins
// (Watermark, SummaryAffinity, LoopGuard, PathLength, TreeSpread, TreeAffinity,
// Reservation, NamespacePolicy) registered. Run it with the
// profile in scheduler-plugins/profile/scheduler-config.yaml.
package main

import (
	"fmt"
	"os"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"

	// The plugins' arguments, decoded, defaulted and converted by
	// kube-scheduler's configuration scheme as the in-tree plugins' are.
	_ "github.com/nestlet/nestlet/scheduler-plugins/apis/config/scheme"
	"github.com/nestlet/nestlet/scheduler-plugins/loopguard"
	"github.com/nestlet/nestlet/scheduler-plugins/namespacepolicy"
	"github.com/nestlet/nestlet/scheduler-plugins/pathlength"
	"github.com/nestlet/nestlet/scheduler-plugins/reservation"
	"github.com/nestlet/nestlet/scheduler-plugins/summaryaffinity"
	"github.com/nestlet/nestlet/scheduler-plugins/treeaffinity"
	"github.com/nestlet/nestlet/scheduler-plugins/treespread"
	"github.com/nestlet/nestlet/scheduler-plugins/watermark"
)

func main() {
	if err := defaultGates(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(watermark.Name, watermark.New),
		app.WithPlugin(summaryaffinity.Name, summaryaffinity.New),
		app.WithPlugin(loopguard.Name, loopguard.New),
		app.WithPlugin(pathlength.Name, pathlength.New),
		app.WithPlugin(treespread.Name, treespread.New),
		app.WithPlugin(treeaffinity.Name, treeaffinity.New),
		app.WithPlugin(reservation.Name, reservation.New),
		app.WithPlugin(namespacepolicy.Name, namespacepolicy.New),
	)
	os.Exit(cli.Run(cmd))
}

// defaultGates sets this scheduler's defaults of kube-scheduler's feature
// gates; --feature-gates, read later, overrides them. Kubernetes 1.35
// writes status.nominatedNodeName on every pod that waits at Permit before
// it is bound (NominatedNodeNameForExpectation, beta, on), for autoscalers
// to see where it goes. Every pod sent to a virtual node waits there while
// the child reserves a place for it: one more write on its way at every
// level, on the pod's critical path (docs/scheduling.md). Off here.
func defaultGates() error {
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.NominatedNodeNameForExpectation): false})
}
