// Command nestlet-scheduler is kube-scheduler with Nestlet's plugins
// (Watermark, SummaryAffinity, LoopGuard, PathLength, TreeSpread, TreeAffinity,
// Reservation, NamespacePolicy) registered. Run it with the
// profile in scheduler-plugins/profile/scheduler-config.yaml.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

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
