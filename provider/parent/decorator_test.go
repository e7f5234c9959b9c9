package parent

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/queue"
)

var (
	providerTaint = corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "nestlet", Effect: corev1.TaintEffectNoSchedule}
	unreachable   = corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}
	notReady      = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	controlPlane  = corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	cloudInit     = corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}
)

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func TestMergeTaints(t *testing.T) {
	gpu := taint("example.com/gpu", "true", corev1.TaintEffectNoSchedule)
	team := taint("example.com/team", "a", corev1.TaintEffectPreferNoSchedule)
	stampedProvider := providerTaint
	stampedProvider.TimeAdded = &metav1.Time{Time: time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)}
	tests := []struct {
		name     string
		current  []corev1.Taint
		desired  []corev1.Taint
		applied  []string // keys applied from an earlier desired list
		want     []corev1.Taint
		wantSame bool // current is returned as it is
	}{
		{
			name:    "new node gets the provider taint and the desired ones",
			current: nil,
			desired: []corev1.Taint{gpu},
			want:    []corev1.Taint{providerTaint, gpu},
		},
		{
			name:    "system taints are kept after the desired ones",
			current: []corev1.Taint{providerTaint, unreachable, notReady, controlPlane, cloudInit},
			desired: []corev1.Taint{gpu},
			want:    []corev1.Taint{providerTaint, gpu, unreachable, notReady, controlPlane, cloudInit},
		},
		{
			name:    "a desired taint replaces the current one of its key",
			current: []corev1.Taint{providerTaint, taint("example.com/gpu", "false", corev1.TaintEffectNoExecute), unreachable},
			desired: []corev1.Taint{gpu},
			want:    []corev1.Taint{providerTaint, gpu, unreachable},
		},
		{
			name:    "a taint no longer desired is dropped",
			current: []corev1.Taint{providerTaint, gpu, team, unreachable},
			desired: []corev1.Taint{team},
			applied: []string{"example.com/gpu", "example.com/team"},
			want:    []corev1.Taint{providerTaint, team, unreachable},
		},
		{
			name:    "no desired taints leave the provider and system taints",
			current: []corev1.Taint{providerTaint, gpu, notReady},
			desired: nil,
			applied: []string{"example.com/gpu"},
			want:    []corev1.Taint{providerTaint, notReady},
		},
		{
			name:    "an admin's taint stays",
			current: []corev1.Taint{providerTaint, taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute), gpu},
			desired: nil,
			applied: []string{"example.com/gpu"},
			want:    []corev1.Taint{providerTaint, taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute)},
		},
		{
			name:     "a taint of unknown origin stays (decorated before applied keys were recorded)",
			current:  []corev1.Taint{providerTaint, gpu},
			desired:  nil,
			want:     []corev1.Taint{providerTaint, gpu},
			wantSame: true,
		},
		{
			name:    "a changed provider taint is restored",
			current: []corev1.Taint{taint("virtual-kubelet.io/provider", "other", corev1.TaintEffectNoSchedule), gpu},
			desired: []corev1.Taint{gpu},
			want:    []corev1.Taint{providerTaint, gpu},
		},
		{
			name:    "equal taints in another order are put in order",
			current: []corev1.Taint{gpu, providerTaint},
			desired: []corev1.Taint{gpu},
			want:    []corev1.Taint{providerTaint, gpu},
		},
		{
			name:     "current is returned unchanged when equal",
			current:  []corev1.Taint{stampedProvider, gpu, unreachable},
			desired:  []corev1.Taint{gpu},
			want:     []corev1.Taint{stampedProvider, gpu, unreachable},
			wantSame: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]corev1.Taint(nil), tt.current...)
			got := mergeTaints(api.ProviderTaint(), tt.current, tt.desired, tt.applied)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("mergeTaints() mismatch (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, tt.current); d != "" {
				t.Errorf("mergeTaints() changed current (-want +got):\n%s", d)
			}
			if tt.wantSame {
				require.NotEmpty(t, got)
				assert.Same(t, &tt.current[0], &got[0], "current not returned as it is")
			}
		})
	}
}

