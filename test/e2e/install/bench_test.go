package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/charts/nestlet/policies"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/scheduler-plugins/profile"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkInstall: what the chart costs and what an upgrade disturbs, on
// the tree root ← east ← east-1 the package installed with helm.
//   - <component>-pod-max-MiB: the largest working set of a pod of each
//     component (agent, scheduler, proxy) over the three clusters, from the
//     kubelet's /stats/summary (the agent's leader and standby alike);
//   - upgrade-pods-disturbed: changes of phase or readiness, or pods added
//     or gone, among 30 pods at the root while every cluster is upgraded
//     to another build (goal 0), and upgrade-s, how long the upgrades took;
//   - upgrade-leaderless-max-ms: the longest time any cluster's agent had no
//     leader during the upgrade (from the last renewal, or the release, of
//     the old leader's Lease to the new leader's acquisition);
//   - child-install-to-ready-s: east-1 uninstalled, then installed again as
//     an operator does (a token made in east, helm install with its
//     values), from the token to its Target Ready and its virtual node
//     Ready in east;
//   - agent-pod-rss-MiB and agent-process-rss-MiB: east-1's agent as the
//     chart's leader pod and, while the chart is uninstalled, as a host
//     process with admin credentials as the launcher runs it, joined to
//     east the same way, each read agentSettle after its Target was Ready
//     (VmRSS of its process both ways, in the same run);
//   - scheduler-pod-rss-MiB and scheduler-process-rss-MiB: the root's
//     scheduler as the chart's pod and as a host process beside it with the
//     same profile under a name no pod asks for (schedulerRSS);
//   - proxy-pod-rss-MiB, proxy-pod-tunnel-rss-MiB and proxy-process-rss-MiB:
//     the root's proxy as the chart's replica that holds no tunnel, as the
//     one that holds east's, and as a host process beside them that holds
//     none, with the chart's certificate and endpoints, so that what it
//     publishes in kube-public/nestlet-info is what is there (proxyRSS).
func BenchmarkInstall(b *testing.B) {
	framework.NeedRealNodes(b)
	for range b.N {
		mem := componentMemory(b)
		for component, mib := range mem {
			b.ReportMetric(mib, component+"-pod-max-MiB")
		}

		ns := newNamespace(b)
		webDeployment(b, ns, "steady", upgradeReplicas)
		atRoot := watchStates(b, env.Cluster("root").Client, ns, "app=steady")
		var leases []func() time.Duration
		for _, at := range tree {
			leases = append(leases, watchLeaderless(b, env.Cluster(at.name).Client))
		}
		next, took := upgradeTree(b, "0.0.0-bench")
		for _, at := range tree[1:] {
			require.NoError(b, env.Cluster(at.name).WaitTargetReady(b.Context(), at.parent, 2*time.Minute))
		}
		var worst time.Duration
		for _, stop := range leases {
			worst = max(worst, stop())
		}
		b.ReportMetric(float64(len(atRoot(b))), "upgrade-pods-disturbed")
		b.ReportMetric(took.Seconds(), "upgrade-s")
		b.ReportMetric(float64(worst.Milliseconds()), "upgrade-leaderless-max-ms")
		require.NoError(b, env.Cluster("root").Client.CoreV1().Namespaces().Delete(b.Context(), ns, metav1.DeleteOptions{}))

		took, rss := reinstallLeaf(b, next)
		b.ReportMetric(took.Seconds(), "child-install-to-ready-s")
		b.ReportMetric(rss.pod, "agent-pod-rss-MiB")
		b.ReportMetric(rss.process, "agent-process-rss-MiB")
		schedPod, schedProcess := schedulerRSS(b)
		b.ReportMetric(schedPod, "scheduler-pod-rss-MiB")
		b.ReportMetric(schedProcess, "scheduler-process-rss-MiB")
		proxy := proxyRSS(b)
		b.ReportMetric(proxy.idle, "proxy-pod-rss-MiB")
		b.ReportMetric(proxy.tunnel, "proxy-pod-tunnel-rss-MiB")
		b.ReportMetric(proxy.process, "proxy-process-rss-MiB")
	}
}

