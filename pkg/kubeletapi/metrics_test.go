package kubeletapi

import (
	"bytes"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	return fams
}

func TestMergeMetrics(t *testing.T) {
	nodeA := parseMetrics(t, `# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 10 1000
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 100 1000
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="app-d"} 7 1000
pod_memory_working_set_bytes{namespace="ns",pod="stranger"} 9 1000
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="app-d"} 3 1000
# TYPE scrape_error gauge
scrape_error 0
`)
	nodeB := parseMetrics(t, `# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 5 2000
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 50 2000
`)
	parents := map[string]*corev1.Pod{"ns/app-d": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}}
	got := mergeMetrics([]map[string]*dto.MetricFamily{nodeA, nodeB}, parents)

	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range got {
		require.NoError(t, enc.Encode(f))
	}
	want := `# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="app"} 3 1000
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 15 2000
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 150 2000
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="app"} 7 1000
`
	require.Equal(t, want, buf.String())
}