func TestDecoratorSync(t *testing.T) {
	gpu := taint("example.com/gpu", "true", corev1.TaintEffectNoSchedule)
	node := func(labels, annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "child", Labels: labels, Annotations: annotations},
			Spec:       corev1.NodeSpec{Taints: taints},
		}
	}
	desiredGPU := map[string]string{"nestlet.io/desired-taints": `[{"key":"example.com/gpu","value":"true","effect":"NoSchedule"}]`}
	// checked adds the pod CIDR check the decorator writes (no pod CIDRs
	// here: nothing overlaps).
	checked := func(a map[string]string) map[string]string {
		out := map[string]string{api.AnnotationPodCIDROverlap: api.PodCIDROverlapNone, api.AnnotationPodCIDRsRefused: api.PodCIDROverlapNone}
		maps.Copy(out, parentAnnotations())
		for k, v := range a {
			out[k] = v
		}
		if raw := a[api.AnnotationDesiredTaints]; raw != "{" {
			out[api.AnnotationAppliedTaints] = `[]`
			if strings.Contains(raw, "example.com/gpu") {
				out[api.AnnotationAppliedTaints] = `["example.com/gpu"]`
			}
		}
		return out
	}
	// named adds the hostname label the decorator keeps equal to the
	// node's name.
	named := func(l map[string]string) map[string]string {
		out := map[string]string{corev1.LabelHostname: "child"}
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	appliedGPU := map[string]string{"nestlet.io/desired-taints": "null", api.AnnotationAppliedTaints: `["example.com/gpu"]`}
	// An admin's taint, and the child asking for one of its key: the
	// keys applied are recorded, this one not among them.
	quarantine := taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute)
	desiredQuarantine := map[string]string{"nestlet.io/desired-taints": `[{"key":"example.com/quarantine","value":"false","effect":"PreferNoSchedule"}]`,
		api.AnnotationAppliedTaints: `[]`}
	desiredUnreachable := map[string]string{"nestlet.io/desired-taints": `[{"key":"node.kubernetes.io/unreachable","effect":"PreferNoSchedule"}]`}
	tests := []struct {
		name    string
		node    *corev1.Node // in the lister and the API
		want    *corev1.Node // the update; nil for none
		wantErr string
	}{
		{
			name: "role label and desired taints are added",
			node: node(map[string]string{"nestlet.io/cluster": "child"}, desiredGPU, providerTaint, unreachable),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(desiredGPU), providerTaint, gpu, unreachable),
		},
		{
			name: "a node without labels gets the role label",
			node: node(nil, desiredGPU, providerTaint, gpu),
			want: node(named(map[string]string{"node-role.kubernetes.io/cluster": ""}), checked(desiredGPU), providerTaint, gpu),
		},
		{
			name: "taints no longer desired are removed",
			node: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), appliedGPU, providerTaint, gpu, notReady),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}),
				checked(map[string]string{"nestlet.io/desired-taints": "null"}), providerTaint, notReady),
		},
		{
			name: "an admin's taint stays",
			node: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), appliedGPU,
				providerTaint, taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute)),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}),
				checked(map[string]string{"nestlet.io/desired-taints": "null"}), providerTaint, taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute)),
		},
		{
			name: "a child taking another node's hostname is renamed",
			node: node(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": "", corev1.LabelHostname: "control-plane-1"}, checked(nil), providerTaint),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(nil), providerTaint),
		},
		{
			name: "without the annotation the provider taint is still put back, the rest left alone",
			node: node(map[string]string{"nestlet.io/cluster": "child"}, nil, gpu),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(nil), providerTaint, gpu),
		},
		{
			name: "a node registered again without the provider taint gets it back",
			node: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(map[string]string{"nestlet.io/desired-taints": "null"})),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(map[string]string{"nestlet.io/desired-taints": "null"}), providerTaint),
		},
		{
			name: "a leaving mark of another cluster is not a leave",
			node: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}),
				checked(map[string]string{api.AnnotationClusterUID: "u1", api.AnnotationLeaving: "u2"}), providerTaint),
		},
		{
			name: "an up-to-date node is not updated",
			node: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(desiredGPU), providerTaint, gpu, unreachable),
		},
		{
			name: "a desired taint of an admin's key leaves the admin's",
			node: node(map[string]string{"nestlet.io/cluster": "child"}, desiredQuarantine, providerTaint, quarantine),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(desiredQuarantine),
				providerTaint, quarantine),
		},
		{
			name: "a desired taint of Kubernetes' own key leaves Kubernetes'",
			node: node(map[string]string{"nestlet.io/cluster": "child"}, desiredUnreachable, providerTaint, unreachable),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}), checked(desiredUnreachable),
				providerTaint, unreachable),
		},
		{
			// Fails closed: the provider taint, the role and the hostname
			// put back, the taints applied before kept as they are.
			name: "a bad annotation changes no taint of the child's and still restores Nestlet's",
			node: node(map[string]string{"nestlet.io/cluster": "child"},
				map[string]string{"nestlet.io/desired-taints": "{", api.AnnotationAppliedTaints: `["example.com/gpu"]`}, gpu),
			want: node(named(map[string]string{"nestlet.io/cluster": "child", "node-role.kubernetes.io/cluster": ""}),
				checked(map[string]string{"nestlet.io/desired-taints": "{", api.AnnotationAppliedTaints: `["example.com/gpu"]`}), providerTaint, gpu),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.node)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			require.NoError(t, indexer.Add(tt.node))
			d := &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0", "::/0")}

			wait, err := d.sync(t.Context(), "child")
			require.Zero(t, wait)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}

			var wantActions []k8stesting.Action
			switch {
			case tt.want != nil && reflect.DeepEqual(tt.want.Spec.Taints, tt.node.Spec.Taints):
				// Labels and annotations only: a merge patch.
				wantActions = append(wantActions, k8stesting.NewRootPatchAction(corev1.SchemeGroupVersion.WithResource("nodes"), "child", types.MergePatchType, nil))
			case tt.want != nil:
				wantActions = append(wantActions, k8stesting.NewRootUpdateAction(corev1.SchemeGroupVersion.WithResource("nodes"), tt.want))
			}
			if d := cmp.Diff(actionSummaries(wantActions), actionSummaries(client.Actions())); d != "" {
				t.Errorf("actions mismatch (-want +got):\n%s", d)
			}
			if tt.want != nil {
				got, err := client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
				require.NoError(t, err)
				if d := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields", "ResourceVersion")); d != "" {
					t.Errorf("updated node mismatch (-want +got):\n%s", d)
				}
			}
		})
	}
}

