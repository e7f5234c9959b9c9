package tree

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestRevokedChildIsCutOff: west cuts west-1 off with `nestctl revoke`.
// West-1's virtual node is deleted, and again each time west-1 brings it
// back; its next renewal (west signs for 2 minutes) is denied, saying
// why. Once the revocation is lifted, west-1 is back by itself.
func TestRevokedChildIsCutOff(t *testing.T) {
	namespace(t) // the tree is whole
	ctx := t.Context()
	west := env.Cluster("west")
	before, err := west.Client.CoreV1().Nodes().Get(ctx, "west-1", metav1.GetOptions{})
	require.NoError(t, err)
	// From the node's current version: no event for what exists already.
	nodes, err := west.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "west-1").String(), ResourceVersion: before.ResourceVersion})
	require.NoError(t, err)
	defer nodes.Stop()
	revoked := time.Now()
	out, err := west.Nestctl(ctx, "revoke", "west-1", "--reason=e2e")
	require.NoError(t, err, out)
	// The node is deleted by nestctl, or by west's agent first.
	require.Contains(t, out, "west-1 revoked")
	lifted := false
	lift := func() {
		cm, err := west.Client.CoreV1().ConfigMaps("kube-system").Get(context.WithoutCancel(ctx), api.RevokedConfigMap, metav1.GetOptions{})
		if err == nil {
			delete(cm.Data, "west-1")
			_, err = west.Client.CoreV1().ConfigMaps("kube-system").Update(context.WithoutCancel(ctx), cm, metav1.UpdateOptions{})
		}
		require.NoError(t, err)
		lifted = true
	}
	t.Cleanup(func() {
		if !lifted {
			lift()
		}
	})

	// West-1's agent registers its node again; west's deletes it.
	cycle, deadline := []watch.EventType{}, time.After(2*time.Minute)
	backAndDeleted := func() bool {
		n := len(cycle)
		return n >= 3 && cycle[0] == watch.Deleted && cycle[n-2] == watch.Added && cycle[n-1] == watch.Deleted
	}
	for !backAndDeleted() {
		select {
		case ev, ok := <-nodes.ResultChan():
			require.True(t, ok, "the watch of west's nodes ended")
			if ev.Type == watch.Added || ev.Type == watch.Deleted {
				cycle = append(cycle, ev.Type)
			}
		case <-deadline:
			require.FailNow(t, "west-1's node never came back to be deleted again", "events: %v", cycle)
		}
	}
	t.Logf("west-1's node came back and was deleted again %s after the revocation (events %v)", time.Since(revoked).Round(time.Millisecond), cycle)

	framework.Eventually(t, 2*time.Minute, "west-1's renewal denied", func(context.Context) (bool, string) {
		list, err := west.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, csr := range list.Items {
			if csr.Spec.Username != "system:node:west-1" || csr.CreationTimestamp.Time.Before(revoked.Add(-time.Second)) {
				continue
			}
			for _, c := range csr.Status.Conditions {
				if c.Type == certificatesv1.CertificateDenied && strings.Contains(c.Message, `node "west-1" was revoked`) {
					t.Logf("%s denied: %s", csr.Name, c.Message)
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d requests, none of west-1's denied yet", len(list.Items))
	})

	lift()
	framework.Eventually(t, 3*time.Minute, "west-1 back in west once lifted", func(context.Context) (bool, string) {
		n, err := west.Client.CoreV1().Nodes().Get(ctx, "west-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return launcher.NodeReady(n) && !hasTaint(n, corev1.TaintNodeNotReady), fmt.Sprint(n.Status.Conditions)
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
