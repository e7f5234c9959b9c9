package hollow

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

// ClusterConfig describes a simulated cluster.
type ClusterConfig struct {
	// Name of the cluster; its nodes are <Name>-node-<i>. Required, a DNS
	// label.
	Name string
	// Nodes is the number of nodes (default 1).
	Nodes int
	// NodeCapacity is each node's capacity and allocatable (default 8 CPU,
	// 32Gi memory, 110 pods).
	NodeCapacity corev1.ResourceList
	// Labels are added to every node (region, zone, ...).
	Labels map[string]string
	// StartDelay is how long a bound pod takes to run (default 0: at
	// once).
	StartDelay time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// DefaultNodeCapacity is a node's capacity unless configured.
func DefaultNodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// Cluster is a simulated Kubernetes cluster: a fake clientset with an API
// server's semantics (see store), a Target API, fake nodes, and a simulated
// scheduler and kubelet that run the pods created in it.
type Cluster struct {
	Name string
	// UID is the UID of kube-system, which the agent takes as the
	// cluster's identity.
	UID types.UID
	// Client is the cluster's API (a kubernetes.Interface).
	Client *fake.Clientset
	// Targets is the cluster's Target API.
	Targets v1alpha1.TargetInterface
	// NodeNames are the cluster's nodes.
	NodeNames []string

	cfg     ClusterConfig
	store   *store
	targets *targetServer
	kubelet *kubelet
}

// NewCluster builds a simulated cluster: namespaces (kube-system,
// kube-public, kube-node-lease, default) and Ready nodes. Run starts its
// scheduler and kubelet.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	if errs := validation.IsDNS1123Label(cfg.Name); len(errs) > 0 {
		return nil, fmt.Errorf("hollow cluster name %q: %v", cfg.Name, errs)
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	if cfg.NodeCapacity == nil {
		cfg.NodeCapacity = DefaultNodeCapacity()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	client := fake.NewSimpleClientset()
	st := newStore(client.Tracker(), scheme.Scheme, cfg.Clock)
	st.install(&client.Fake)
	ts, targets, err := newTargetServer(cfg.Clock)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: cfg.Name, Client: client, Targets: targets, cfg: cfg, store: st, targets: ts}

	nsGVR := corev1.SchemeGroupVersion.WithResource("namespaces")
	for _, ns := range []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, metav1.NamespaceDefault} {
		obj, err := st.create(nsGVR, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
		if err != nil {
			return nil, err
		}
		if ns == metav1.NamespaceSystem {
			c.UID = obj.(*corev1.Namespace).UID
		}
	}
	nodes := make([]*corev1.Node, 0, cfg.Nodes)
	for i := range cfg.Nodes {
		n := c.node(i)
		obj, err := st.create(corev1.SchemeGroupVersion.WithResource("nodes"), "", n)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, obj.(*corev1.Node))
		c.NodeNames = append(c.NodeNames, n.Name)
	}
	c.kubelet = newKubelet(client, nodes, cfg.StartDelay, cfg.Clock)
	return c, nil
}

// node returns node i as a kubelet registers it, Ready.
func (c *Cluster) node(i int) *corev1.Node {
	name := fmt.Sprintf("%s-node-%d", c.Name, i)
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "hollow",
	}
	maps.Copy(labels, c.cfg.Labels)
	now := metav1.NewTime(c.cfg.Clock.Now())
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    c.cfg.NodeCapacity.DeepCopy(),
			Allocatable: c.cfg.NodeCapacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.255.%d.%d", i/250, i%250+1)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.35.4", ContainerRuntimeVersion: "hollow://1",
			},
		},
	}
}

// Run runs the cluster's scheduler and kubelet until ctx ends.
func (c *Cluster) Run(ctx context.Context) {
	go func() {
		// The fakes record every action; nobody reads them here.
		t := c.cfg.Clock.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				c.Client.ClearActions()
				c.targets.fake.ClearActions()
			}
		}
	}()
	c.kubelet.run(ctx)
}
