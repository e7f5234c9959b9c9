package profile

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/yaml"

	"github.com/nestlet/nestlet/scheduler-plugins/loopguard"
	"github.com/nestlet/nestlet/scheduler-plugins/pathlength"
	"github.com/nestlet/nestlet/scheduler-plugins/reservation"
	"github.com/nestlet/nestlet/scheduler-plugins/summaryaffinity"
	"github.com/nestlet/nestlet/scheduler-plugins/treeaffinity"
	"github.com/nestlet/nestlet/scheduler-plugins/treespread"
	"github.com/nestlet/nestlet/scheduler-plugins/watermark"
)

// profileFile is the part of the profile the tests read.
type profileFile struct {
	APIVersion       string `json:"apiVersion"`
	Kind             string `json:"kind"`
	ClientConnection struct {
		Kubeconfig *string `json:"kubeconfig"`
		QPS        float64 `json:"qps"`
		Burst      int     `json:"burst"`
	} `json:"clientConnection"`
	LeaderElection *struct {
		LeaderElect *bool `json:"leaderElect"`
	} `json:"leaderElection"`
	Profiles []profile `json:"profiles"`
}

type profile struct {
	SchedulerName string `json:"schedulerName"`
	Plugins       struct {
		Filter   pluginSet `json:"filter"`
		Score    pluginSet `json:"score"`
		Reserve  pluginSet `json:"reserve"`
		Permit   pluginSet `json:"permit"`
		PostBind pluginSet `json:"postBind"`
		Bind     pluginSet `json:"bind"`
	} `json:"plugins"`
	PluginConfig []struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"pluginConfig"`
}

type pluginSet struct {
	Enabled  []plugin `json:"enabled"`
	Disabled []plugin `json:"disabled"`
}

type plugin struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
}

func names(ps []plugin) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func parse(t *testing.T, raw []byte) profileFile {
	t.Helper()
	var f profileFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	return f
}

func TestSchedulerConfig(t *testing.T) {
	f := parse(t, SchedulerConfig())
	require.Equal(t, "kubescheduler.config.k8s.io/v1", f.APIVersion)
	require.Equal(t, "KubeSchedulerConfiguration", f.Kind)
	require.Equal(t, 500.0, f.ClientConnection.QPS)
	require.Equal(t, 1000, f.ClientConnection.Burst)
	require.Nil(t, f.ClientConnection.Kubeconfig)
	require.Nil(t, f.LeaderElection)

	require.Len(t, f.Profiles, 1)
	p := f.Profiles[0]
	require.Equal(t, "default-scheduler", p.SchedulerName)
	for _, name := range []string{summaryaffinity.Name, loopguard.Name, watermark.Name, treespread.Name, treeaffinity.Name, reservation.Name} {
		require.Contains(t, names(p.Plugins.Filter.Enabled), name)
	}
	require.ElementsMatch(t, []string{"NodeAffinity", "TaintToleration", "PodTopologySpread", "InterPodAffinity", "NodePorts"}, names(p.Plugins.Filter.Disabled))
	// Reservation: asked at Permit, withdrawn at Unreserve, forgotten at
	// PostBind.
	require.Equal(t, []string{reservation.Name}, names(p.Plugins.Permit.Enabled))
	require.Equal(t, []string{reservation.Name}, names(p.Plugins.PostBind.Enabled))
	// TreeSpread binds every pod: the default binder would bind first.
	require.Equal(t, []string{treespread.Name}, names(p.Plugins.Bind.Enabled))
	require.Equal(t, []string{"DefaultBinder"}, names(p.Plugins.Bind.Disabled))
	require.Equal(t, []string{treespread.Name, reservation.Name}, names(p.Plugins.Reserve.Enabled))
	require.Equal(t, []plugin{{Name: watermark.Name, Weight: 10}, {Name: pathlength.Name, Weight: 20}}, p.Plugins.Score.Enabled)

	args := map[string]map[string]any{}
	for _, c := range p.PluginConfig {
		args[c.Name] = c.Args
	}
	require.Equal(t, "spread", args[watermark.Name]["mode"])
	require.Equal(t, map[string]any{"cpu": 0.95, "memory": 0.95, "pods": 1.0}, args[watermark.Name]["highWatermark"])
	require.Equal(t, 8.0, args[loopguard.Name]["hopLimit"])

	// Each call returns its own copy.
	a := SchedulerConfig()
	copy(a, "garbage")
	require.Equal(t, schedulerConfig, SchedulerConfig())
	require.NotEqual(t, a, SchedulerConfig())
}

// load reads raw as kube-scheduler does (strict decoding, defaults,
// validation) and builds the Nestlet plugins from its pluginConfig.
func load(t *testing.T, raw []byte) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(raw, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "KubeSchedulerConfiguration", gvk.Kind)
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	require.True(t, ok, "decoded %T", obj)
	require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))

	require.Len(t, cfg.Profiles, 1)
	prof := cfg.Profiles[0]
	require.Equal(t, "default-scheduler", prof.SchedulerName)
	var filters, scores []string
	for _, p := range prof.Plugins.Filter.Enabled {
		filters = append(filters, p.Name)
	}
	for _, p := range prof.Plugins.Score.Enabled {
		scores = append(scores, p.Name)
	}
	for _, name := range []string{summaryaffinity.Name, loopguard.Name, watermark.Name, treespread.Name, treeaffinity.Name} {
		require.Contains(t, filters, name)
	}
	require.Contains(t, scores, watermark.Name)
	require.Contains(t, scores, pathlength.Name)
	for _, p := range prof.Plugins.Filter.Disabled {
		require.NotContains(t, filters, p.Name)
	}
	require.True(t, slices.ContainsFunc(prof.Plugins.Filter.Disabled, func(p schedconfig.Plugin) bool { return p.Name == "NodeAffinity" }))
	require.True(t, slices.ContainsFunc(prof.Plugins.Filter.Disabled, func(p schedconfig.Plugin) bool { return p.Name == "TaintToleration" }))

	factories := map[string]func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error){
		watermark.Name:       watermark.New,
		loopguard.Name:       loopguard.New,
		summaryaffinity.Name: summaryaffinity.New,
		pathlength.Name:      pathlength.New,
		treespread.Name:      treespread.New,
		reservation.Name:     reservation.New,
	}
	args := map[string]runtime.Object{}
	for _, c := range prof.PluginConfig {
		args[c.Name] = c.Args
	}
	require.IsType(t, &runtime.Unknown{}, args[watermark.Name])
	require.IsType(t, &runtime.Unknown{}, args[loopguard.Name])
	for name, factory := range factories {
		p, err := factory(context.Background(), args[name], nil)
		require.NoError(t, err, name)
		require.Equal(t, name, p.Name())
	}
	return cfg
}

func TestSchedulerConfigLoads(t *testing.T) {
	cfg := load(t, SchedulerConfig())
	require.Equal(t, float32(500), cfg.ClientConnection.QPS)
	require.Equal(t, int32(1000), cfg.ClientConnection.Burst)
}

func TestForKubeconfig(t *testing.T) {
	shipped := parse(t, SchedulerConfig())
	tests := []struct {
		name        string
		kubeconfig  string
		leaderElect bool
	}{
		{name: "leader election", kubeconfig: "/etc/nestlet/scheduler.kubeconfig", leaderElect: true},
		{name: "single scheduler", kubeconfig: "/tmp/kc", leaderElect: false},
		{name: "in-cluster", kubeconfig: "", leaderElect: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := ForKubeconfig(tt.kubeconfig, tt.leaderElect)
			require.NoError(t, err)

			f := parse(t, raw)
			require.NotNil(t, f.ClientConnection.Kubeconfig)
			require.Equal(t, tt.kubeconfig, *f.ClientConnection.Kubeconfig)
			require.NotNil(t, f.LeaderElection)
			require.NotNil(t, f.LeaderElection.LeaderElect)
			require.Equal(t, tt.leaderElect, *f.LeaderElection.LeaderElect)
			require.Equal(t, shipped.ClientConnection.QPS, f.ClientConnection.QPS)
			require.Equal(t, shipped.ClientConnection.Burst, f.ClientConnection.Burst)
			require.Equal(t, shipped.APIVersion, f.APIVersion)
			require.Equal(t, shipped.Kind, f.Kind)
			require.Equal(t, shipped.Profiles, f.Profiles)

			cfg := load(t, raw)
			require.Equal(t, tt.kubeconfig, cfg.ClientConnection.Kubeconfig)
			require.Equal(t, tt.leaderElect, cfg.LeaderElection.LeaderElect)
			require.Equal(t, float32(500), cfg.ClientConnection.QPS)
			require.Equal(t, int32(1000), cfg.ClientConnection.Burst)

			// The shipped profile is left as it is.
			require.Equal(t, schedulerConfig, SchedulerConfig())
		})
	}
}

func TestForKubeconfigOtherProfiles(t *testing.T) {
	shipped := schedulerConfig
	t.Cleanup(func() { schedulerConfig = shipped })
	tests := []struct {
		name    string
		profile string
		wantErr string
	}{
		{name: "without clientConnection", profile: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"},
		{name: "with a leaderElection", profile: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
			"leaderElection:\n  leaderElect: true\n"},
		{name: "malformed", profile: "clientConnection: [\n", wantErr: "parsing the scheduler profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schedulerConfig = []byte(tt.profile)
			raw, err := ForKubeconfig("/tmp/kc", false)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			f := parse(t, raw)
			require.Equal(t, "/tmp/kc", *f.ClientConnection.Kubeconfig)
			require.False(t, *f.LeaderElection.LeaderElect)
		})
	}
}
