// Package profile embeds the Nestlet scheduler profile, so that the test
// clusters, the demo and the chart run the very same file.
package profile

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
)

//go:embed scheduler-config.yaml
var schedulerConfig []byte

// SchedulerConfig returns the profile as shipped.
func SchedulerConfig() []byte { return append([]byte(nil), schedulerConfig...) }

// ForKubeconfig returns the profile with the client's kubeconfig and leader
// election set, for one scheduler process.
func ForKubeconfig(kubeconfig string, leaderElect bool) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(schedulerConfig, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the scheduler profile: %w", err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": leaderElect}
	return yaml.Marshal(cfg)
}
