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
	"k8s.io/apimachinery/pkg/util/validation"
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
	// advertise their own endpoint: "NAME=HOST:PORT" that one only, "NAME"
	// any, "*" all nodes any (Config.DirectNodes).
	endpointKeyDirect = ".direct"
)

// ValidateDirectNodes checks entries of Config.DirectNodes: "*", a node's
// name, or a node's name with the endpoint it is pinned to
// ("west=10.0.0.5:10250"), each node named once.
func ValidateDirectNodes(entries []string) error {
	seen := map[string]bool{}
	for _, e := range entries {
		name, endpoint, pinned := strings.Cut(e, "=")
		if e != "*" {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return fmt.Errorf("--direct-nodes entry %q: %q is not a node's name: %s", e, name, strings.Join(errs, "; "))
			}
		}
		if seen[name] {
			return fmt.Errorf("--direct-nodes names %s twice", name)
		}
		seen[name] = true
		if !pinned {
			continue
		}
		host, port, err := net.SplitHostPort(endpoint)
		if err == nil && net.ParseIP(host) == nil {
			err = fmt.Errorf("%q is not an IP address (a node's addresses are)", host)
		}
		if n, perr := strconv.Atoi(port); err == nil && (perr != nil || n < 1 || n > 65535) {
			err = fmt.Errorf("%q is not a port", port)
		}
		if err != nil {
			return fmt.Errorf("--direct-nodes entry %q: want NAME=IP:PORT, where the child serves its kubelet API: %w", e, err)
		}
	}
	return nil
}

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
