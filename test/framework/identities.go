package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/pkg/permissions"
	"github.com/nestlet/nestlet/provider/agent"
	"github.com/nestlet/nestlet/proxy"
)

// ChartIdentities are the permissions the chart gives the agent and the
// proxy (their Permissions, which test/e2e/chart checks the rendered chart
// against): the tests' Environments run the launcher's host-process
// agents and proxies with them, never as admin, so that every e2e test
// proves them enough.
func ChartIdentities() map[string][]permissions.Rule {
	return map[string][]permissions.Rule{launcher.ComponentAgent: agent.Permissions, launcher.ComponentProxy: proxy.Permissions}
}

// withChartIdentities sets cfg's identities to the chart's when it names
// none.
func withChartIdentities(cfg launcher.Config) launcher.Config {
	if cfg.Identities == nil {
		cfg.Identities = ChartIdentities()
	}
	return cfg
}

// Refusals returns the log lines in which the API server of their own
// cluster refused an agent or a proxy of env something its identity
// (env.Identities) does not grant: a permission the chart lacks. A refusal
// of something granted is the authorizer of an API server that has just
// started and not yet loaded the bindings (the fault tests restart API
// servers); the components retry those, and they are left out.
func Refusals(env *launcher.Environment) []string {
	var out []string
	for _, p := range env.Processes() {
		if _, _, ok := launcher.ProcessComponent(p.Name); !ok {
			continue
		}
		f, err := os.Open(p.LogPath)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", p.Name, err))
			continue
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 64<<10), 4<<20)
		for s.Scan() {
			if line := strings.ReplaceAll(s.Text(), `\"`, `"`); refusedUngranted(env.Identities, line) {
				out = append(out, p.Name+": "+line)
			}
		}
		_ = f.Close()
	}
	return out
}

// refusal is the authorizer's message: [<resource>[.<group>] "<name>"] is
// forbidden: User "system:serviceaccount:<ns>:nestlet-<component>" cannot
// <verb> resource "<resource>" in API group "<group>" (in the namespace
// "<ns>" | at the cluster scope).
var refusal = regexp.MustCompile(`(?:"([^"]+)" )?is forbidden: User "system:serviceaccount:([^:"]+):nestlet-([a-z]+)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)")?`)

// refusedUngranted reports whether line holds a refusal of what the
// component's rules in identities do not grant.
func refusedUngranted(identities map[string][]permissions.Rule, line string) bool {
	m := refusal.FindStringSubmatch(line)
	if m == nil {
		return strings.Contains(line, "forbidden") && strings.Contains(line, "system:serviceaccount:")
	}
	name, saNamespace, component, verb, resource, group, namespace := m[1], m[2], m[3], m[4], m[5], m[6], m[7]
	grants := map[string]bool{}
	for _, g := range permissions.Grants(identities[component], saNamespace) {
		grants[g] = true
	}
	if group == "" {
		group = "core"
	}
	for _, scope := range []string{"cluster", namespace} {
		for _, n := range []string{"(any)", name} {
			if scope != "" && n != "" && grants[fmt.Sprintf("%s %s/%s %s %s", scope, group, resource, n, verb)] {
				return false
			}
		}
	}
	return true
}

// ChildNodeConfig returns the client config of child's node identity in
// parent, from the Secret child's agent keeps for its Target target: what
// the child's agent, or anyone holding its credential, may do there. The
// Secret is returned too (its certificate, key and the parent's CA).
func ChildNodeConfig(ctx context.Context, child, parent *launcher.Cluster, target string) (*rest.Config, *corev1.Secret, error) {
	sec, err := child.Client.CoreV1().Secrets(api.DefaultNamespace).Get(ctx, api.IdentitySecretName(target), metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("the node identity of %s's Target %s: %w", child.Name, target, err)
	}
	return &rest.Config{Host: parent.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: sec.Data["ca.crt"], CertData: sec.Data[corev1.TLSCertKey], KeyData: sec.Data[corev1.TLSPrivateKeyKey]}}, sec, nil
}
