package podcidrs

import (
	"math/big"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

func TestParse(t *testing.T) {
	got, err := Parse(" 10.2.0.0/16, 10.1.0.5/24,fd00:1::/48,10.2.0.0/16")
	require.NoError(t, err)
	assert.Equal(t, "10.1.0.0/24,10.2.0.0/16,fd00:1::/48", Format(got), "masked, in order, once each")
	for _, bad := range []string{"", " , ", "10.1.0.0", "ten/8"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}

func TestSet(t *testing.T) {
	p := func(s string) []netip.Prefix { return Strings([]string{s}) }
	all := SetOf(p("10.0.0.0/8"))
	some := SetOf(p("10.1.0.0/16"), p("192.168.0.0/24"))
	assert.Equal(t, "10.1.0.0/16", Format(all.Intersect(some).Prefixes()))
	assert.Equal(t, "10.0.0.0/16,10.2.0.0/15,10.4.0.0/14,10.8.0.0/13,10.16.0.0/12,10.32.0.0/11,10.64.0.0/10,10.128.0.0/9", Format(all.Minus(some).Prefixes()))
	assert.Equal(t, "10.0.0.0/8,192.168.0.0/24", Format(all.Union(some).Prefixes()))
	assert.True(t, SetOf().Empty())
	assert.True(t, Set{}.Empty())
	v4, v6 := SetOf(p("10.0.0.0/16"), p("10.1.0.0/24"), p("fd00::/48"), p("fd01::1/128")).Size()
	assert.Equal(t, big.NewInt(65536+256), v4)
	assert.Equal(t, big.NewInt(65536+1), v6, "a /48 is 65,536 /64s; an address less than a /64 counts as one")
}

func TestGrants(t *testing.T) {
	changed := 0
	g := NewGrants(nil, func() { changed++ })
	g.Set(map[string]string{"east": "10.1.0.0/16", "west": "nope"})
	assert.Equal(t, 1, changed)
	ps, ok, err := g.Of("east")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "10.1.0.0/16", Format(ps))
	_, ok, err = g.Of("west")
	assert.True(t, ok, "a grant that does not parse is a grant (of nothing), not the pool")
	assert.ErrorContains(t, err, "pod CIDRs granted to west")
	_, ok, err = g.Of("north")
	assert.False(t, ok)
	assert.NoError(t, err)
	assert.Equal(t, []string{"east"}, keys(g.All()))
	assert.True(t, g.HasSynced())
	var nilGrants *Grants
	_, ok, _ = nilGrants.Of("east")
	assert.False(t, ok)
}

func keys(m map[string][]netip.Prefix) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRecord(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	require.NoError(t, Record(ctx, client, "east", Strings([]string{"10.1.0.0/16"}), "test"))
	require.NoError(t, Record(ctx, client, "west", Strings([]string{"10.2.0.0/16", "fd00:2::/48"}), "test"))
	require.NoError(t, Record(ctx, client, "east", nil, "test"))
	require.NoError(t, Record(ctx, client, "north", nil, "test"), "removing what is not there")
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.PodCIDRGrantsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"west": "10.2.0.0/16,fd00:2::/48"}, cm.Data)
}