func TestPodCIDROverlap(t *testing.T) {
	summaryNode := func(name string, covered, cidrs []string) *corev1.Node {
		raw, err := api.FormatSummary(api.Summary{Cluster: name, Covered: covered, PodCIDRs: cidrs})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: raw}}}
	}
	realNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}}}
	east := summaryNode("east", []string{"east", "shared"}, []string{"10.244.0.0/16"})
	west := summaryNode("west", []string{"west"}, []string{"10.244.5.0/24", "10.2.0.0/16"})
	west2 := summaryNode("west2", []string{"west2", "shared"}, []string{"10.244.0.0/16"}) // shares a cluster with east
	local := summaryNode("onlocal", []string{"onlocal"}, []string{"10.1.0.0/16"})
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{realNode, east, west, west2, local} {
		require.NoError(t, indexer.Add(n))
	}
	lister := corelisters.NewNodeLister(indexer)
	cache := &cidrCache{}
	require.Equal(t, "10.244.0.0/16 overlaps 10.244.5.0/24 of cluster west", podCIDROverlap(east, lister, cache), "a shared descendant is no conflict")
	require.Equal(t, "10.1.0.0/16 overlaps 10.1.0.0/24 of node local", podCIDROverlap(local, lister, cache))
	require.Equal(t, api.PodCIDROverlapNone, podCIDROverlap(summaryNode("far", []string{"far"}, []string{"10.9.0.0/16"}), lister, cache))
	require.Equal(t, api.PodCIDROverlapNone, podCIDROverlap(summaryNode("none", []string{"none"}, nil), lister, cache))
	// Two Targets of one cluster (its kube-system UID on both nodes) are
	// one pod network under two names: no conflict between them, while
	// a clash with another cluster is still named.
	twin := func(name string) *corev1.Node {
		n := summaryNode(name, []string{name}, []string{"10.244.5.0/24"})
		n.Annotations[api.AnnotationClusterUID] = "uid-of-twins"
		return n
	}
	require.NoError(t, indexer.Add(twin("twin-a")))
	require.Equal(t, "10.244.5.0/24 overlaps 10.244.0.0/16 of cluster east; 10.244.5.0/24 overlaps 10.244.5.0/24 of cluster west; 10.244.5.0/24 overlaps 10.244.0.0/16 of cluster west2",
		podCIDROverlap(twin("twin-b"), lister, cache))
	require.NoError(t, indexer.Delete(twin("twin-a")))
	// A changed summary is read again, not taken from the cache.
	moved := summaryNode("east", []string{"east", "shared"}, []string{"10.9.0.0/16"})
	require.NoError(t, indexer.Update(moved))
	require.Equal(t, api.PodCIDROverlapNone, podCIDROverlap(moved, lister, cache))
}

