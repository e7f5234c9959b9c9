package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nestlet/nestlet/api"
)

// AuditDirEnv, when set, names a directory where every API server writes
// an audit log of every request (its metadata: who, what, the answer), as
// <cluster>.log: to find out who makes which requests.
const AuditDirEnv = "NESTLET_AUDIT_DIR"

// auditArgs are the API server's flags for an audit log of cluster in
// dir, whose policy it writes there.
func auditArgs(dir, cluster string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	const metadata = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	if err := os.WriteFile(policy, []byte(metadata), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + filepath.Join(dir, cluster+".log")}, nil
}

// startAPIServer starts the kube-apiserver on port and waits until it is ready.
func (c *Cluster) startAPIServer(ctx context.Context, bins *Binaries, etcd *Etcd, pki *clusterPKI, port int, profiling bool) (*Process, error) {
	// Pods reach their cluster's API server as in any cluster, through
	// the kubernetes Service (10.96.0.1, in the serving certificate),
	// whose endpoint is this machine's address: the API server listens
	// there too, and advertises it. Programs on this machine use
	// 127.0.0.1. A machine with no address but loopback keeps the API
	// server on loopback, with no endpoint (an endpoint may not be
	// loopback).
	bind, advertise, reconciler := "0.0.0.0", HostIP(), "lease"
	if c.Host != nil {
		advertise = c.Host.IP
	}
	if advertise == "127.0.0.1" {
		bind, reconciler = "127.0.0.1", "none"
	}
	args := []string{
		"--etcd-servers=" + etcd.URL,
		"--etcd-prefix=/clusters/" + c.Name,
		"--bind-address=" + bind,
		"--advertise-address=" + advertise,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki.serving.CertPath,
		"--tls-private-key-file=" + pki.serving.KeyPath,
		"--client-ca-file=" + c.ca.CertPath,
		"--kubelet-client-certificate=" + pki.kubeletClient.CertPath,
		"--kubelet-client-key=" + pki.kubeletClient.KeyPath,
		// Every kubelet endpoint is verified: real kubelets' and kwok's
		// serving certificates, nestlet-proxy's (StartProxy) and direct
		// agents' (kubelet-serving requests the parent's agent approves)
		// are all issued by this CA.
		"--kubelet-certificate-authority=" + c.ca.CertPath,
		// Real nodes name themselves by a hostname no resolver knows.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		// Its keys where every pod that holds its tokens reaches it: by
		// the cluster's own name (a pod in this cluster through the
		// kubernetes Service, one made here and running below through
		// its host alias to the gateway's relay), not the host's address.
		"--service-account-jwks-uri=https://kubernetes.default.svc.cluster.local/openid/v1/jwks",
		"--service-cluster-ip-range=" + ServiceCIDR,
		// The service range is routed nowhere on the control plane's host
		// (no kube-proxy there): webhooks' Services are called at their
		// endpoints' pod IPs, which the host routes to its real nodes.
		"--enable-aggregator-routing=true",
		// Aggregated APIs (metrics-server) are called with the front
		// proxy's certificate and trust the user it names in headers.
		"--proxy-client-cert-file=" + pki.frontProxyClient.CertPath,
		"--proxy-client-key-file=" + pki.frontProxyClient.KeyPath,
		"--requestheader-client-ca-file=" + pki.frontProxyCA.CertPath,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=" + reconciler,
		"--profiling=" + strconv.FormatBool(profiling),
		"--v=1",
	}
	if dir := os.Getenv(AuditDirEnv); dir != "" {
		audit, err := auditArgs(dir, c.Name)
		if err != nil {
			return nil, err
		}
		args = append(args, audit...)
	}
	apiserver, err := c.start("kube-apiserver", bins.KubeAPIServer, args...)
	if err != nil {
		return nil, err
	}

	admin, err := c.writeKubeconfig("admin", pki.admin)
	if err != nil {
		return nil, err
	}
	c.KubeconfigPath = admin
	if c.Config, err = clientcmd.BuildConfigFromFlags("", admin); err != nil {
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	err = waitHealthy(ctx, apiserver, 2*time.Minute, func(ctx context.Context) bool {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	c.track(apiserver)
	return apiserver, nil
}

// startControllerManager starts the kube-controller-manager.
func (c *Cluster) startControllerManager(bins *Binaries, pki *clusterPKI, opts ClusterOptions) (*Process, error) {
	kcmKubeconfig, err := c.writeKubeconfig("kube-controller-manager", pki.controllerManager)
	if err != nil {
		return nil, err
	}
	kcm, err := c.start("kube-controller-manager", bins.KubeControllerManager, append([]string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--cluster-signing-cert-file=" + c.ca.CertPath,
		"--cluster-signing-key-file=" + c.ca.KeyPath,
		"--root-ca-file=" + c.ca.CertPath,
		"--service-account-private-key-file=" + pki.saKey,
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		// The default node monitor grace period (50s) is kept: shorter,
		// kwok's lease heartbeats lagging on a loaded 2-core machine made
		// its nodes flap NotReady, and summaries with them. Benchmarks
		// that saturate the machine for long lengthen it
		// (ControllerManagerArgs).
		"--v=1",
	}, opts.ControllerManagerArgs...)...)
	if err != nil {
		return nil, err
	}
	c.track(kcm)
	return kcm, nil
}

// startScheduler starts the Nestlet scheduler (or the stock one).
func (c *Cluster) startScheduler(ctx context.Context, bins *Binaries, pki *clusterPKI, opts ClusterOptions) (*Process, error) {
	schedKubeconfig, err := c.writeKubeconfig("kube-scheduler", pki.scheduler)
	if err != nil {
		return nil, err
	}
	schedBin, schedArgs, err := c.schedulerCommand(bins, schedKubeconfig, opts.StockScheduler)
	if err != nil {
		return nil, err
	}
	if !opts.StockScheduler {
		if err := c.grantSchedulerQuotas(ctx); err != nil {
			return nil, err
		}
	}
	if opts.SchedulerMetrics {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		c.SchedulerMetricsURL = fmt.Sprintf("https://%s:%d/metrics", c.Address(), port)
		schedArgs = append(schedArgs, "--secure-port="+strconv.Itoa(port), "--bind-address="+c.Address(),
			"--authorization-always-allow-paths="+SchedulerUnauthenticatedPaths(opts.Profiling))
	}
	sched, err := c.start("kube-scheduler", schedBin, append(schedArgs, opts.SchedulerArgs...)...)
	if err != nil {
		return nil, err
	}
	c.track(sched)
	return sched, nil
}

// SchedulerUnauthenticatedPaths is what a test scheduler serves without
// authorization (--authorization-always-allow-paths): its health and
// metrics, and with profiling its /debug/pprof.
func SchedulerUnauthenticatedPaths(profiling bool) string {
	paths := "/healthz,/readyz,/livez,/metrics"
	if profiling {
		paths += ",/debug/pprof/*"
	}
	return paths
}

// grantSchedulerQuotas lets the scheduler (system:kube-scheduler) read the
// children's quotas (api.QuotasConfigMap), as the chart's Role does.
func (c *Cluster) grantSchedulerQuotas(ctx context.Context) error {
	meta := metav1.ObjectMeta{Name: "launcher-scheduler-quotas", Namespace: metav1.NamespaceSystem}
	opts := metav1.CreateOptions{FieldManager: "nestlet-launcher"}
	_, err := c.Client.RbacV1().Roles(meta.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{api.QuotasConfigMap}, Verbs: []string{"get", "list", "watch"},
	}}}, opts)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: letting the scheduler read the quotas: %w", c.Name, err)
	}
	_, err = c.Client.RbacV1().RoleBindings(meta.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:kube-scheduler"}},
	}, opts)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: letting the scheduler read the quotas: %w", c.Name, err)
	}
	return c.grantSchedulerReservations(ctx)
}

// grantSchedulerReservations lets the scheduler ask children for places
// and say where it holds pods (the Reservation plugin), as the chart's
// ClusterRole does.
func (c *Cluster) grantSchedulerReservations(ctx context.Context) error {
	meta := metav1.ObjectMeta{Name: "launcher-scheduler-reservations"}
	opts := metav1.CreateOptions{FieldManager: "nestlet-launcher"}
	_, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}},
	}}, opts)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: letting the scheduler reserve: %w", c.Name, err)
	}
	_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:kube-scheduler"}},
	}, opts)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: letting the scheduler reserve: %w", c.Name, err)
	}
	return nil
}
