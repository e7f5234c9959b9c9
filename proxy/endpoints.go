package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// A child's virtual node advertises the kubelet endpoint its agent
// chooses, and the parent's API server (logs, exec, port-forward) and
// metrics scrapers dial it: a hostile child could send them to any
// address. The proxy records, beside the node ports, the endpoint every
// child's node must advertise, under keys no node name can take (a name
// never starts with a dot); the admission policy nestlet-children-kubelet
// (charts/nestlet/policies/children-kubelet.yaml), whose parameter is this
// ConfigMap, refuses a child's node whose addresses or kubelet port are
// not the proxy's (its own node port or the shared port), except for the
// nodes the parent's operator lets serve their kubelet API directly.
const (
	// endpointKeyHost is the host every child's node advertises.
	endpointKeyHost = ".host"
	// endpointKeyPort is the shared kubelet port.
	endpointKeyPort = ".port"
	// endpointKeyDirect lists, comma-separated, the nodes that may
	// advertise their own endpoint ("*": all).
	endpointKeyDirect = ".direct"
)

// isEndpointKey reports whether a key of the ports ConfigMap is one of the
// endpoint keys rather than a node's name.
func isEndpointKey(k string) bool { return strings.HasPrefix(k, ".") }

// recordEndpoints writes the endpoint keys into kube-public/
// nestlet-proxy-ports (creating it), keeping the node ports there.
func (p *Proxy) recordEndpoints(ctx context.Context) error {
	host, port, err := net.SplitHostPort(p.KubeletEndpoint())
	if err != nil {
		return err
	}
	want := map[string]string{endpointKeyHost: host, endpointKeyPort: port, endpointKeyDirect: strings.Join(p.cfg.DirectNodes, ",")}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("kubelet port %q: %w", port, err)
	}
	cms := p.cfg.Client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cms.Get(ctx, nodePortsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: nodePortsConfigMap, Namespace: metav1.NamespacePublic}, Data: want}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), nodePortsConfigMap, err)
			}
			return err
		} else if err != nil {
			return err
		}
		same := true
		for k, v := range want {
			same = same && cur.Data[k] == v
		}
		if same {
			return nil
		}
		next := cur.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		for k, v := range want {
			next.Data[k] = v
		}
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the kubelet endpoint children advertise in kube-public/%s: %w", nodePortsConfigMap, err)
	}
	return nil
}