// Children with the same pod CIDR joining one after another: the oldest
// clashes are named, so a description that is full does not change when
// another joins (each join would otherwise rewrite every other child).
func TestPodCIDROverlapIsStableAsChildrenJoin(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	lister := corelisters.NewNodeLister(indexer)
	cidrs := &cidrCache{}
	base := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	child := func(i int) *corev1.Node {
		name := fmt.Sprintf("kind-%d", i)
		raw, err := api.FormatSummary(api.Summary{Cluster: name, Covered: []string{name}, PodCIDRs: []string{"10.244.0.0/16"}})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: raw}, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(i) * time.Second))}}
	}
	first := child(0)
	var before string
	for i := range 12 {
		require.NoError(t, indexer.Add(child(i)))
		got := podCIDROverlap(first, lister, cidrs)
		if i > maxClashes+1 { // from the second past the named ones
			require.Equal(t, before, got, "joining kind-%d changed kind-0's description", i)
			require.True(t, strings.HasSuffix(got, "; and more"), got)
			require.Equal(t, maxClashes+1, len(strings.Split(got, "; ")))
			require.True(t, strings.HasPrefix(got, "10.244.0.0/16 overlaps 10.244.0.0/16 of cluster kind-1;"), got)
		}
		before = got
	}
}

// A child that leaves marks its node with its cluster UID: the parent's
// agent deletes that node.
func TestDecoratorDeletesALeavingChildsNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", UID: "n1", Labels: map[string]string{api.LabelCluster: "child"},
		Annotations: map[string]string{api.AnnotationClusterUID: "u1", api.AnnotationLeaving: "u1"}}}
	client := fake.NewClientset(n)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(n))
	d := &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0", "::/0")}
	_, err := d.sync(t.Context(), "child")
	require.NoError(t, err)
	_, err = client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
	var deletes []k8stesting.DeleteActionImpl
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			deletes = append(deletes, d)
		}
	}
	require.Len(t, deletes, 1)
	uid := types.UID("n1")
	want := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if diff := cmp.Diff(want, deletes[0].DeleteOptions); diff != "" {
		t.Errorf("delete options mismatch (-want +got):\n%s", diff)
	}
	assert.Equal(t, "child", deletes[0].Name)

	// Marked with another cluster's UID (a stale mark, or another
	// cluster's): kept.
	n2 := n.DeepCopy()
	n2.Annotations[api.AnnotationLeaving] = "u2"
	client = fake.NewClientset(n2)
	require.NoError(t, indexer.Update(n2))
	d = &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0", "::/0")}
	_, err = d.sync(t.Context(), "child")
	require.NoError(t, err)
	_, err = client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
	require.NoError(t, err, "kept")
}

