package chart

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/charts/nestlet/policies"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/scheduler-plugins/profile"
)

func TestLint(t *testing.T) {
	for _, values := range []string{"", testdata("values-all.yaml")} {
		t.Run("values="+values, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", namespace}
			if values != "" {
				args = append(args, "--values", values)
			}
			out, err := helm(t, nil, args...)
			require.NoError(t, err, "helm lint:\n%s", out)
			require.Contains(t, out, "0 chart(s) failed")
		})
	}
}

// What hack/kind-up.sh installs in each kind cluster renders and lints.
func TestKindValues(t *testing.T) {
	for name, args := range kindValues(t) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, nil, append([]string{"lint", "--strict", chartDir(t), "--namespace", namespace}, args...)...)
			require.NoError(t, err, "helm lint:\n%s", out)
			out, err = helm(t, nil, append(templateArgs(t), args...)...)
			require.NoError(t, err)
			var agent appsv1.Deployment
			into(t, find(t, objects(t, out), "Deployment", "nestlet-agent"), &agent)
			require.Equal(t, "ghcr.io/nestlet/nestlet:kind", agent.Spec.Template.Spec.Containers[0].Image)
		})
	}
}

// The objects each set of values renders, by kind and name.
func TestTemplateObjects(t *testing.T) {
	agent := []string{
		"ServiceAccount nestlet-system/nestlet-agent",
		"ClusterRole nestlet-agent",
		"ClusterRoleBinding nestlet-agent",
		"Role nestlet-system/nestlet-agent-secrets",
		"RoleBinding nestlet-system/nestlet-agent-secrets",
		"Role nestlet-system/nestlet-agent-leader-election",
		"RoleBinding nestlet-system/nestlet-agent-leader-election",
		"Role kube-system/nestlet-agent-revoked",
		"RoleBinding kube-system/nestlet-agent-revoked",
		"Deployment nestlet-system/nestlet-agent",
		"ValidatingAdmissionPolicy nestlet-agent-writes",
		"ValidatingAdmissionPolicyBinding nestlet-agent-writes",
		"ValidatingAdmissionPolicy nestlet-children",
		"ValidatingAdmissionPolicyBinding nestlet-children",
		"ValidatingAdmissionPolicy nestlet-children-kubelet",
		"ValidatingAdmissionPolicyBinding nestlet-children-kubelet",
		"ServiceAccount nestlet-system/nestlet-leave",
		"StorageClass nestlet",
		"ClusterRole nestlet-leave",
		"ClusterRoleBinding nestlet-leave",
		"Job nestlet-system/nestlet-leave",
	}
	scheduler := []string{
		"ServiceAccount nestlet-system/nestlet-scheduler",
		"ConfigMap nestlet-system/nestlet-scheduler",
		"ClusterRoleBinding nestlet-scheduler-kube-scheduler",
		"ClusterRoleBinding nestlet-scheduler-volume-scheduler",
		"RoleBinding kube-system/nestlet-scheduler-authentication-reader",
		"Role kube-system/nestlet-scheduler-quotas",
		"RoleBinding kube-system/nestlet-scheduler-quotas",
		"ClusterRole nestlet-scheduler-reservations",
		"ClusterRoleBinding nestlet-scheduler-reservations",
		"Role nestlet-system/nestlet-scheduler-leader-election",
		"RoleBinding nestlet-system/nestlet-scheduler-leader-election",
		"Deployment nestlet-system/nestlet-scheduler",
	}
	proxy := []string{
		"ServiceAccount nestlet-system/nestlet-proxy",
		"ClusterRole nestlet-proxy",
		"ClusterRoleBinding nestlet-proxy",
		"ClusterRoleBinding nestlet-proxy-auth-delegator",
		"Role kube-public/nestlet-proxy-info",
		"RoleBinding kube-public/nestlet-proxy-info",
		"Role kube-system/nestlet-proxy-revoked",
		"RoleBinding kube-system/nestlet-proxy-revoked",
		"Deployment nestlet-system/nestlet-proxy",
		"Service nestlet-system/nestlet-proxy",
		// Two replicas, peers.
		"Secret nestlet-system/nestlet-proxy-peer",
		"Service nestlet-system/nestlet-proxy-peers",
		"Role nestlet-system/nestlet-proxy-peers",
		"RoleBinding nestlet-system/nestlet-proxy-peers",
	}
	webhook := []string{
		"Secret nestlet-system/nestlet-webhook-tls",
		"Service nestlet-system/nestlet-webhook",
		"MutatingWebhookConfiguration nestlet-webhook",
	}
	// With the gateway: where the agent publishes its node, and a route
	// agent on every node.
	routes := []string{
		"ConfigMap nestlet-system/nestlet-gateway",
		"ServiceAccount nestlet-system/nestlet-routes",
		"Role nestlet-system/nestlet-routes",
		"RoleBinding nestlet-system/nestlet-routes",
		"ClusterRole nestlet-routes",
		"ClusterRoleBinding nestlet-routes",
		"DaemonSet nestlet-system/nestlet-routes",
	}
	// The components' requests at the cluster's controllers' priority.
	flow := []string{"FlowSchema nestlet", "FlowSchema nestlet-leader-election"}
	// The children's requests at a level of their own.
	children := []string{"FlowSchema nestlet-children", "PriorityLevelConfiguration nestlet-children"}
	targets := []string{
		"Secret nestlet-system/nestlet-token-parent-root-example-com-6443",
		"Target parent-root-example-com-6443",
		"Target backup-parent",
	}
	tests := []struct {
		name   string
		values []string
		set    []string
		want   [][]string
	}{
		{name: "defaults: agent and scheduler", want: [][]string{agent, scheduler, flow, children}},
		{name: "every component and two targets", values: []string{testdata("values-all.yaml")}, want: [][]string{agent, scheduler, proxy, webhook, routes, targets, flow, children}},
		{name: "a leaf: agent only", set: []string{"scheduler.enabled=false"}, want: [][]string{agent, flow, children}},
		{name: "no FlowSchemas", set: []string{"scheduler.enabled=false", "flowControl.enabled=false"}, want: [][]string{agent}},
		{name: "an API server without admission policies", set: []string{"scheduler.enabled=false", "agent.restrictWrites=false", "agent.childrenPolicy=false"},
			want: [][]string{except(agent, "ValidatingAdmissionPolicy nestlet-agent-writes", "ValidatingAdmissionPolicyBinding nestlet-agent-writes",
				"ValidatingAdmissionPolicy nestlet-children", "ValidatingAdmissionPolicyBinding nestlet-children",
				"ValidatingAdmissionPolicy nestlet-children-kubelet", "ValidatingAdmissionPolicyBinding nestlet-children-kubelet"), flow}},
		{name: "no leader election", set: []string{"scheduler.leaderElect=false", "agent.leaderElect=false", "agent.replicas=1"}, want: [][]string{flow, children,
			except(agent, "Role nestlet-system/nestlet-agent-leader-election", "RoleBinding nestlet-system/nestlet-agent-leader-election"),
			except(scheduler, "Role nestlet-system/nestlet-scheduler-leader-election", "RoleBinding nestlet-system/nestlet-scheduler-leader-election")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := templateArgs(t, tt.values...)
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := helm(t, nil, args...)
			require.NoError(t, err)
			var want []string
			for _, w := range tt.want {
				want = append(want, w...)
			}
			sort.Strings(want)
			if diff := cmp.Diff(want, ids(objects(t, out))); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
		})
	}
}

