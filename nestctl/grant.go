package nestctl

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
)

// GrantOptions say how `nestctl grant` changes a child's grant: Set (CIDRs,
// "10.1.0.0/16,fd00:1::/48"), Claimed (what the child claims now, but what
// another child holds and this cluster's own) or Remove (the pool applies
// again); none: it only shows. AgentNamespace is where this cluster's
// agent records the children's shares of its pool (api.ChildrenConfigMap).
type GrantOptions struct {
	Set            string
	Claimed        bool
	Remove         bool
	AgentNamespace string
}

// Grant shows the pod CIDRs this cluster (the child's parent) grants child
// (api.PodCIDRGrantsConfigMap), what the child claims and what its agent
// refuses of that, after changing the grant as o says. It returns what it
// has to say.
func Grant(ctx context.Context, client kubernetes.Interface, child string, o GrantOptions) ([]string, error) {
	var out []string
	node, err := client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %s: %w", child, err)
	}
	var claimed []netip.Prefix
	if err == nil {
		if sum, ok := api.ParseSummary(node); ok {
			claimed = podcidrs.Strings(sum.PodCIDRs)
		}
	}
	var next []netip.Prefix
	switch {
	case o.Remove:
	case o.Claimed:
		if len(claimed) == 0 {
			return nil, fmt.Errorf("%s claims no pod CIDRs (no virtual node, or no summary with pod CIDRs): name them", child)
		}
		held, err := heldElsewhere(ctx, client, child, o.AgentNamespace)
		if err != nil {
			return nil, err
		}
		claim := podcidrs.SetOf(claimed)
		next = claim.Minus(held).Prefixes()
		if left := claim.Intersect(held); !left.Empty() {
			out = append(out, "not granted, held by another child or this cluster's own: "+podcidrs.Format(left.Prefixes()))
		}
		if len(next) == 0 {
			return out, fmt.Errorf("nothing %s claims is free to grant", child)
		}
	case o.Set != "":
		if next, err = podcidrs.Parse(o.Set); err != nil {
			return nil, err
		}
	}
	if o.Remove || o.Claimed || o.Set != "" {
		if err := podcidrs.Record(ctx, client, child, next, "nestctl"); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("configmap/%s: pod CIDRs of %s set", api.PodCIDRGrantsConfigMap, child))
	}
	granted, err := readGrant(ctx, client, child)
	if err != nil {
		return out, err
	}
	if granted == "" {
		out = append(out, fmt.Sprintf("%s has no grant of its own: it may claim a share of this cluster's pool (the agent's --pod-cidr-pool), if it has one", child))
	} else {
		out = append(out, "granted: "+granted)
	}
	switch {
	case node == nil || node.Name == "":
		out = append(out, fmt.Sprintf("%s has no virtual node here (yet)", child))
	default:
		out = append(out, "claims:  "+podcidrs.Format(claimed))
		if refused, ok := node.Annotations[api.AnnotationPodCIDRsRefused]; ok && refused != api.PodCIDROverlapNone {
			out = append(out, "refused: "+refused)
		}
	}
	return out, nil
}

// heldElsewhere is what no grant to child may take: what the other
// children are granted or hold of the pool, and this cluster's own
// nodes' pod CIDRs.
func heldElsewhere(ctx context.Context, client kubernetes.Interface, child, agentNamespace string) (podcidrs.Set, error) {
	var held []netip.Prefix
	grants, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.PodCIDRGrantsConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return podcidrs.Set{}, err
	}
	if err == nil {
		for name, v := range grants.Data {
			if ps, perr := podcidrs.Parse(v); name != child && perr == nil {
				held = append(held, ps...)
			}
		}
	}
	if agentNamespace == "" {
		agentNamespace = api.DefaultNamespace
	}
	kids, err := client.CoreV1().ConfigMaps(agentNamespace).Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return podcidrs.Set{}, err
	}
	if err == nil {
		for name, v := range kids.Data {
			if strings.HasPrefix(name, ".") {
				continue // a setting (api.ChildrenKeyTaintEffect), no child
			}
			if ps, perr := podcidrs.Parse(v); name != child && perr == nil {
				held = append(held, ps...)
			}
		}
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!" + api.LabelCluster})
	if err != nil {
		return podcidrs.Set{}, err
	}
	for _, n := range nodes.Items {
		_, known := kids.Data[n.Name]
		if known || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == api.TaintKeyProvider }) {
			continue // a child's node: its claim, not this cluster's own
		}
		held = append(held, podcidrs.Strings(n.Spec.PodCIDRs)...)
	}
	return podcidrs.SetOf(held), nil
}

// readGrant is what child is granted as written ("" for no grant).
func readGrant(ctx context.Context, client kubernetes.Interface, child string) (string, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.PodCIDRGrantsConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading configmap %s/%s: %w", metav1.NamespaceSystem, api.PodCIDRGrantsConfigMap, err)
	}
	return cm.Data[child], nil
}