// componentMemory returns the largest working set of a pod of each
// component in MiB, over every cluster's real nodes.
func componentMemory(b *testing.B) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for _, at := range tree {
		c := env.Cluster(at.name)
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", at.node, "proxy/stats/summary").DoRaw(b.Context())
		require.NoError(b, err, "%s: %s", c.Name, raw)
		var s statsv1alpha1.Summary
		require.NoError(b, json.Unmarshal(raw, &s))
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(b.Context(), metav1.ListOptions{})
		require.NoError(b, err)
		component := map[string]string{}
		for _, p := range pods.Items {
			component[p.Name] = p.Labels["app.kubernetes.io/component"]
		}
		for _, p := range s.Pods {
			name := component[p.PodRef.Name]
			if p.PodRef.Namespace != chartNamespace || name == "" || p.Memory == nil || p.Memory.WorkingSetBytes == nil {
				continue
			}
			out[name] = max(out[name], float64(*p.Memory.WorkingSetBytes)/(1<<20))
		}
	}
	for _, want := range []string{"agent", "scheduler", "proxy"} {
		require.Contains(b, out, want, "no memory figure for the %s's pods", want)
	}
	return out
}

// watchLeaderless watches the agent's Lease of a cluster and returns a
// function that stops and returns the longest time without a leader seen:
// from the old leader's last renewal (or its release, which is a renewal
// without holder) to the new leader's acquisition.
func watchLeaderless(b *testing.B, client kubernetes.Interface) func() time.Duration {
	b.Helper()
	leases := client.CoordinationV1().Leases(chartNamespace)
	l, err := leases.Get(b.Context(), agentLease, metav1.GetOptions{})
	require.NoError(b, err)
	w, err := leases.Watch(b.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", agentLease).String(), ResourceVersion: l.ResourceVersion})
	require.NoError(b, err)
	var mu sync.Mutex
	var worst time.Duration
	holder := func(l *coordinationv1.Lease) string {
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	prevHolder, prevRenew := holder(l), l.Spec.RenewTime
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			h := holder(l)
			if h != "" && h != prevHolder && prevRenew != nil && l.Spec.AcquireTime != nil {
				mu.Lock()
				worst = max(worst, l.Spec.AcquireTime.Sub(prevRenew.Time))
				mu.Unlock()
			}
			prevHolder, prevRenew = h, l.Spec.RenewTime
		}
	}()
	return func() time.Duration {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return worst
	}
}

// agentSettle is how long after its Target is Ready an agent's memory is
// read, as a pod and as a host process alike.
const agentSettle = 30 * time.Second

// agentRSS is east-1's agent's RSS in MiB, as a pod and as a host process.
type agentRSS struct{ pod, process float64 }

