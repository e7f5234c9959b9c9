package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkStartClusters measures the time to start 1 and 3 clusters
// concurrently (etcd included, each cluster with one Ready kwok node) and
// the resident memory of one cluster's processes.
//
//	go test ./test/integration -run '^$' -bench StartClusters -benchtime 1x
func BenchmarkStartClusters(b *testing.B) {
	// Our programs (nestlet-scheduler runs in every cluster) come from
	// make build.
	if _, err := launcher.FindNestletBinaries(""); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			var spec launcher.Spec
			for i := range n {
				name := fmt.Sprintf("c%d", i)
				spec.Clusters = append(spec.Clusters, launcher.ClusterOptions{Name: name, Nodes: []launcher.NodeOptions{{Name: name + "-node"}}})
			}
			var rss int64
			var took time.Duration
			for b.Loop() {
				start := time.Now()
				env := framework.StartForTest(b, spec)
				took = time.Since(start)
				b.StopTimer()
				rss = 0
				for _, p := range env.Clusters()[0].Processes() {
					r, err := framework.RSSBytes(p)
					if err != nil {
						b.Fatal(err)
					}
					rss += r
				}
				env.Cleanup(false, b.Logf)
				b.StartTimer()
			}
			b.ReportMetric(float64(rss)/(1<<20), "MiB-rss/cluster")
			b.ReportMetric(took.Seconds(), "start-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