func TestDecoratorSyncMissingNode(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	d := &decorator{client: client, nodes: lister, grants: poolGrants(lister, nil, "0.0.0.0/0")}
	wait, err := d.sync(t.Context(), "gone")
	require.NoError(t, err)
	require.Zero(t, wait)
	assert.Empty(t, client.Actions())
}

// actionSummary is what a test compares of a fake client action.
type actionSummary struct {
	Verb, Resource, Namespace, Name string
	Object                          runtime.Object
}

func actionSummaries(actions []k8stesting.Action) []actionSummary {
	var out []actionSummary
	for _, a := range actions {
		s := actionSummary{Verb: a.GetVerb(), Resource: a.GetResource().Resource, Namespace: a.GetNamespace()}
		if named, ok := a.(interface{ GetName() string }); ok { // get, delete
			s.Name = named.GetName()
		}
		if withObject, ok := a.(interface{ GetObject() runtime.Object }); ok { // create, update
			s.Object = withObject.GetObject()
		}
		out = append(out, s)
	}
	return out
}

// A node whose pod CIDRs come, change or go queues the children whose
// descriptions it may change, those it overlaps, and no other.
func TestEnqueueOverlapping(t *testing.T) {
	child := func(name string, cidrs ...string) *corev1.Node {
		raw, err := api.FormatSummary(api.Summary{Cluster: name, Covered: []string{name}, PodCIDRs: cidrs})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: raw}}}
	}
	realNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{realNode, child("a", "10.244.0.0/16"), child("b", "10.244.7.0/24"), child("c", "10.9.0.0/16"), child("d")} {
		require.NoError(t, indexer.Add(n))
	}
	d := &decorator{nodes: corelisters.NewNodeLister(indexer), queue: queue.New(queue.Config[string]{Name: "test"})}
	defer d.queue.ShutDown()

	d.enqueueOverlapping("new", []string{"10.244.7.0/24"})
	d.enqueueOverlapping("a", []string{"10.244.0.0/16"}) // not itself
	d.enqueueOverlapping("e", nil)
	var got []string
	for d.queue.Len() > 0 {
		name, _ := d.queue.Get()
		got = append(got, name)
		d.queue.Done(name)
	}
	assert.ElementsMatch(t, []string{"a", "b"}, got, "the real node is not decorated; c and d overlap nothing")
}

