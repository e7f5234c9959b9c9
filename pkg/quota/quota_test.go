package quota

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

func TestParseAndFormat(t *testing.T) {
	q, err := Parse(" memory=16Gi, cpu=8 ,pods=220")
	require.NoError(t, err)
	require.Equal(t, "cpu=8,memory=16Gi,pods=220", Format(q))
	for _, bad := range []string{"", "cpu", "=8", "cpu=lots", "cpu=-1", ","} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

func TestExceedsAndClamp(t *testing.T) {
	claimed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	q := must(Parse("cpu=8,memory=16Gi,ephemeral-storage=1Ti"))
	require.Equal(t, []string{"cpu 16 > 8"}, Exceeds(claimed, q))
	got := Clamp(claimed, q)
	require.Equal(t, "cpu=8,memory=8Gi,pods=110", Format(got), "each resource at most its quota; those without a quota as claimed")
	require.Equal(t, "16", claimed.Cpu().String(), "the claim itself is left alone")
	within := must(Parse("cpu=4"))
	require.Equal(t, "cpu=4", Format(Clamp(within, q)), "within the quota: as it is")
}

// A quota that does not parse is an error, not "no quota".
func TestWatcherFailsClosed(t *testing.T) {
	w := New(nil)
	w.Set(map[string]string{"east": "cpu=4", "west": "cpu=many"})
	q, ok, err := w.Of("east")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "cpu=4", Format(q))
	_, ok, err = w.Of("west")
	require.ErrorContains(t, err, "quota of west in configmap kube-system/nestlet-quotas")
	require.False(t, ok)
	_, ok, err = w.Of("north")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestRecord(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	wrote, err := Record(ctx, client, "east", must(Parse("cpu=4")), true, "test")
	require.NoError(t, err)
	require.True(t, wrote, "creates the ConfigMap")
	wrote, err = Record(ctx, client, "east", must(Parse("cpu=64")), true, "test")
	require.NoError(t, err)
	require.False(t, wrote, "only if absent: the recorded quota stays")
	wrote, err = Record(ctx, client, "west", must(Parse("cpu=2")), true, "test")
	require.NoError(t, err)
	require.True(t, wrote)
	wrote, err = Record(ctx, client, "east", must(Parse("cpu=8")), false, "test")
	require.NoError(t, err)
	require.True(t, wrote, "set: replaces")
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.QuotasConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"east": "cpu=8", "west": "cpu=2"}, cm.Data)
}

func must(q corev1.ResourceList, err error) corev1.ResourceList {
	if err != nil {
		panic(err)
	}
	return q
}
