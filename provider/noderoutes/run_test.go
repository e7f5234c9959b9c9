package noderoutes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

// A route agent that exits leaves the node's interface to its successor
// while its DaemonSet exists and would run a pod on the node again (a
// rolling update: no gap in the node's traffic), and removes it once the
// DaemonSet is gone or going (helm uninstall), no longer selects the node
// (its labels or taints changed: no successor would come), when the node
// is gone, or when it runs outside a DaemonSet.
func TestRunHandsOverWhileItsDaemonSetExists(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace and interfaces")
	}
	const ns, dsName = "nestlet-system", "nestlet-routes"
	netnsName := fmt.Sprintf("nrt-run-%d", os.Getpid())
	ip(t, "netns", "add", netnsName)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", netnsName).Run() })
	a := applier(t, netnsName)
	now := metav1.Now()
	ds := func(spec corev1.PodSpec) *appsv1.DaemonSet {
		spec.HostNetwork = true
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: dsName, Namespace: ns},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	}
	node := func(taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/os": "linux"}},
			Spec: corev1.NodeSpec{Taints: taints, Unschedulable: len(taints) > 0 && taints[0].Key == corev1.TaintNodeUnschedulable}}
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, c := range []struct {
		name      string
		daemonSet string
		objects   []runtime.Object
		kept      bool
	}{
		{name: "its DaemonSet exists", daemonSet: dsName, kept: true,
			objects: []runtime.Object{ds(corev1.PodSpec{}), node()}},
		{name: "its DaemonSet still selects the node", daemonSet: dsName, kept: true,
			objects: []runtime.Object{ds(corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/os": "linux"}}), node()}},
		{name: "the node is cordoned", daemonSet: dsName, kept: true,
			objects: []runtime.Object{ds(corev1.PodSpec{}), node(corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})}},
		{name: "its DaemonSet tolerates the node's taint", daemonSet: dsName, kept: true,
			objects: []runtime.Object{ds(corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}}}),
				node(dedicated)}},
		{name: "its DaemonSet no longer selects the node", daemonSet: dsName,
			objects: []runtime.Object{ds(corev1.PodSpec{NodeSelector: map[string]string{"nestlet.io/routes": "on"}}), node()}},
		{name: "its DaemonSet does not tolerate the node's taint", daemonSet: dsName,
			objects: []runtime.Object{ds(corev1.PodSpec{}), node(dedicated)}},
		{name: "the node is gone", daemonSet: dsName,
			objects: []runtime.Object{ds(corev1.PodSpec{})}},
		{name: "its DaemonSet is being deleted", daemonSet: dsName,
			objects: []runtime.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: dsName, Namespace: ns,
				DeletionTimestamp: &now, Finalizers: []string{"orphan"}}}}},
		{name: "its DaemonSet is gone", daemonSet: dsName},
		{name: "another DaemonSet exists", daemonSet: dsName,
			objects: []runtime.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}}},
		{name: "not run by a DaemonSet",
			objects: []runtime.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: dsName, Namespace: ns}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Each case starts from a node without the interface, even
			// after a case that failed with it left.
			t.Cleanup(func() { _ = a.Remove() })
			// This node runs the gateway: the route agent holds the hub.
			objects := append([]runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns},
				Data: map[string]string{KeyNode: "n1", KeyRoutes: "10.99.0.0/24"}}}, c.objects...)
			client := fake.NewClientset(objects...)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, client, a, Options{Namespace: ns, NodeName: "n1", DaemonSet: c.daemonSet, Resync: time.Hour})
			}()
			err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				_, err := a.Handle.LinkByName(Device)
				return err == nil, nil
			})
			require.NoError(t, err, "the route agent made no %s", Device)
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			_, err = a.Handle.LinkByName(Device)
			if c.kept {
				require.NoError(t, err, "the interface was removed while the DaemonSet still runs the node's route agent")
				require.NoError(t, a.Remove())
			} else {
				require.Error(t, err, "the interface is left behind")
			}
		})
	}
}

// The route agent's node cache keeps what it reads of a Node, its name and
// addresses, and nothing else.
func TestAddressesOnly(t *testing.T) {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	got, err := addressesOnly(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		Status: corev1.NodeStatus{Addresses: addrs, Images: []corev1.ContainerImage{{Names: []string{"big"}}}}})
	require.NoError(t, err)
	require.Equal(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7"}, Status: corev1.NodeStatus{Addresses: addrs}}, got)
	require.Equal(t, "other", must(addressesOnly("other")))
	// A child's virtual node: its addresses are its own words, not read.
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{api.LabelCluster: "east"}}, Status: corev1.NodeStatus{Addresses: addrs}},
		{ObjectMeta: metav1.ObjectMeta{Name: "east"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{api.ProviderTaint()}}, Status: corev1.NodeStatus{Addresses: addrs}},
	} {
		require.Equal(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east"}}, must(addressesOnly(n)))
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}