// A new virtual node that is Ready and still has admission's not-ready
// taint is left to the node lifecycle controller, whose patch carries the
// version it read: decorating it in between would make that patch
// conflict. It is decorated once the taint is gone, or after nlcGrace.
func TestDecoratorHoldsForNodeLifecycleController(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: append([]corev1.Taint{providerTaint}, taints...)},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	patched := func(client *fake.Clientset) []string {
		var names []string
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" {
				names = append(names, a.(k8stesting.PatchAction).GetName())
			}
		}
		return names
	}
	nodes := []*corev1.Node{
		node("new", corev1.ConditionTrue, nil, notReady),
		node("untainted", corev1.ConditionTrue, nil),
		node("not-ready", corev1.ConditionFalse, nil, notReady),
		node("decorated", corev1.ConditionTrue, map[string]string{api.LabelNodeRoleCluster: ""}, notReady),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		require.NoError(t, indexer.Add(n))
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	d := &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), clock: clk, grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0")}

	for _, n := range nodes {
		wait, err := d.sync(t.Context(), n.Name)
		require.NoError(t, err)
		if n.Name == "new" {
			require.Equal(t, nlcGrace, wait, "a new Ready node with the taint waits")
		} else {
			require.Zero(t, wait, "node %s", n.Name)
		}
	}
	// Not ready: the controller keeps the taint, nothing to wait for.
	// Decorated already: a later taint is no join, and a no-op here.
	require.Equal(t, []string{"untainted", "not-ready", "decorated"}, patched(client))

	// Still tainted 2 s later: the rest of the grace.
	clk.SetTime(clk.Now().Add(2 * time.Second))
	wait, err := d.sync(t.Context(), "new")
	require.NoError(t, err)
	require.Equal(t, nlcGrace-2*time.Second, wait)
	// The controller removed the taint: decorated at once.
	untainted := node("new", corev1.ConditionTrue, nil)
	require.NoError(t, indexer.Update(untainted))
	wait, err = d.sync(t.Context(), "new")
	require.NoError(t, err)
	require.Zero(t, wait)
	require.Equal(t, []string{"untainted", "not-ready", "decorated", "new"}, patched(client))

	// No controller (its manager down): decorated after the grace.
	require.NoError(t, indexer.Add(node("orphan", corev1.ConditionTrue, nil, notReady)))
	require.NoError(t, client.Tracker().Add(node("orphan", corev1.ConditionTrue, nil, notReady)))
	wait, err = d.sync(t.Context(), "orphan")
	require.NoError(t, err)
	require.Equal(t, nlcGrace, wait)
	clk.SetTime(clk.Now().Add(nlcGrace))
	wait, err = d.sync(t.Context(), "orphan")
	require.NoError(t, err)
	require.Zero(t, wait)
	require.Equal(t, "orphan", patched(client)[len(patched(client))-1])
	_, held := d.held.Load("orphan")
	require.False(t, held)
}

// A desired taint refused is said once, in a Warning event on the node.
func TestDecoratorWarnsTaintsRefused(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Labels: map[string]string{"nestlet.io/cluster": "child"},
		Annotations: map[string]string{"nestlet.io/desired-taints": `[{"key":"example.com/quarantine","value":"false","effect":"NoSchedule"}]`,
			api.AnnotationAppliedTaints: `[]`}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{providerTaint, taint("example.com/quarantine", "true", corev1.TaintEffectNoExecute)}}}
	client := fake.NewClientset(n)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(n))
	recorder := record.NewFakeRecorder(10)
	d := &decorator{client: client, recorder: recorder, nodes: corelisters.NewNodeLister(indexer),
		grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0", "::/0")}
	for range 2 {
		_, err := d.sync(t.Context(), "child")
		require.NoError(t, err)
	}
	require.Len(t, recorder.Events, 1)
	ev := <-recorder.Events
	assert.Contains(t, ev, "NestletTaintsRefused")
	assert.Contains(t, ev, "example.com/quarantine")
}

// A parent that relaxes its children's provider taint (PreferNoSchedule,
// Config.ChildTaintEffect) turns the NoSchedule one a child registers
// with into it, and then leaves it.
func TestMergeTaintsRelaxedEffect(t *testing.T) {
	prefer := api.ProviderTaint()
	prefer.Effect = corev1.TaintEffectPreferNoSchedule
	gpu := corev1.Taint{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	got := mergeTaints(prefer, []corev1.Taint{api.ProviderTaint(), gpu}, []corev1.Taint{gpu}, []string{gpu.Key})
	require.Equal(t, []corev1.Taint{prefer, gpu}, got)
	current := []corev1.Taint{prefer, gpu}
	got = mergeTaints(prefer, current, []corev1.Taint{gpu}, []string{gpu.Key})
	assert.Same(t, &current[0], &got[0], "unchanged")
}
