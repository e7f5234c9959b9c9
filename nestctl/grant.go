package nestctl

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
)

// GrantOptions say how `nestctl grant` changes a child's grant: Set (CIDRs,
// "10.1.0.0/16,fd00:1::/48"), Claimed (what the child claims now) or
// Remove (the pool applies again); none: it only shows.
type GrantOptions struct {
	Set     string
	Claimed bool
	Remove  bool
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
		next = claimed
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
