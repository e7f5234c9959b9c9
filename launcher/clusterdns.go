package launcher

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// ClusterDNSIP is the ClusterIP of every real cluster's DNS Service
	// (kube-system/kube-dns), the tenth address of ServiceCIDR as kubeadm
	// chooses it; the real nodes' kubelets give it to every pod.
	ClusterDNSIP = "10.96.0.10"
	// ClusterDomain is the DNS domain of every cluster's Services.
	ClusterDomain = "cluster.local"
	// CoreDNSImage is the cluster DNS's image, built by
	// hack/install-node-runtime.sh from hack/tools/coredns at the version
	// pinned in its go.mod (a test keeps the two equal).
	CoreDNSImage = "nestlet.local/coredns:v1.13.1"
)

// corefile serves the cluster's names only: nothing is forwarded, since
// these machines reach no resolver outside.
const corefile = `.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    reload
    loadbalance
}
`

// installClusterDNS installs the cluster DNS once per cluster (its first
// real node); a failure is tried again with the next real node.
func (c *Cluster) installClusterDNS(ctx context.Context) error {
	c.realMu.Lock()
	defer c.realMu.Unlock()
	if c.dnsInstalled {
		return nil
	}
	if err := ensureClusterDNS(ctx, c.Client); err != nil {
		return err
	}
	c.dnsInstalled = true
	return nil
}

// ensureClusterDNS installs CoreDNS in the cluster as kubeadm does (its
// ServiceAccount and RBAC, the Corefile, a Deployment on the real nodes,
// the kube-dns Service at ClusterDNSIP); what exists already is left as it
// is. It does not wait for CoreDNS to be ready: WaitClusterDNS does.
func ensureClusterDNS(ctx context.Context, client kubernetes.Interface) error {
	const ns, name = metav1.NamespaceSystem, "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster DNS: creating %s: %w", what, err)
		}
		return nil
	}
	opts := metav1.CreateOptions{FieldManager: "nestlet-launcher"}
	_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, opts)
	if err := create("its service account", err); err != nil {
		return err
	}
	_, err = client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, opts)
	if err := create("its cluster role", err); err != nil {
		return err
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}, opts)
	if err := create("its cluster role binding", err); err != nil {
		return err
	}
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile}}, opts)
	if err := create("its Corefile", err); err != nil {
		return err
	}
	_, err = client.AppsV1().Deployments(ns).Create(ctx, coreDNSDeployment(meta), opts)
	if err := create("its Deployment", err); err != nil {
		return err
	}
	dns := func(name string, p corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: 53, Protocol: p, TargetPort: intstr.FromInt32(53)}
	}
	_, err = client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			Selector:  labels,
			ClusterIP: ClusterDNSIP,
			Ports:     []corev1.ServicePort{dns("dns", corev1.ProtocolUDP), dns("dns-tcp", corev1.ProtocolTCP)},
		},
	}, opts)
	if err != nil {
		// A Service asking for an allocated ClusterIP is refused as
		// invalid before its name is looked at: one that exists is ours.
		if _, gerr := client.CoreV1().Services(ns).Get(ctx, "kube-dns", metav1.GetOptions{}); gerr == nil {
			return nil
		}
	}
	return create("the kube-dns Service", err)
}

// coreDNSDeployment is kubeadm's CoreDNS Deployment, with one replica (a
// test cluster has one or two real nodes) on the real nodes only.
func coreDNSDeployment(meta metav1.ObjectMeta) *appsv1.Deployment {
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}, PeriodSeconds: 2}
	}
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: meta.Name,
					PriorityClassName:  "system-cluster-critical",
					DNSPolicy:          corev1.DNSDefault,
					// Real nodes only: kwok would pretend to run it, and
					// a virtual node would send it to another cluster.
					NodeSelector: map[string]string{RealNodeLabel: RealNodeLabelValue},
					Tolerations:  []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           CoreDNSImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						LivenessProbe:  probe("/health", 8080),
						ReadinessProbe: probe("/ready", 8181),
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: meta.Name}},
					}}},
				},
			},
		},
	}
}

// WaitClusterDNS waits until the cluster's DNS Service has a ready
// endpoint (the cluster has a real node: see ensureClusterDNS).
func (c *Cluster) WaitClusterDNS(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		slices, err := c.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					return true, nil
				}
			}
		}
		last = fmt.Sprintf("%d endpoint slices of kube-dns, no ready endpoint", len(slices.Items))
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the cluster DNS is not ready (%s): %w", c.Name, last, err)
	}
	return nil
}
