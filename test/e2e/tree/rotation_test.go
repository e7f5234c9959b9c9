package tree

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestGatewayKeyRotatesWithTheCertificate: west signs node certificates
// for 2 minutes (TestMain), so west-2 renews its own about every 36 s and
// its gateway takes a new key each time. West learns the new key from
// west-2's virtual node, says so there, and west-2 opens its tunnel again
// at once; a client in east-1 reaches west-2's replica through it.
func TestGatewayKeyRotatesWithTheCertificate(t *testing.T) {
	if !shortCertificates {
		t.Skip("certificates live their default year while benchmarking")
	}
	ns := namespace(t)
	ctx := t.Context()
	answer, _ := webEastWest(t, ns)
	westNode := func() (string, api.GatewayParent, error) {
		n, err := env.Cluster("west").Client.CoreV1().Nodes().Get(ctx, "west-2", metav1.GetOptions{})
		if err != nil {
			return "", api.GatewayParent{}, err
		}
		var gp api.GatewayParent
		err = json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp)
		return n.Annotations[api.AnnotationGatewayKey], gp, err
	}
	before, _, err := westNode()
	require.NoError(t, err)
	require.NotEmpty(t, before, "west-2 publishes no gateway key")

	var after string
	var seen time.Time
	framework.Eventually(t, 2*time.Minute, "west-2's gateway key changes with its node certificate", func(context.Context) (bool, string) {
		k, _, err := westNode()
		if err == nil && k != before {
			after, seen = k, time.Now()
			return true, ""
		}
		return false, fmt.Sprint(k, err)
	})
	framework.Eventually(t, time.Minute, "west knows west-2 by its new key", func(context.Context) (bool, string) {
		k, gp, err := westNode()
		return err == nil && gp.PeerKey == k, fmt.Sprintf("published %s, known %s, %v", k, gp.PeerKey, err)
	})
	// West's peer named west-2 is now the new key's: a handshake time
	// other than 0 is one with the new key.
	var handshake float64
	handshakeRE := regexp.MustCompile(`nestlet_gateway_last_handshake_timestamp_seconds\{peer="west-2"\} (\S+)`)
	framework.Eventually(t, time.Minute, "west's gateway shakes hands with west-2's new key", func(context.Context) (bool, string) {
		resp, err := http.Get(tree.MetricsURL["west"])
		if err != nil {
			return false, err.Error()
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return false, err.Error()
		}
		m := handshakeRE.FindSubmatch(body)
		if m == nil {
			return false, "no handshake metric for west-2"
		}
		handshake, _ = strconv.ParseFloat(string(m[1]), 64)
		return handshake > 0, string(m[0])
	})
	at := time.Unix(0, int64(handshake*1e9))
	t.Logf("west-2's key changed from %.8s… to %.8s…; first handshake with the new key %s after the new key was seen on the virtual node",
		before, after, at.Sub(seen).Round(time.Millisecond))

	framework.Eventually(t, time.Minute, "west-2's replica answers the client in east-1 through the new tunnel", func(context.Context) (bool, string) {
		sides, _, last := askWeb(t, ns, answer, 1)
		return sides["west-2"] > 0, last
	})
	var last *v1alpha1.Target
	require.NoError(t, env.Cluster("west-2").WaitTarget(ctx, tree.Targets["west-2"], time.Minute, func(tg *v1alpha1.Target) bool {
		last = tg
		return launcher.TargetCondition(tg, v1alpha1.ConditionTunnel).Status == metav1.ConditionTrue
	}), "west-2's Tunnel condition: %+v", last)
}
