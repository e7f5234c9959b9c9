package join

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"github.com/nestlet/nestlet/api"
)

// ServingTemplate is the request a child's agent files in its parent for
// the serving certificate of its virtual node's kubelet API, when the
// parent's API server reaches the agent directly (--kubelet-api=direct):
// signer kubernetes.io/kubelet-serving, as a kubelet with
// serverTLSBootstrap asks, so that an API server given
// --kubelet-certificate-authority verifies the agent as it verifies its
// kubelets.
func ServingTemplate(node string, ips []net.IP) *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: NodeUser(node), Organization: []string{NodesGroup}},
		DNSNames:    []string{node},
		IPAddresses: ips,
	}
}

// NodesGroup is the group of every node identity.
const NodesGroup = "system:nodes"

// ServingUsages are the key usages of ServingTemplate's requests (ECDSA
// keys: no key encipherment).
var ServingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}

// ServingRequest reports whether csr asks for a kubelet serving
// certificate, filed by a node, and which node.
func ServingRequest(csr *certificatesv1.CertificateSigningRequest) (string, bool) {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || !strings.HasPrefix(csr.Spec.Username, NodeUser("")) {
		return "", false
	}
	return strings.TrimPrefix(csr.Spec.Username, NodeUser("")), true
}

// CheckServingRequest decides whether csr, a kubelet serving certificate
// request filed by node (ServingRequest), may be approved. Only for a
// Nestlet virtual node (node; nil when it does not exist), which must
// ask for itself: common name system:node:<node>, DNS names only its
// name, IP addresses only among the addresses its node reports, and none
// that another node of this cluster (others) reports, so that a child
// cannot get a certificate the API server would accept for another
// node's kubelet, nor for an address reserved says is this cluster's own
// (its Service CIDRs, say: a child listing the kubernetes Service's IP as
// its address must not get a certificate every pod trusts for it). ok is
// false for a request Nestlet leaves to others (a real kubelet's).
func CheckServingRequest(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, node *corev1.Node, others []*corev1.Node, revoked Revocations, reserved func(netip.Addr) string) (v Verdict, ok bool, err error) {
	name, isNode := ServingRequest(csr)
	if !isNode || node == nil || node.Name != name || node.Labels[api.LabelCluster] == "" {
		return Verdict{}, false, nil
	}
	if r, err := checkRevoked(ctx, revoked, name); err != nil || r != nil {
		return *r, true, err
	}
	deny := func(format string, a ...any) (Verdict, bool, error) {
		return Verdict{Message: fmt.Sprintf("not a serving certificate for virtual node %q alone: ", name) + fmt.Sprintf(format, a...)}, true, nil
	}
	if v := CheckLifetime(csr); v != nil {
		return *v, true, nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return deny("no PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return deny("%v", err)
	}
	usages := sets.NewString()
	for _, u := range csr.Spec.Usages {
		usages.Insert(string(u))
	}
	if err := certificates.ValidateKubeletServingCSR(req, usages); err != nil {
		return deny("%v", err)
	}
	if req.Subject.CommonName != NodeUser(name) {
		return deny("common name %q", req.Subject.CommonName)
	}
	for _, d := range req.DNSNames {
		if d != name {
			return deny("DNS name %q", d)
		}
		if what := ReservedName(d); what != "" {
			return deny("DNS name %q is %s", d, what)
		}
	}
	own := nodeIPs(node)
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(own, ip.Equal) {
			return deny("IP address %s is not one the node reports", ip)
		}
		if a, ok := netip.AddrFromSlice(ip); ok && reserved != nil {
			if what := reserved(a.Unmap()); what != "" {
				return deny("IP address %s is this cluster's (%s)", ip, what)
			}
		}
		for _, o := range others {
			if o.Name != name && slices.ContainsFunc(nodeIPs(o), ip.Equal) {
				return deny("IP address %s is node %q's", ip, o.Name)
			}
		}
	}
	return Verdict{Allowed: true, Message: fmt.Sprintf("virtual node %q asks for its own kubelet serving certificate", name)}, true, nil
}

// nodeIPs are the IP addresses among node's addresses.
func nodeIPs(node *corev1.Node) []net.IP {
	var out []net.IP
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				out = append(out, ip)
			}
		}
	}
	return out
}