// reinstallLeaf uninstalls the chart from east-1, joins it to east for a
// while with a host-process agent (processAgentRSS), and installs the
// chart again as an operator does. It returns the time from the new token
// to east-1's Target Ready and its virtual node Ready in east, and the
// agent's memory both ways.
func reinstallLeaf(b *testing.B, img framework.Image) (time.Duration, agentRSS) {
	b.Helper()
	ctx := b.Context()
	leaf, east := env.Cluster("east-1"), env.Cluster("east")
	_, err := framework.Helm(ctx, env, leaf, "uninstall", release, "--namespace", chartNamespace, "--wait", "--timeout", "3m")
	require.NoError(b, err)
	framework.EventuallyEvery(b, time.Second, 2*time.Minute, "Nestlet's pods in east-1 gone after the uninstall", func(ctx context.Context) (bool, string) {
		pods, err := leaf.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	var rss agentRSS
	rss.process = processAgentRSS(b, leaf, east)
	start := time.Now()
	require.NoError(b, installChild(ctx, leaf, east, "--set", "image.tag="+img.Tag()), "installing east-1 again, at east's version")
	took := time.Since(start)
	rss.pod = podAgentRSS(b, leaf)
	return took, rss
}

// processAgentRSS runs leaf's agent as a host process with the cluster's
// admin kubeconfig (launcher.StartAgent), joins leaf to parent with it
// (launcher.Join: a token made in the parent, nestctl join), reads its RSS
// agentSettle after the Target is Ready, and makes it leave (nestctl
// leave: the Target deleted, the virtual node gone from the parent) before
// stopping it.
func processAgentRSS(b *testing.B, leaf, parent *launcher.Cluster) float64 {
	b.Helper()
	ctx := b.Context()
	p, err := env.StartAgent(ctx, leaf)
	require.NoError(b, err)
	// StartAgent made the nestlet StorageClass, the children's admission
	// policies and their FlowSchema as the chart does; the chart,
	// installed again afterwards, makes its own (helm refuses to take
	// over what it did not make).
	defer func() {
		p.Stop(10 * time.Second)
		_ = leaf.Client.StorageV1().StorageClasses().Delete(context.Background(), api.StorageClassName, metav1.DeleteOptions{})
		require.NoError(b, policies.UninstallChildren(context.Background(), leaf.Client))
	}()
	_, err = launcher.Join(ctx, parent, leaf, launcher.JoinOptions{})
	require.NoError(b, err, "east-1 joining east with a host-process agent")
	time.Sleep(agentSettle)
	rss, err := framework.RSSBytes(p)
	require.NoError(b, err)
	_, err = leaf.Nestctl(ctx, "leave")
	require.NoError(b, err, "the host-process agent leaving east")
	return float64(rss) / (1 << 20)
}

// podAgentRSS reads, agentSettle from now, the RSS of the process of the
// agent's leader pod in c.
func podAgentRSS(b *testing.B, c *launcher.Cluster) float64 {
	b.Helper()
	ctx := b.Context()
	time.Sleep(agentSettle)
	l, err := c.Client.CoordinationV1().Leases(chartNamespace).Get(ctx, agentLease, metav1.GetOptions{})
	require.NoError(b, err)
	require.NotNil(b, l.Spec.HolderIdentity, "%s: the agent's Lease has no holder", c.Name)
	name, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_") // the pod's hostname, then a UUID
	pod, err := c.Client.CoreV1().Pods(chartNamespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(b, err)
	return podRSS(b, c, pod)
}

// podRSS reads the RSS of the process of pod's first container, on the
// real node of c it runs on (clusters have several), in MiB. A container the kubelet has just replaced
// (a scheduler that lost its lease on a loaded machine exits and restarts)
// is not found in the runtime until the pod's status names the new one:
// the pod is read again until it does, for up to a minute.
func podRSS(b *testing.B, c *launcher.Cluster, pod *corev1.Pod) float64 {
	b.Helper()
	var rss int64
	framework.EventuallyEvery(b, time.Second, time.Minute, fmt.Sprintf("%s: the RSS of %s", c.Name, pod.Name), func(ctx context.Context) (bool, string) {
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, "its first container is not running"
		}
		node := c.RealNode(p.Spec.NodeName)
		if node == nil {
			return false, fmt.Sprintf("it runs on %q, not a real node of %s", p.Spec.NodeName, c.Name)
		}
		_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
		rss, err = framework.ContainerRSSBytes(ctx, node, id)
		return err == nil, fmt.Sprint(err)
	})
	return float64(rss) / (1 << 20)
}

// idleSchedulerName is a scheduler name no pod asks for.
const idleSchedulerName = "nestlet-bench-idle"

// schedulerRSS reads the RSS of the root's scheduler as the chart's pod
// and as a host process with admin credentials started beside it with the
// same profile under a name no pod asks for (it lists and watches what the
// pod does and places nothing: the test clusters' load is over by then),
// both agentSettle after the host process started, in MiB.
func schedulerRSS(b *testing.B) (pod, process float64) {
	b.Helper()
	ctx := b.Context()
	root := env.Cluster("root")
	raw, err := profile.ForKubeconfig(root.KubeconfigPath, false)
	require.NoError(b, err)
	var cfg map[string]any
	require.NoError(b, yaml.Unmarshal(raw, &cfg))
	profiles, _ := cfg["profiles"].([]any)
	require.Len(b, profiles, 1)
	profiles[0].(map[string]any)["schedulerName"] = idleSchedulerName
	raw, err = yaml.Marshal(cfg)
	require.NoError(b, err)
	path := filepath.Join(b.TempDir(), "scheduler-config.yaml")
	require.NoError(b, os.WriteFile(path, raw, 0o600))
	p, err := env.StartProcessIn(root, "root-nestlet-scheduler-bench", env.Nestlet.Scheduler, "--config="+path,
		"--authentication-kubeconfig="+root.KubeconfigPath, "--authorization-kubeconfig="+root.KubeconfigPath,
		"--bind-address=127.0.0.1", "--secure-port=0", "--v=1")
	require.NoError(b, err)
	defer p.Stop(10 * time.Second)
	time.Sleep(agentSettle)
	require.True(b, p.Alive(), "the host-process scheduler ended: %s", p.Tail(20))
	rss, err := framework.RSSBytes(p)
	require.NoError(b, err)
	pods, err := root.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=scheduler"})
	require.NoError(b, err)
	require.Len(b, pods.Items, 1, "the root's scheduler pods")
	return podRSS(b, root, &pods.Items[0]), float64(rss) / (1 << 20)
}

// proxyMemory is the root's proxy's RSS in MiB: the chart's replica that
// holds no tunnel (idle), the one that holds east's (tunnel), and a host
// process that holds none (process).
type proxyMemory struct{ idle, tunnel, process float64 }

// proxyRSS starts the root's proxy as a host process with admin
// credentials beside the chart's replicas: the chart's serving certificate
// and advertised endpoints, listening on the root host's loopback (no child
// reaches it), so that it publishes in kube-public/nestlet-info exactly
// what the chart's replicas did (the test fails otherwise). Its RSS and the
// replicas' are read agentSettle after it started. Which replica holds
// east's tunnel is read from their logs.
func proxyRSS(b *testing.B) proxyMemory {
	b.Helper()
	ctx := b.Context()
	root := env.Cluster("root")
	published := func() map[string]string {
		cm, err := root.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
		require.NoError(b, err)
		return cm.Data
	}
	before := published()
	secret, err := root.Client.CoreV1().Secrets(chartNamespace).Get(ctx, proxyTLSSecret, metav1.GetOptions{})
	require.NoError(b, err)
	dir := b.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(b, os.WriteFile(certFile, secret.Data[corev1.TLSCertKey], 0o600))
	require.NoError(b, os.WriteFile(keyFile, secret.Data[corev1.TLSPrivateKeyKey], 0o600))
	p, err := env.StartProcessIn(root, "root-nestlet-proxy-bench", env.Nestlet.Proxy, "--kubeconfig="+root.KubeconfigPath,
		"--advertise-address="+root.Host.IP, "--bind-address=127.0.0.1",
		fmt.Sprintf("--kubelet-port=%d", kubeletNodePort), fmt.Sprintf("--tunnel-port=%d", tunnelNodePort),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile, "--v=1")
	require.NoError(b, err)
	defer p.Stop(10 * time.Second)
	time.Sleep(agentSettle)
	require.True(b, p.Alive(), "the host-process proxy ended: %s", p.Tail(20))
	rss, err := framework.RSSBytes(p)
	require.NoError(b, err)
	require.Equal(b, before, published(), "the host-process proxy changed kube-public/%s", api.ClusterInfoConfigMap)
	out := proxyMemory{process: float64(rss) / (1 << 20)}
	pods, err := root.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=proxy"})
	require.NoError(b, err)
	require.Len(b, pods.Items, proxyReplicas, "the root's proxy pods")
	holders := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		logs, err := root.Client.CoreV1().Pods(chartNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		require.NoError(b, err)
		if holdsTunnel(string(logs), "east") {
			holders++
			out.tunnel = podRSS(b, root, pod)
		} else {
			out.idle = podRSS(b, root, pod)
		}
	}
	require.Equal(b, 1, holders, "replicas of the root's proxy whose logs say they hold east's tunnel")
	return out
}

// holdsTunnel tells whether a proxy's logs end with a tunnel of node open.
func holdsTunnel(logs, node string) bool {
	held := false
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, fmt.Sprintf("node=%q", node)) {
			continue
		}
		switch {
		case strings.Contains(line, `"Opened a tunnel"`):
			held = true
		case strings.Contains(line, `"Closed `): // closed, expired or revoked
			held = false
		}
	}
	return held
}