// except returns list without the items, which it must hold.
func except(list []string, items ...string) []string {
	out := slices.Clone(list)
	for _, it := range items {
		i := slices.Index(out, it)
		if i < 0 {
			panic(it + " is not in the list")
		}
		out = slices.Delete(out, i, i+1)
	}
	return out
}

func TestTemplateDefaults(t *testing.T) {
	objs := objects(t, render(t))

	// Every component runs its own binary of the one image.
	for name, bin := range map[string]string{"nestlet-agent": "nestlet", "nestlet-scheduler": "nestlet-scheduler"} {
		var d appsv1.Deployment
		into(t, find(t, objs, "Deployment", name), &d)
		c := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, "ghcr.io/nestlet/nestlet:0.1.0", c.Image, name)
		require.Equal(t, []string{"/usr/local/bin/" + bin}, c.Command, name)
		require.Equal(t, name, d.Spec.Template.Spec.ServiceAccountName)
		require.True(t, *d.Spec.Template.Spec.SecurityContext.RunAsNonRoot)
	}
	var agent appsv1.Deployment
	into(t, find(t, objs, "Deployment", "nestlet-agent"), &agent)
	require.Equal(t, int32(2), *agent.Spec.Replicas)
	args := agent.Spec.Template.Spec.Containers[0].Args
	require.Contains(t, args, "--leader-elect=true", "two agents must never work at once")
	require.Contains(t, args, "--leader-elect-resource-name=nestlet-agent")
	require.Contains(t, args, "--namespace=nestlet-system")
	require.Contains(t, args, "--trusted-schedulers=nestlet-scheduler")
	require.NotContains(t, strings.Join(args, " "), "--pod-cidr-pool", "no pool: children are granted only what nestctl grant says")
	var all appsv1.Deployment
	into(t, find(t, objects(t, render(t, testdata("values-all.yaml"))), "Deployment", "nestlet-agent"), &all)
	require.Subset(t, all.Spec.Template.Spec.Containers[0].Args, []string{"--pod-cidr-pool=10.128.0.0/9,fd00:128::/40", "--pod-cidr-pool-share=18"})
	// Without an election, one replica, and never two at once on a rollout.
	single, err := helm(t, nil, append(templateArgs(t), "--set", "agent.leaderElect=false", "--set", "agent.replicas=1")...)
	require.NoError(t, err)
	into(t, find(t, objects(t, single), "Deployment", "nestlet-agent"), &agent)
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, agent.Spec.Strategy.Type)
	require.NotContains(t, agent.Spec.Template.Spec.Containers[0].Args, "--leader-elect=true")
	_, err = helm(t, nil, append(templateArgs(t), "--set", "agent.leaderElect=false")...)
	require.ErrorContains(t, err, "agent.replicas > 1 needs agent.leaderElect")
	_, err = helm(t, nil, append(templateArgs(t), "--set", "proxy.enabled=true", "--set", "proxy.advertiseAddress=192.0.2.10", "--set", "proxy.replicas=2")...)
	require.ErrorContains(t, err, "proxy.replicas > 1 needs proxy.tls.secretName")

	// The scheduler runs the shipped profile, under the chart's name and
	// its own lease.
	var cm corev1.ConfigMap
	into(t, find(t, objs, "ConfigMap", "nestlet-scheduler"), &cm)
	var cfg struct {
		LeaderElection struct {
			LeaderElect       bool   `json:"leaderElect"`
			ResourceName      string `json:"resourceName"`
			ResourceNamespace string `json:"resourceNamespace"`
		} `json:"leaderElection"`
		Profiles []struct {
			SchedulerName string         `json:"schedulerName"`
			Plugins       map[string]any `json:"plugins"`
			PluginConfig  []any          `json:"pluginConfig"`
		} `json:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg))
	require.Len(t, cfg.Profiles, 1)
	require.Equal(t, "nestlet-scheduler", cfg.Profiles[0].SchedulerName)
	require.True(t, cfg.LeaderElection.LeaderElect)
	require.Equal(t, "nestlet-scheduler", cfg.LeaderElection.ResourceName)
	require.Equal(t, namespace, cfg.LeaderElection.ResourceNamespace)
	var shipped map[string]any
	require.NoError(t, yaml.Unmarshal(profile.SchedulerConfig(), &shipped))
	profile := shipped["profiles"].([]any)[0].(map[string]any)
	if diff := cmp.Diff(profile["plugins"], cfg.Profiles[0].Plugins); diff != "" {
		t.Errorf("plugins of the chart's profile (-shipped +chart):\n%s", diff)
	}
	if diff := cmp.Diff(profile["pluginConfig"], cfg.Profiles[0].PluginConfig); diff != "" {
		t.Errorf("pluginConfig of the chart's profile (-shipped +chart):\n%s", diff)
	}

	var kubeScheduler rbacv1.ClusterRoleBinding
	into(t, find(t, objs, "ClusterRoleBinding", "nestlet-scheduler-kube-scheduler"), &kubeScheduler)
	require.Equal(t, "system:kube-scheduler", kubeScheduler.RoleRef.Name)
}

func TestTemplateAll(t *testing.T) {
	objs := objects(t, render(t, testdata("values-all.yaml")))

	var proxy appsv1.Deployment
	into(t, find(t, objs, "Deployment", "nestlet-proxy"), &proxy)
	c := proxy.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/usr/local/bin/nestlet-proxy"}, c.Command)
	for _, arg := range []string{"--advertise-address=192.0.2.10", "--kubelet-port=30250", "--tunnel-port=30443", "--node-ports=30300-30301", "--direct-nodes=west,north", "--service-node-ports",
		"--tls-cert-file=/etc/nestlet-proxy/tls/tls.crt", "--tls-private-key-file=/etc/nestlet-proxy/tls/tls.key"} {
		require.Contains(t, c.Args, arg)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Equal(t, map[string]int32{"kubelet": 30250, "tunnel": 30443, "node-0": 30300, "node-1": 30301, "webhook": 9443}, ports)
	var svc corev1.Service
	into(t, find(t, objs, "Service", "nestlet-proxy"), &svc)
	require.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
	got := map[string][2]int32{}
	for _, p := range svc.Spec.Ports {
		got[p.Name] = [2]int32{p.Port, p.NodePort}
	}
	require.Equal(t, map[string][2]int32{"kubelet": {30250, 30250}, "tunnel": {30443, 30443}, "node-0": {30300, 30300}, "node-1": {30301, 30301}}, got)

	// Every component's ServiceAccount in both FlowSchemas; everything
	// but leader election at the controllers' level.
	for name, level := range map[string]string{"nestlet": "workload-high", "nestlet-leader-election": "leader-election"} {
		var fs flowcontrolv1.FlowSchema
		into(t, find(t, objs, "FlowSchema", name), &fs)
		require.Equal(t, level, fs.Spec.PriorityLevelConfiguration.Name, name)
		var sas []string
		for _, r := range fs.Spec.Rules {
			for _, s := range r.Subjects {
				require.Equal(t, flowcontrolv1.SubjectKindServiceAccount, s.Kind, name)
				require.Equal(t, namespace, s.ServiceAccount.Namespace, name)
				sas = append(sas, s.ServiceAccount.Name)
			}
		}
		require.ElementsMatch(t, []string{"nestlet-agent", "nestlet-routes", "nestlet-scheduler", "nestlet-proxy"}, sas, name)
	}

	var sched appsv1.Deployment
	into(t, find(t, objs, "Deployment", "nestlet-scheduler"), &sched)
	require.Equal(t, int32(2), *sched.Spec.Replicas)

	// Targets as nestctl join writes them: the token in a Secret of the
	// release namespace named after the Target.
	var tg v1alpha1.Target
	into(t, find(t, objs, "Target", "parent-root-example-com-6443"), &tg)
	want := v1alpha1.TargetSpec{
		ParentURL:               "https://root.example.com:6443",
		ClusterName:             "east",
		BootstrapTokenSecretRef: v1alpha1.SecretReference{Namespace: namespace, Name: "nestlet-token-parent-root-example-com-6443"},
		CACertHash:              "sha256:3d2bcd8e4de4b0e6a6c1ad5fae7b3b0b2a6f5c0a8d4bd6b3d5e4c3b2a1f0e9d8",
		ReportFrequency:         metav1.Duration{Duration: 10e9},
		Labels:                  map[string]string{"example.com/tier": "edge"},
		Taints:                  []corev1.Taint{{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
	}
	if diff := cmp.Diff(want, tg.Spec); diff != "" {
		t.Errorf("target spec (-want +got):\n%s", diff)
	}
	var secret corev1.Secret
	into(t, find(t, objs, "Secret", "nestlet-token-parent-root-example-com-6443"), &secret)
	require.Equal(t, "abcdef.0123456789abcdef", secret.StringData["token"])

	var backup v1alpha1.Target
	into(t, find(t, objs, "Target", "backup-parent"), &backup)
	require.Equal(t, v1alpha1.SecretReference{Namespace: namespace, Name: "backup-token"}, backup.Spec.BootstrapTokenSecretRef)
	require.True(t, bytes.HasPrefix(backup.Spec.CABundle, []byte("-----BEGIN CERTIFICATE-----\n")), "caBundle: %q", backup.Spec.CABundle)
	require.Empty(t, backup.Spec.CACertHash)
	require.Equal(t, "3s", backup.Spec.ReportFrequency.Duration.String())
}

func TestAgentKubeletAPI(t *testing.T) {
	tests := []struct {
		name    string
		set     []string
		args    []string
		notArgs []string
		podIP   bool
	}{
		{name: "auto", args: []string{"--kubelet-api=auto"}, notArgs: []string{"--kubelet-direct-address=$(POD_IP)"}},
		{name: "tunnel", set: []string{"agent.kubeletAPI=tunnel"}, args: []string{"--kubelet-api=tunnel"}},
		{name: "direct on the pod's IP", set: []string{"agent.kubeletAPI=direct"},
			args: []string{"--kubelet-api=direct", "--kubelet-direct-address=$(POD_IP)"}, podIP: true},
		{name: "direct on an address", set: []string{"agent.kubeletAPI=direct", "agent.kubeletDirectAddress=192.0.2.7"},
			args: []string{"--kubelet-api=direct", "--kubelet-direct-address=192.0.2.7"}},
		{name: "pods call the parent where its gateway relays it", args: []string{"--pod-api=auto"}},
		{name: "pods call this cluster", set: []string{"agent.podAPI=local"}, args: []string{"--pod-api=local"}},
		{name: "pods call the parent", set: []string{"agent.podAPI=origin"}, args: []string{"--pod-api=origin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := templateArgs(t)
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := helm(t, nil, args...)
			require.NoError(t, err)
			var d appsv1.Deployment
			into(t, find(t, objects(t, out), "Deployment", "nestlet-agent"), &d)
			c := d.Spec.Template.Spec.Containers[0]
			for _, a := range tt.args {
				require.Contains(t, c.Args, a)
			}
			for _, a := range tt.notArgs {
				require.NotContains(t, c.Args, a)
			}
			var env []string
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
				}
			}
			want := []string{"POD_NAME=metadata.name"} // the leader election's identity
			if tt.podIP {
				want = append(want, "POD_IP=status.podIP")
			}
			require.Equal(t, want, env)
		})
	}
}

// TestAgentGateway: with agent.gateway.enabled the agent pod runs the
// gateway on its node's network, as root with NET_ADMIN and no other
// capability, with /dev/net/tun; without it, none of that.
func TestAgentGateway(t *testing.T) {
	render := func(t *testing.T, set ...string) appsv1.Deployment {
		args := templateArgs(t)
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, nil, args...)
		require.NoError(t, err)
		var d appsv1.Deployment
		into(t, find(t, objects(t, out), "Deployment", "nestlet-agent"), &d)
		return d
	}
	d := render(t, "agent.gateway.enabled=true", "agent.gateway.endpoint=203.0.113.10:51820")
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	require.True(t, spec.HostNetwork)
	require.Equal(t, corev1.DNSClusterFirstWithHostNet, spec.DNSPolicy)
	require.Contains(t, c.Args, "--gateway")
	require.Contains(t, c.Args, "--gateway-endpoint=203.0.113.10:51820")
	require.Contains(t, c.Args, "--gateway-listen-port=51820")
	require.Contains(t, c.Args, "--direct-paths=8")
	require.NotContains(t, strings.Join(c.Args, " "), "--gateway-implementation", "auto is the agent's default")
	require.Equal(t, []corev1.Capability{"NET_ADMIN"}, c.SecurityContext.Capabilities.Add)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.Nil(t, c.SecurityContext.Privileged)
	require.Equal(t, "/dev/net/tun", c.VolumeMounts[0].MountPath)
	require.Equal(t, "/dev/net/tun", spec.Volumes[0].HostPath.Path)
	require.Empty(t, c.Ports, "on the node's network a declared port would keep a second replica off the node")

	require.NotContains(t, strings.Join(c.Args, " "), "--gateway-api-address", "no relay unless asked for")

	d = render(t, "agent.gateway.enabled=true", "agent.gateway.implementation=userspace")
	require.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--gateway-implementation=userspace")

	// The API relay: its address, and the capability to bind port 443.
	d = render(t, "agent.gateway.enabled=true", "agent.gateway.apiAddress=10.251.0.2")
	c = d.Spec.Template.Spec.Containers[0]
	require.Contains(t, c.Args, "--gateway-api-address=10.251.0.2")
	require.Equal(t, []corev1.Capability{"NET_ADMIN", "NET_BIND_SERVICE"}, c.SecurityContext.Capabilities.Add)

	// The route agents: on every node's network, NET_ADMIN only; the
	// agent publishes its node for them.
	out, err := helm(t, nil, append(templateArgs(t), "--set", "agent.gateway.enabled=true")...)
	require.NoError(t, err)
	objs := objects(t, out)
	var ds appsv1.DaemonSet
	into(t, find(t, objs, "DaemonSet", "nestlet-routes"), &ds)
	rs := ds.Spec.Template.Spec
	require.True(t, rs.HostNetwork)
	require.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, rs.Tolerations, "on every node")
	require.Equal(t, []corev1.NodeSelectorRequirement{{Key: api.LabelCluster, Operator: corev1.NodeSelectorOpDoesNotExist}},
		rs.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, "on no virtual node")
	rc := rs.Containers[0]
	require.Equal(t, []string{"/usr/local/bin/nestlet-routes"}, rc.Command)
	require.Contains(t, rc.Args, "--vxlan-port=4799")
	require.Equal(t, []corev1.Capability{"NET_ADMIN"}, rc.SecurityContext.Capabilities.Add)
	require.Nil(t, rc.SecurityContext.Privileged)
	require.Equal(t, "spec.nodeName", rc.Env[0].ValueFrom.FieldRef.FieldPath)
	into(t, find(t, objs, "Deployment", "nestlet-agent"), &d)
	require.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--gateway-node-name=$(NODE_NAME)")
	out, err = helm(t, nil, append(templateArgs(t), "--set", "agent.gateway.enabled=true", "--set", "agent.gateway.nodeRoutes.enabled=false")...)
	require.NoError(t, err)
	require.NotContains(t, out, "kind: DaemonSet", "route agents turned off")

	d = render(t)
	require.False(t, d.Spec.Template.Spec.HostNetwork)
	require.NotContains(t, d.Spec.Template.Spec.Containers[0].Args, "--gateway")
	require.Empty(t, d.Spec.Template.Spec.Volumes)

	args := append(templateArgs(t), "--set", "agent.gateway.enabled=true", "--set", "agent.gateway.implementation=fast")
	_, err = helm(t, nil, args...)
	require.ErrorContains(t, err, `agent.gateway.implementation must be auto, kernel or userspace, not "fast"`)
}

// The monitoring objects: a ServiceMonitor over the agents' metrics and a
// dashboard for Grafana's sidecar, neither by default.
func TestMonitoring(t *testing.T) {
	objs := objects(t, render(t))
	for _, kind := range []string{"ServiceMonitor", "ConfigMap"} {
		for _, o := range objs {
			require.False(t, o.GetKind() == kind && (strings.HasSuffix(o.GetName(), "-metrics") || strings.HasSuffix(o.GetName(), "-dashboard")), "%s %s by default", kind, o.GetName())
		}
	}
	args := append(templateArgs(t), "--set", "agent.metrics.enabled=true", "--set", "agent.metrics.serviceMonitor.enabled=true",
		"--set", "agent.metrics.serviceMonitor.labels.release=monitoring", "--set", "grafana.dashboard.enabled=true")
	out, err := helm(t, nil, args...)
	require.NoError(t, err)
	objs = objects(t, out)
	sm := find(t, objs, "ServiceMonitor", "nestlet-agent-metrics")
	require.Equal(t, "monitoring", sm.GetLabels()["release"])
	svc := find(t, objs, "Service", "nestlet-agent-metrics")
	selector, _, err := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	require.NoError(t, err)
	require.NotEmpty(t, selector)
	cm := find(t, objs, "ConfigMap", "nestlet-dashboard")
	require.Equal(t, "1", cm.GetLabels()["grafana_dashboard"])
	data, _, err := unstructured.NestedStringMap(cm.Object, "data")
	require.NoError(t, err)
	require.Len(t, data, 1)
	for _, dashboard := range data {
		var d struct{ Panels []any }
		require.NoError(t, json.Unmarshal([]byte(dashboard), &d))
		require.NotEmpty(t, d.Panels)
		for _, metric := range []string{"nestlet_gateway_path_direct", "nestlet_gateway_rtt_seconds", "nestlet_gateway_received_bytes_total", "nestlet_forward_latency_seconds"} {
			require.Contains(t, dashboard, metric)
		}
	}
	_, err = helm(t, nil, append(templateArgs(t), "--set", "agent.metrics.serviceMonitor.enabled=true")...)
	require.ErrorContains(t, err, "needs agent.metrics.enabled")
}

// Every flag the chart passes exists in the binary it runs: the chart and
// the commands are written apart.
func TestFlagsExist(t *testing.T) {
	bins, err := launcher.FindNestletBinaries("")
	require.NoError(t, err)
	binary := map[string]string{
		"/usr/local/bin/nestlet":           bins.Nestlet,
		"/usr/local/bin/nestlet-scheduler": bins.Scheduler,
		"/usr/local/bin/nestlet-proxy":     bins.Proxy,
		"/usr/local/bin/nestlet-routes":    filepath.Join(bins.Dir, "nestlet-routes"),
	}
	help := map[string]string{}
	flag := regexp.MustCompile(`^--[a-z0-9-]+`)
	for _, set := range [][]string{
		nil,
		{"agent.kubeletAPI=direct", "agent.metrics.enabled=true", "agent.groupKeys={a,b}"},
		{"proxy.enabled=true", "proxy.advertiseAddress=192.0.2.1", "proxy.tunnelURL=wss://lb:443/connect",
			"proxy.tls.secretName=s", "proxy.clientCA.configMapName=c", "webhook.enabled=true"},
		{"agent.gateway.enabled=true", "agent.gateway.apiAddress=10.251.0.1", "agent.gateway.endpoint=192.0.2.1:51820"},
	} {
		args := templateArgs(t)
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, nil, args...)
		require.NoError(t, err)
		for _, o := range objects(t, out) {
			var d appsv1.Deployment
			switch o.GetKind() {
			case "Deployment":
				into(t, o, &d)
			case "DaemonSet":
				var ds appsv1.DaemonSet
				into(t, o, &ds)
				d.Name, d.Spec.Template = ds.Name, ds.Spec.Template
			default:
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			require.Len(t, c.Command, 1)
			bin, ok := binary[c.Command[0]]
			require.True(t, ok, "unknown command %s", c.Command[0])
			if _, ok := help[bin]; !ok {
				// pflag prints the usage on --help and exits 0 (or 2 for
				// Go's flag package); either way the text is complete.
				out, _ := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
				help[bin] = string(out)
			}
			for _, a := range c.Args {
				name := flag.FindString(a)
				require.NotEmpty(t, name, "argument %q of %s", a, d.Name)
				require.Contains(t, help[bin], name+" ", "%s has no flag %s (passed by %s)", c.Command[0], name, d.Name)
			}
		}
	}
}

// Values that cannot work are refused with a message saying what to set.
func TestTemplateRejects(t *testing.T) {
	target := "targets[0].parentURL=https://p:6443,targets[0].clusterName=c,targets[0].token=abcdef.0123456789abcdef,targets[0].caCertHash=sha256:00"
	tests := []struct {
		name    string
		set     string
		message string
	}{
		{"proxy without an address", "proxy.enabled=true", "proxy.advertiseAddress is required"},
		{"webhook without the proxy", "webhook.enabled=true", "webhook.enabled needs proxy.enabled"},
		{"unknown kubelet API mode", "agent.kubeletAPI=listen", "agent.kubeletAPI must be auto, tunnel, direct or off"},
		{"unknown pod API", "agent.podAPI=parent", "agent.podAPI must be auto, local or origin"},
		{"replicas without leader election", "scheduler.replicas=2,scheduler.leaderElect=false", "needs scheduler.leaderElect"},
		{"target without a parent", "targets[0].clusterName=c", "targets[0].parentURL is required"},
		{"target over http", strings.Replace(target, "https://", "http://", 1), "must be https://"},
		{"target without a name", strings.Replace(target, "targets[0].clusterName=c,", "", 1), "targets[0].clusterName is required"},
		{"target without a token", strings.Replace(target, ",targets[0].token=abcdef.0123456789abcdef", "", 1), "exactly one of token and existingSecret"},
		{"target with two tokens", target + ",targets[0].existingSecret=s", "exactly one of token and existingSecret"},
		{"target with two CAs", target + ",targets[0].caBundle=x", "exactly one of caCertHash and caBundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helm(t, nil, append(templateArgs(t), "--set", tt.set)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.message)
		})
	}
}

// The chart carries a copy of the shipped scheduler profile (helm reads no
// file outside the chart): it must stay the very same file.
func TestSchedulerProfileIsTheShippedOne(t *testing.T) {
	copied, err := os.ReadFile(filepath.Join(chartDir(t), "files", "scheduler-config.yaml"))
	require.NoError(t, err)
	if diff := cmp.Diff(string(profile.SchedulerConfig()), string(copied)); diff != "" {
		t.Errorf("charts/nestlet/files/scheduler-config.yaml differs from scheduler-plugins/profile/scheduler-config.yaml; copy it again (-shipped +chart):\n%s", diff)
	}
}

var valueKey = regexp.MustCompile(`^(\s*)([A-Za-z][\w.-]*):(.*)$`)

// Every value of values.yaml is documented, helm-docs style: a comment
// block holding a "# --" line right above it, or above one of its parents
// (a documented map documents its keys). Section comments without "# --"
// document nothing.
func TestValuesAreCommented(t *testing.T) {
	f, err := os.Open(filepath.Join(chartDir(t), "values.yaml"))
	require.NoError(t, err)
	defer f.Close()
	type level struct {
		indent     int
		documented bool
	}
	var (
		stack []level
		doc   bool // the comment block just above documents a value
		n     int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			doc = doc || strings.HasPrefix(trimmed, "# --")
			continue
		}
		m := valueKey.FindStringSubmatch(line)
		if m == nil {
			doc = false
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		documented := doc || (len(stack) > 0 && stack[len(stack)-1].documented)
		value := strings.TrimSpace(strings.SplitN(m[3], "#", 2)[0])
		if value != "" && !documented {
			t.Errorf("values.yaml:%d: %s has no \"# --\" comment", n, m[2])
		}
		stack = append(stack, level{indent, documented})
		doc = false
	}
	require.NoError(t, sc.Err())
}

// requirePolicy checks that objs hold want and its binding, as they are.
func requirePolicy(t *testing.T, objs []*unstructured.Unstructured, want *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var got admissionregistrationv1.ValidatingAdmissionPolicy
	into(t, find(t, objs, "ValidatingAdmissionPolicy", want.Name), &got)
	require.Equal(t, want.Spec, got.Spec)
	var gotBinding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	into(t, find(t, objs, "ValidatingAdmissionPolicyBinding", binding.Name), &gotBinding)
	require.Equal(t, binding.Spec, gotBinding.Spec)
}

// The chart's policy of children is the file the launcher installs
// (charts/nestlet/policies), with the chart's labels, bound to the record
// of the children the agent keeps in its namespace (api.ChildrenConfigMap).
func TestChildrenPolicy(t *testing.T) {
	objs := objects(t, render(t))
	want, binding, err := policies.Children(namespace)
	require.NoError(t, err)
	requirePolicy(t, objs, want, binding)
	require.Equal(t, api.ChildrenConfigMap, binding.Spec.ParamRef.Name)

	// And the policy of children's kubelet endpoints, bound to the proxy's
	// record in kube-public.
	want, binding, err = policies.ChildrenKubelet()
	require.NoError(t, err)
	requirePolicy(t, objs, want, binding)
	require.Equal(t, "kube-public", binding.Spec.ParamRef.Namespace)

	// And its priority level and FlowSchema, whose subjects the agent keeps.
	level, schema, err := policies.ChildrenFlow()
	require.NoError(t, err)
	var gotLevel flowcontrolv1.PriorityLevelConfiguration
	into(t, find(t, objs, "PriorityLevelConfiguration", level.Name), &gotLevel)
	require.Equal(t, level.Spec, gotLevel.Spec)
	var gotSchema flowcontrolv1.FlowSchema
	into(t, find(t, objs, "FlowSchema", schema.Name), &gotSchema)
	require.Equal(t, schema.Spec, gotSchema.Spec)
	require.Equal(t, api.ChildrenFlowSchema, schema.Name)
}
