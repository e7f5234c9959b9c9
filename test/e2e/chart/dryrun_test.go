package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestServerDryRun applies what the chart renders to a real API server in
// server-side dry-run mode: every object passes authentication,
// admission, the CRD's schema and validation rules and RBAC's escalation
// checks, without being created. Then it checks that a Target rendered
// from values is the one `nestctl join` writes, and that nestlet-scheduler
// accepts the chart's profile.
func TestServerDryRun(t *testing.T) {
	env := framework.StartForTest(t, launcher.Spec{Clusters: []launcher.ClusterOptions{{Name: "chart"}}})
	c := env.Cluster("chart")
	ctx := t.Context()
	// As `helm install` does: CRDs (the chart's crds/) first, into the
	// release namespace.
	require.NoError(t, c.InstallCRDs(ctx))
	require.NoError(t, c.EnsureNamespace(ctx, namespace))

	lint, err := helm(t, nil, "lint", chartDir(t), "--namespace", namespace, "--values", testdata("values-all.yaml"))
	require.NoError(t, err, "helm lint:\n%s", lint)

	for _, values := range [][]string{nil, {testdata("values-all.yaml")}} {
		t.Run("values="+strings.Join(values, ","), func(t *testing.T) {
			manifests := render(t, values...)
			objs := objects(t, manifests)
			require.NotEmpty(t, objs)
			out := kubectl(t, env, c, manifests, "apply", "--dry-run=server", "-f", "-")
			require.Equal(t, len(objs), strings.Count(out, " created (server dry run)"), "objects applied:\n%s", out)
			for _, o := range objs {
				// kubectl prints "<resource>/<name> created (server dry run)".
				require.Contains(t, out, "/"+o.GetName()+" created (server dry run)", "%s %s", o.GetKind(), o.GetName())
			}
		})
	}

	for name, args := range kindValues(t) {
		t.Run("kind cluster "+name, func(t *testing.T) {
			out, err := helm(t, nil, append(templateArgs(t), args...)...)
			require.NoError(t, err)
			applied := kubectl(t, env, c, out, "apply", "--dry-run=server", "-f", "-")
			require.Equal(t, len(objects(t, out)), strings.Count(applied, " created (server dry run)"), "objects applied:\n%s", applied)
		})
	}

	// Nothing was created.
	targets, err := v1alpha1.NewTargetClient(c.Config)
	require.NoError(t, err)
	list, err := targets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "a dry run created Targets")

	t.Run("a Target from values is what nestctl join writes", func(t *testing.T) {
		const (
			parentURL = "https://root.example.com:6443"
			token     = "abcdef.0123456789abcdef"
			hash      = "sha256:3d2bcd8e4de4b0e6a6c1ad5fae7b3b0b2a6f5c0a8d4bd6b3d5e4c3b2a1f0e9d8"
		)
		// No agent runs in this cluster: the Target stays as written.
		_, err := c.Nestctl(ctx, "join", "--parent-url", parentURL, "--token", token, "--ca-cert-hash", hash, "--cluster-name", "east")
		require.NoError(t, err)
		valuesFile := filepath.Join(t.TempDir(), "values.yaml")
		require.NoError(t, os.WriteFile(valuesFile, []byte(strings.Join([]string{
			"scheduler: {enabled: false}",
			"agent: {enabled: false}",
			"targets:",
			"- {parentURL: '" + parentURL + "', clusterName: east, token: '" + token + "', caCertHash: '" + hash + "'}",
		}, "\n")), 0o644))
		objs := objects(t, render(t, valuesFile))

		var fromChart v1alpha1.Target
		into(t, find(t, objs, "Target", "parent-root-example-com-6443"), &fromChart)
		fromJoin, err := targets.Get(ctx, fromChart.Name, metav1.GetOptions{})
		require.NoError(t, err, "nestctl join and the chart name the Target alike")
		if diff := cmp.Diff(fromJoin.Spec, fromChart.Spec); diff != "" {
			t.Errorf("Target spec (-nestctl join +chart):\n%s", diff)
		}
		// Both write the agent's finalizer, so that it need not.
		require.Equal(t, []string{api.FinalizerCleanup}, fromJoin.Finalizers, "nestctl join's Target")
		require.Equal(t, fromJoin.Finalizers, fromChart.Finalizers, "the chart's Target")
		var secret corev1.Secret
		into(t, find(t, objs, "Secret", fromChart.Spec.BootstrapTokenSecretRef.Name), &secret)
		joined, err := c.Client.CoreV1().Secrets(namespace).Get(ctx, fromJoin.Spec.BootstrapTokenSecretRef.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, string(joined.Data["token"]), secret.StringData["token"])
	})

	t.Run("nestlet-scheduler accepts the chart's profile", func(t *testing.T) {
		tests := []struct {
			name    string
			set     string
			refused string // empty: accepted
		}{
			{name: "as shipped"},
			{name: "tuned", set: "scheduler.pluginConfig[0].name=Watermark,scheduler.pluginConfig[0].args.mode=pack"},
			{name: "a bad mode", set: "scheduler.pluginConfig[0].name=Watermark,scheduler.pluginConfig[0].args.mode=fill", refused: "Watermark args: mode must be"},
		}
		bins, err := launcher.FindNestletBinaries("")
		require.NoError(t, err)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				args := append(templateArgs(t, testdata("values-all.yaml")), "--show-only", "templates/scheduler-configmap.yaml")
				if tt.set != "" {
					args = append(args, "--set", tt.set)
				}
				out, err := helm(t, nil, args...)
				require.NoError(t, err)
				var cm corev1.ConfigMap
				into(t, find(t, objects(t, out), "ConfigMap", "nestlet-scheduler"), &cm)
				var cfg map[string]any
				require.NoError(t, yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg))
				// In a pod the service account is used; here, the admin
				// kubeconfig.
				cfg["clientConnection"].(map[string]any)["kubeconfig"] = c.KubeconfigPath
				data, err := yaml.Marshal(cfg)
				require.NoError(t, err)
				dir := t.TempDir()
				config, written := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "written.yaml")
				require.NoError(t, os.WriteFile(config, data, 0o644))
				// --write-config-to builds every profile (the plugins
				// validate their arguments), writes the completed
				// configuration and exits.
				cmd := exec.CommandContext(ctx, bins.Scheduler, "--config="+config, "--secure-port=0", "--write-config-to="+written)
				log, err := cmd.CombinedOutput()
				if tt.refused != "" {
					require.Error(t, err)
					require.Contains(t, string(log), tt.refused)
					return
				}
				require.NoError(t, err, "nestlet-scheduler refused the chart's profile:\n%s", log)
				got, err := os.ReadFile(written)
				require.NoError(t, err)
				for _, want := range []string{"schedulerName: default-scheduler", "name: Watermark", "name: SummaryAffinity", "name: LoopGuard"} {
					require.Contains(t, string(got), want)
				}
			})
		}
	})
}

// kubectl runs the pinned kubectl against cluster c with stdin and returns
// its output; it fails the test on error.
func kubectl(t *testing.T, env *launcher.Environment, c *launcher.Cluster, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), env.Binaries.Kubectl, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "kubectl %v:\n%s%s", args, stdout.String(), stderr.String())
	return stdout.String()
}
