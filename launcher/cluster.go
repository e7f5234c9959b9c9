package launcher

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nestlet/nestlet/scheduler-plugins/profile"
)

// ClusterOptions describe one cluster to start.
type ClusterOptions struct {
	// Name identifies the cluster: its etcd prefix, its directory and its
	// kubeconfig context. Required.
	Name string
	// Region is where the cluster lives (a playground topology says), shown
	// with its host (NetworkHosts).
	Region string
	// StockScheduler runs the stock kube-scheduler instead of
	// nestlet-scheduler with its shipped profile (for baselines).
	StockScheduler bool
	// SchedulerArgs are added to the scheduler's command line.
	SchedulerArgs []string
	// ControllerManagerArgs are added to kube-controller-manager's.
	ControllerManagerArgs []string
	// SchedulerMetrics serves the scheduler's /metrics on a loopback port
	// (Cluster.SchedulerMetricsURL), without authorization for that path.
	SchedulerMetrics bool
	// Nodes are kwok nodes created once the cluster is up.
	Nodes []NodeOptions
	// RealNodes are nodes run by a real kubelet and containerd, started
	// after the kwok nodes (see AddRealNode).
	RealNodes []RealNodeOptions
	// KwokPortForwardTarget is the host:port kwok connects every pod
	// port-forward to (none when empty).
	KwokPortForwardTarget string
	// KwokArgs are added to kwok's command line (the last of a repeated
	// flag wins).
	KwokArgs []string
	// MetricsServer runs metrics-server for the cluster, on its host, as
	// its metrics.k8s.io API (kubectl top, autoscalers).
	MetricsServer bool
	// LocalPath runs local-path-provisioner for the cluster, on its host,
	// as its default StorageClass (LocalPathClass): the dynamic
	// provisioner of clusters with real nodes.
	LocalPath bool
	// OwnEtcd gives the cluster an etcd member of its own (process "etcd"
	// of the cluster, Cluster.Process) instead of a prefix of the
	// Environment's shared one, so that a test can stop and restart this
	// cluster's storage alone.
	OwnEtcd bool
	// Profiling serves kube-apiserver's /debug/pprof to the cluster's
	// admins (off otherwise, as on a production control plane) and, with
	// SchedulerMetrics, the scheduler's beside its /metrics.
	Profiling bool
}

// Cluster is a running control plane with kwok kubelets (kwok runs once
// the cluster has a kwok node: a cluster whose only nodes are virtual, as
// a middle level of a tree, runs none, as it would run no kubelet).
type Cluster struct {
	Name string
	// Dir holds the cluster's certificates, kubeconfigs and logs.
	Dir string
	// URL is the kube-apiserver's address: https://<host IP>:<port> on a
	// host of its own (NetworkHosts), https://127.0.0.1:<port> else.
	URL string
	// Host is the cluster's host (NetworkHosts), else nil.
	Host *Host
	// KubeconfigPath is an admin (system:masters) kubeconfig.
	KubeconfigPath string
	// CAPath is the cluster CA, which also signs CSRs.
	CAPath string
	// Config and Client are admin clients.
	Config *rest.Config
	Client kubernetes.Interface
	// KwokNodePort is where kwok serves the kubelet API of every node of
	// this cluster (on 127.0.0.1).
	KwokNodePort int
	// KwokLogsFile is the CRI-format log file (lines like
	// "<RFC3339Nano> stdout F <text>") kwok serves as the logs of every
	// container, and streams to attach; created empty. Exec runs commands
	// on this machine, in Dir.
	KwokLogsFile string
	// SchedulerMetricsURL is the scheduler's /metrics (with
	// ClusterOptions.SchedulerMetrics; HTTPS with a self-signed certificate).
	SchedulerMetricsURL string

	procs *processGroup
	own   []*Process
	ca    *certKey
	bins  *Binaries
	// nestlet holds the project's programs (scheduler, nestctl).
	nestlet *NestletBinaries

	realMu    sync.Mutex
	realNodes []*RealNode
	// dnsInstalled is set once ensureClusterDNS succeeded (realMu).
	dnsInstalled bool

	kwokMu sync.Mutex
	// kwokArgs is kwok's command line; kwok is started with the first
	// kwok node (ensureKwok).
	kwokArgs []string
	kwok     *Process
}

// RealNodes returns the cluster's real nodes.
func (c *Cluster) RealNodes() []*RealNode {
	c.realMu.Lock()
	defer c.realMu.Unlock()
	return append([]*RealNode(nil), c.realNodes...)
}

