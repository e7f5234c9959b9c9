package child

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/forward"
)

// namespacePolicy is what the forwarder of Target t accepts of the parent's
// namespaces (spec.namespaces; docs/tenants.md). The default prefix of the
// Prefixed mapping is the parent's cluster name, or the Target's name when
// the parent publishes none that can start a namespace name.
func namespacePolicy(t *v1alpha1.Target, parent, agentNamespace string) forward.Namespaces {
	out := forward.Namespaces{Own: []string{agentNamespace}}
	np := t.Spec.Namespaces
	if np == nil {
		return out
	}
	out.Accept = np.Accept
	if np.Mapping == v1alpha1.NamespaceMappingPrefixed {
		out.Prefix = np.Prefix
		if out.Prefix == "" {
			name := parent
			if len(validation.IsDNS1123Label(name)) > 0 || len(name) > 40 {
				name = t.Name
			}
			out.Prefix = strings.TrimSuffix(name, "-") + "-"
		}
	}
	return out
}
