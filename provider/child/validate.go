package child

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/summary"
)

// validateSpec checks what the CRD schema cannot: labels and taints the
// parent's NodeRestriction admission would refuse, or that would collide
// with what Nestlet sets itself; limits below zero; accepted namespaces
// that are no namespace names.
func validateSpec(t *v1alpha1.Target) error {
	var problems []string
	// The name is also a label value (an older schema allowed 253
	// characters).
	if errs := validation.IsValidLabelValue(t.Spec.ClusterName); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("clusterName %q is also the value of the virtual node's label %s: %s", t.Spec.ClusterName, api.LabelCluster, strings.Join(errs, "; ")))
	}
	if len(t.Spec.CABundle) > 0 {
		if _, err := certutil.ParseCertsPEM(t.Spec.CABundle); err != nil {
			problems = append(problems, fmt.Sprintf("caBundle: %v (PEM-encoded CA certificates of the parent)", err))
		}
	}
	for k, v := range t.Spec.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("label key %q: %s", k, strings.Join(errs, "; ")))
			continue
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("label %s value %q: %s", k, v, strings.Join(errs, "; ")))
		}
		if !summary.NodeMaySetLabel(k) {
			problems = append(problems, fmt.Sprintf("label %q may not be set by a node (NodeRestriction): use a key outside kubernetes.io and k8s.io, or topology.kubernetes.io/*", k))
		}
		if k == api.LabelCluster || k == api.LabelNodeType {
			problems = append(problems, fmt.Sprintf("label %q is set by Nestlet", k))
		}
	}
	for _, taint := range t.Spec.Taints {
		if taint.Key == api.TaintKeyProvider || taint.Key == api.TaintKeyVersionSkew {
			problems = append(problems, fmt.Sprintf("taint %q is set by Nestlet", taint.Key))
		}
		if errs := validation.IsQualifiedName(taint.Key); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("taint key %q: %s", taint.Key, strings.Join(errs, "; ")))
		}
	}
	for name, q := range t.Spec.Limits {
		if q.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("limits %s is %s: a limit is not negative", name, q.String()))
		}
	}
	if np := t.Spec.Namespaces; np != nil {
		for _, ns := range np.Accept {
			if errs := validation.IsDNS1123Label(ns); ns != "*" && len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("namespaces.accept %q is not a namespace name: %s", ns, strings.Join(errs, "; ")))
			}
		}
		if np.Prefix != "" && np.Mapping != v1alpha1.NamespaceMappingPrefixed {
			problems = append(problems, fmt.Sprintf("namespaces.prefix %q goes with mapping %s", np.Prefix, v1alpha1.NamespaceMappingPrefixed))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return join.Errorf(v1alpha1.ReasonInvalidSpec, nil, "fix the Target: %s", strings.Join(problems, "; "))
}
