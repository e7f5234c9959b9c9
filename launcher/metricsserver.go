package launcher

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// frontProxyClientName is the name in the front proxy's client certificate,
// the one the API server's request-header authentication admits.
const frontProxyClientName = "front-proxy-client"

// metricsServerUser is metrics-server's identity in its cluster.
const metricsServerUser = "system:metrics-server"

// startMetricsServer runs metrics-server (sigs.k8s.io/metrics-server, built
// by hack/install-binaries.sh at the version pinned in
// hack/tools/metrics-server) on the cluster's host, as a program, and
// registers it as the cluster's metrics.k8s.io API, as its manifests do in
// a cluster: its RBAC, a Service kube-system/metrics-server whose endpoint
// is the program's address, and the APIService, whose serving certificate
// the cluster CA signs. It returns once the API answers.
func (c *Cluster) startMetricsServer(ctx context.Context, pki *clusterPKI) error {
	bin := filepath.Join(c.bins.Dir, "metrics-server")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: %s", ErrBinariesMissing, bin)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	addr, port := c.Address(), ports[0]
	dir := filepath.Join(c.Dir, "pki")
	identity, err := c.ca.issue(dir, "metrics-server", pkix.Name{CommonName: metricsServerUser}, nil, nil)
	if err != nil {
		return err
	}
	serving, err := c.ca.issue(dir, "metrics-server-serving", pkix.Name{CommonName: "metrics-server"},
		[]net.IP{net.ParseIP(addr)}, []string{"metrics-server.kube-system.svc"})
	if err != nil {
		return err
	}
	kubeconfig, err := c.writeKubeconfig("metrics-server", identity)
	if err != nil {
		return err
	}
	if err := c.ensureMetricsServerRBAC(ctx); err != nil {
		return err
	}
	proc, err := c.start("metrics-server", bin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address="+addr,
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+serving.CertPath,
		"--tls-private-key-file="+serving.KeyPath,
		// Every kubelet endpoint's certificate is the cluster CA's (see
		// --kubelet-certificate-authority of the API server).
		"--kubelet-certificate-authority="+c.ca.CertPath,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-use-node-status-port",
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s",
		"--v=1",
	)
	if err != nil {
		return err
	}
	c.track(proc)
	if err := c.registerMetricsAPI(ctx, addr, port); err != nil {
		return err
	}
	return waitHealthy(ctx, proc, 2*time.Minute, func(ctx context.Context) bool {
		_, err := c.Client.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
		return err == nil
	})
}

// ensureMetricsServerRBAC grants metrics-server what its manifests grant
// its ServiceAccount.
func (c *Cluster) ensureMetricsServerRBAC(ctx context.Context) error {
	rbac := c.Client.RbacV1()
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: metricsServerUser}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
	}}
	creates := []func() error{
		func() error { _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); return err },
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsServerUser},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerUser}, Subjects: user}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server:system:auth-delegator"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}, Subjects: user}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.RoleBindings(metav1.NamespaceSystem).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}, Subjects: user}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range creates {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("metrics-server's RBAC: %w", err)
		}
	}
	return nil
}

// registerMetricsAPI makes the Service kube-system/metrics-server, with the
// program's address as its endpoint (the API server calls it there:
// --enable-aggregator-routing), and the APIService v1beta1.metrics.k8s.io.
func (c *Cluster) registerMetricsAPI(ctx context.Context, addr string, port int) error {
	const ns, name = metav1.NamespaceSystem, "metrics-server"
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"k8s-app": name}}
	_, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt(port)}},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics-server's Service: %w", err)
	}
	// Endpoints, which the controller manager mirrors to an EndpointSlice:
	// the Service selects no pod.
	//nolint:staticcheck // SA1019: Endpoints is what a Service without selector mirrors from.
	_, err = c.Client.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: addr}},
		Ports:     []corev1.EndpointPort{{Name: "https", Port: int32(port)}},
	}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics-server's Endpoints: %w", err)
	}
	ca, err := os.ReadFile(c.ca.CertPath)
	if err != nil {
		return err
	}
	agg, err := aggregator.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	_, err = agg.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io", Labels: map[string]string{"k8s-app": name}},
		Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{Namespace: ns, Name: name},
			Group:   "metrics.k8s.io", Version: "v1beta1", CABundle: ca,
			GroupPriorityMinimum: 100, VersionPriority: 100,
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the metrics.k8s.io APIService: %w", err)
	}
	return nil
}
