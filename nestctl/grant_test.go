package nestctl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

func TestGrant(t *testing.T) {
	raw, err := api.FormatSummary(api.Summary{Cluster: "east", Covered: []string{"east"}, PodCIDRs: []string{"10.1.0.0/24", "10.7.0.0/24"}})
	require.NoError(t, err)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: map[string]string{
		api.AnnotationSummary: raw, api.AnnotationPodCIDRsRefused: "not granted: 10.7.0.0/24 (held by cluster west)"}}})
	ctx := t.Context()

	out, err := Grant(ctx, client, "east", GrantOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"east has no grant of its own: it may claim a share of this cluster's pool (the agent's --pod-cidr-pool), if it has one",
		"claims:  10.1.0.0/24,10.7.0.0/24", "refused: not granted: 10.7.0.0/24 (held by cluster west)"}, out)

	out, err = Grant(ctx, client, "east", GrantOptions{Set: "10.1.0.0/16"})
	require.NoError(t, err)
	assert.Contains(t, out, "granted: 10.1.0.0/16")
	out, err = Grant(ctx, client, "east", GrantOptions{Claimed: true})
	require.NoError(t, err)
	assert.Contains(t, out, "granted: 10.1.0.0/24,10.7.0.0/24")
	// What another child holds of the pool, or is granted, is not.
	_, err = client.CoreV1().ConfigMaps(api.DefaultNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.ChildrenConfigMap},
		Data: map[string]string{"west": "10.7.0.0/24", "east": ""}}, metav1.CreateOptions{})
	require.NoError(t, err)
	out, err = Grant(ctx, client, "east", GrantOptions{Claimed: true})
	require.NoError(t, err)
	assert.Contains(t, out, "granted: 10.1.0.0/24")
	assert.Contains(t, out, "not granted, held by another child or this cluster's own: 10.7.0.0/24")
	out, err = Grant(ctx, client, "north", GrantOptions{Set: "10.9.0.0/16"})
	require.NoError(t, err, "a child yet to join may be granted")
	assert.Contains(t, out, "north has no virtual node here (yet)")
	_, err = Grant(ctx, client, "north", GrantOptions{Claimed: true})
	assert.ErrorContains(t, err, "claims no pod CIDRs")
	_, err = Grant(ctx, client, "east", GrantOptions{Set: "ten"})
	assert.Error(t, err)

	_, err = Grant(ctx, client, "east", GrantOptions{Remove: true})
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.PodCIDRGrantsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"north": "10.9.0.0/16"}, cm.Data)
}
