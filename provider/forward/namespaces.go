package forward

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nestlet/nestlet/api"
)

// Namespaces is what this cluster accepts of a parent's namespaces, and
// under which names (Target spec.namespaces; docs/tenants.md). The zero
// value takes every namespace of the parent but its system ones, under
// the same names.
type Namespaces struct {
	// Prefix starts the name here of every namespace of the parent
	// (Mapping Prefixed); empty, a namespace keeps its name.
	Prefix string
	// Accept lists the parent namespaces taken; empty, every one but
	// SystemNamespaces; "*", every one.
	Accept []string
	// Own are this cluster's namespaces that never take a parent's pods,
	// beside api.SystemNamespaces (the agent's namespace).
	Own []string
}

// Child returns the name here of the parent namespace ns, or why a pod of
// it is refused here.
func (n Namespaces) Child(ns string) (string, string) {
	switch {
	case slices.Contains(n.Accept, ns) || slices.Contains(n.Accept, "*"):
	case len(n.Accept) > 0:
		return "", fmt.Sprintf("this cluster takes pods of the parent's namespaces %s only (Target spec.namespaces.accept), not of %s", strings.Join(n.Accept, ", "), ns)
	case api.IsSystemNamespace(ns):
		return "", fmt.Sprintf("namespace %s is a system namespace: its pods stay in their cluster (a child admin who wants them lists it in Target spec.namespaces.accept, with mapping Prefixed)", ns)
	}
	name := n.Prefix + ns
	if api.IsSystemNamespace(name) || slices.Contains(n.Own, name) {
		return "", fmt.Sprintf("namespace %s is a system namespace here: a parent's pods never run in it (Target spec.namespaces.mapping Prefixed gives the parent's namespaces names of their own)", name)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return "", fmt.Sprintf("namespace %s of the parent would be %s here, which is not a namespace name (%s): shorten the Target's spec.namespaces.prefix", ns, name, strings.Join(errs, "; "))
	}
	return name, ""
}

// Name returns the name here of the parent namespace ns, accepted or not
// (for lookups of what was made for it).
func (n Namespaces) Name(ns string) string { return n.Prefix + ns }

// Parent returns the parent namespace whose name here is ns, and false
// when ns is no parent namespace's name here.
func (n Namespaces) Parent(ns string) (string, bool) {
	if !strings.HasPrefix(ns, n.Prefix) || len(ns) == len(n.Prefix) {
		return "", false
	}
	return strings.TrimPrefix(ns, n.Prefix), true
}

// admitNamespace tells why pod may not be forwarded here for its
// namespace, or "".
func (p *Provider) admitNamespace(pod *corev1.Pod) string {
	_, why := p.cfg.Namespaces.Child(pod.Namespace)
	return why
}

// ns returns the name here of the parent namespace ns.
func (p *Provider) ns(ns string) string { return p.cfg.Namespaces.Name(ns) }

// parentNS returns the parent namespace of the namespace ns here.
func (p *Provider) parentNS(ns string) (string, bool) { return p.cfg.Namespaces.Parent(ns) }