// RealNode returns the named real node, or nil.
func (c *Cluster) RealNode(name string) *RealNode {
	for _, n := range c.RealNodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) addRealNode(n *RealNode) {
	c.realMu.Lock()
	defer c.realMu.Unlock()
	c.realNodes = append(c.realNodes, n)
}

// stopRealNodes stops the real nodes, concurrently, and removes what they
// made on the host.
func (c *Cluster) stopRealNodes() error {
	nodes := c.RealNodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Process returns the cluster's process named name (kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok, ...), or nil.
func (c *Cluster) Process(name string) *Process {
	for _, p := range c.own {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Processes returns the processes of this cluster (not its shared etcd).
func (c *Cluster) Processes() []*Process { return append([]*Process(nil), c.own...) }

// CA returns the cluster CA certificate and key paths.
func (c *Cluster) CA() (certPath, keyPath string) { return c.ca.CertPath, c.ca.KeyPath }

const (
	// ServiceCIDR is the (never routed) service range of every test cluster.
	ServiceCIDR = "10.96.0.0/16"
	// KwokNodeAnnotation marks the nodes kwok manages.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// startCluster starts a control plane against etcd and waits until its API
// server is ready and its controller manager has created the default
// ServiceAccount.
func startCluster(ctx context.Context, bins *Binaries, own *NestletBinaries, etcd *Etcd, baseDir string, host *Host, opts ClusterOptions, procs *processGroup) (*Cluster, error) {
	if opts.Name == "" {
		return nil, fmt.Errorf("cluster options: name is required")
	}
	dir := filepath.Join(baseDir, opts.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, Dir: dir, Host: host, KwokNodePort: ports[1], procs: procs, bins: bins, nestlet: own}
	c.URL = fmt.Sprintf("https://%s:%d", c.Address(), ports[0])

	pki, err := c.writePKI()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: writing certificates: %w", opts.Name, err)
	}
	c.CAPath = c.ca.CertPath

	if opts.OwnEtcd {
		own, err := startEtcd(ctx, bins, dir, c.netns(), c.Address(), procs)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
		c.own = append(c.own, own.process) // already in procs
		etcd = own
	}
	if _, err := c.startAPIServer(ctx, bins, etcd, pki, ports[0], opts.Profiling); err != nil {
		return nil, err
	}
	kcm, err := c.startControllerManager(bins, pki, opts)
	if err != nil {
		return nil, err
	}
	sched, err := c.startScheduler(ctx, bins, pki, opts)
	if err != nil {
		return nil, err
	}
	if c.kwokArgs, err = c.kwokCommand(bins, pki, opts); err != nil {
		return nil, err
	}
	var kwok *Process
	if len(opts.Nodes) > 0 {
		if kwok, err = c.ensureKwok(); err != nil {
			return nil, err
		}
	}
	if opts.MetricsServer {
		if err := c.startMetricsServer(ctx, pki); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}
	if opts.LocalPath {
		if err := c.startLocalPath(ctx); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}

	// The controller manager is working once the ServiceAccount controller
	// has created "default"; pods cannot be created before that.
	err = waitHealthy(ctx, kcm, 2*time.Minute, func(ctx context.Context) bool {
		_, err := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	for _, p := range []*Process{sched, kwok} {
		if p == nil {
			continue
		}
		if exited, err := p.Exited(); exited {
			return nil, fmt.Errorf("cluster %s: %s exited (%w); last log lines:\n%s", opts.Name, p.Name, err, p.Tail(30))
		}
	}
	for _, n := range opts.Nodes {
		if _, err := c.AddNode(ctx, n); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}
	for _, n := range opts.RealNodes {
		if _, err := c.AddRealNode(ctx, n); err != nil {
			return c, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}
	return c, nil
}

// schedulerCommand returns the scheduler to run: nestlet-scheduler with the
// shipped profile, or the stock kube-scheduler.
func (c *Cluster) schedulerCommand(bins *Binaries, kubeconfig string, stock bool) (string, []string, error) {
	common := []string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=1",
	}
	if stock {
		return bins.KubeScheduler, append(common,
			"--kubeconfig="+kubeconfig,
			"--leader-elect=false",
			// The default client limit (50/s) would make binding the
			// bottleneck of every burst, in baselines and trees alike.
			"--kube-api-qps=500",
			"--kube-api-burst=1000",
		), nil
	}
	cfg, err := profile.ForKubeconfig(kubeconfig, false)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(c.Dir, "scheduler-config.yaml")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return "", nil, err
	}
	return c.nestlet.Scheduler, append(common, "--config="+path), nil
}

// Address is where the cluster's programs serve what others reach: its
// host's address on the WAN (NetworkHosts), else 127.0.0.1.
func (c *Cluster) Address() string {
	if c.Host != nil {
		return c.Host.IP
	}
	return "127.0.0.1"
}

// netns is the network namespace of the cluster's host, or empty (this
// machine's). Nil-safe.
func (c *Cluster) netns() string {
	if c == nil || c.Host == nil {
		return ""
	}
	return c.Host.Netns
}

// start starts a program of the cluster on its host, its log in Dir.
func (c *Cluster) start(name, bin string, args ...string) (*Process, error) {
	return startProcessIn(c.netns(), c.Dir, name, bin, nil, args...)
}

func (c *Cluster) track(p *Process) {
	c.own = append(c.own, p)
	c.procs.add(p)
}

type clusterPKI struct {
	serving, kwokServing, admin, controllerManager, scheduler, kubeletClient *certKey
	saKey, saPub                                                             string
	// frontProxyCA signs frontProxyClient, with which the API server calls
	// aggregated APIs (metrics-server's), which trust its request headers.
	frontProxyCA, frontProxyClient *certKey
}

func (c *Cluster) writePKI() (*clusterPKI, error) {
	dir := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newCA(dir, "ca")
	if err != nil {
		return nil, err
	}
	c.ca = ca
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	serving := loopback
	if c.Host != nil {
		// Its host's address, and the operator's, where the tests' link
		// proxies take a child's connections to this parent.
		serving = append(slices.Clone(loopback), net.ParseIP(c.Host.IP), net.ParseIP(OperatorIP()))
	}
	var p clusterPKI
	steps := []struct {
		out      **certKey
		name     string
		subject  pkix.Name
		ips      []net.IP
		dnsNames []string
	}{
		{&p.serving, "apiserver", pkix.Name{CommonName: "kube-apiserver"}, serving, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{&p.kwokServing, "kwok-serving", pkix.Name{CommonName: "kwok"}, loopback[:1], []string{"localhost"}},
		{&p.admin, "admin", pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}}, nil, nil},
		{&p.controllerManager, "kube-controller-manager", pkix.Name{CommonName: "system:kube-controller-manager"}, nil, nil},
		{&p.scheduler, "kube-scheduler", pkix.Name{CommonName: "system:kube-scheduler"}, nil, nil},
		{&p.kubeletClient, "apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, nil, nil},
	}
	for _, s := range steps {
		if *s.out, err = ca.issue(dir, s.name, s.subject, s.ips, s.dnsNames); err != nil {
			return nil, err
		}
	}
	if p.saKey, p.saPub, err = writeKeyPair(dir, "sa"); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = newCA(dir, "front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyClient, err = p.frontProxyCA.issue(dir, "front-proxy-client", pkix.Name{CommonName: frontProxyClientName}, nil, nil); err != nil {
		return nil, err
	}
	return &p, nil
}

// writeKubeconfig writes dir/<name>.kubeconfig for a client certificate.
func (c *Cluster) writeKubeconfig(name string, ck *certKey) (string, error) {
	path := filepath.Join(c.Dir, name+".kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthority: c.ca.CertPath}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: ck.CertPath, ClientKey: ck.KeyPath}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: name}
	cfg.CurrentContext = c.Name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return path, nil
}

// NewClientForUser returns a client authenticated as user (and groups) by a
// client certificate of this cluster's CA: how the test impersonates a node
// or any other identity for real, through authentication and authorization.
func (c *Cluster) NewClientForUser(user string, groups ...string) (*rest.Config, error) {
	dir, err := os.MkdirTemp(filepath.Join(c.Dir, "pki"), "user-")
	if err != nil {
		return nil, err
	}
	ck, err := c.ca.issue(dir, "client", pkix.Name{CommonName: user, Organization: groups}, nil, nil)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: c.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: c.ca.CertPath, CertFile: ck.CertPath, KeyFile: ck.KeyPath,
		},
	}, nil
}

// Anonymous returns a client config that trusts the cluster CA and carries no
// credential.
func (c *Cluster) Anonymous() *rest.Config {
	return &rest.Config{Host: c.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: c.ca.CertPath}}
}

// Stop stops the cluster's real nodes and processes (not the shared etcd).
func (c *Cluster) Stop() {
	_ = c.stopRealNodes()
	for _, p := range slices.Backward(c.own) { // its own etcd last
		p.Stop(10 * time.Second)
	}
}

// EnsureNamespace creates namespace name if it does not exist.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}
