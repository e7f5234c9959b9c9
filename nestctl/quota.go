package nestctl

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/quota"
)

// Quota shows child's capacity quota in this cluster (its parent) and
// what it claims, after setting the quota to set ("cpu=16,memory=32Gi";
// resources not named keep theirs) or, with claimed, to what the child
// claims now. It returns what it has to say.
func Quota(ctx context.Context, client kubernetes.Interface, child, set string, claimed bool) ([]string, error) {
	var out []string
	node, err := client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", child, err)
	}
	current, err := readQuota(ctx, client, child)
	if err != nil && set == "" && !claimed {
		return nil, err
	}
	if set != "" || claimed {
		next := corev1.ResourceList{}
		for r, q := range current {
			next[r] = q
		}
		if claimed {
			next = node.Status.Allocatable.DeepCopy()
		}
		if set != "" {
			q, err := quota.Parse(set)
			if err != nil {
				return nil, err
			}
			for r, v := range q {
				next[r] = v
			}
		}
		if _, err := quota.Record(ctx, client, child, next, false, "nestctl"); err != nil {
			return nil, err
		}
		current = next
		out = append(out, fmt.Sprintf("configmap/%s: quota of %s set", api.QuotasConfigMap, child))
	}
	if current == nil {
		out = append(out, fmt.Sprintf("%s has no quota: what it claims is believed", child))
	} else {
		out = append(out, fmt.Sprintf("quota:  %s", quota.Format(current)))
	}
	out = append(out, fmt.Sprintf("claims: %s", quota.Format(node.Status.Allocatable)))
	if over := quota.Exceeds(node.Status.Allocatable, current); len(over) > 0 {
		out = append(out, "beyond the quota: "+strings.Join(over, ", ")+" (the scheduler places no more than the quota there)")
	}
	return out, nil
}

// readQuota is child's quota, nil when it has none.
func readQuota(ctx context.Context, client kubernetes.Interface, child string) (corev1.ResourceList, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.QuotasConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading configmap %s/%s: %w", metav1.NamespaceSystem, api.QuotasConfigMap, err)
	}
	v, ok := cm.Data[child]
	if !ok {
		return nil, nil
	}
	q, err := quota.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("the quota of %s in configmap %s/%s does not parse: %w; set it anew (nestctl quota %s RESOURCE=QUANTITY,...)", child, metav1.NamespaceSystem, api.QuotasConfigMap, err, child)
	}
	return q, nil
}
