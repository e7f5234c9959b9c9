package parent

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/provider/join"
)

// The approver approves a join with an auto-approve token for the name it
// was made for, denies another name, and leaves alone the requests of
// manual tokens (nestctl approve's); it approves renewals, but a revoked
// node's.
func TestApprover(t *testing.T) {
	csr := func(name, node, user string) *certificatesv1.CertificateSigningRequest {
		key, err := join.NewKey()
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: join.NodeUser(node), Organization: []string{"system:nodes"}}}, key)
		require.NoError(t, err)
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
				Username:   user,
				// What the agent asks for (join.RequestNodeCertificate).
				ExpirationSeconds: ptr.To(int32(join.NodeCertificateLifetime / time.Second)),
			}}
	}
	// The groups a token made by nestctl token create puts in its
	// requests (the API server writes them, the requester cannot).
	tokens := map[string][]string{
		"aaaaaa": {"system:bootstrappers", api.GroupTokenChildPrefix + "east", api.GroupTokenAutoApprove},
		"bbbbbb": {"system:bootstrappers", api.GroupTokenChildPrefix + "east"},
		"cccccc": {"system:bootstrappers", api.GroupTokenChildPrefix + "gone", api.GroupTokenAutoApprove},
		"dddddd": {"system:bootstrappers", api.GroupTokenAutoApprove}, // made for no child
	}
	withGroups := func(c *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
		c.Spec.Groups = tokens[strings.TrimPrefix(c.Spec.Username, "system:bootstrap:")]
		return c
	}
	objs := []runtime.Object{
		withGroups(csr("east", "east", "system:bootstrap:aaaaaa")),
		withGroups(csr("impostor", "west", "system:bootstrap:aaaaaa")),
		withGroups(csr("manual", "east", "system:bootstrap:bbbbbb")),
		csr("renewal", "east", "system:node:east"),
		csr("gone-renewal", "gone", "system:node:gone"),
		withGroups(csr("gone-join", "gone", "system:bootstrap:cccccc")),
		csr("someone-elses-renewal", "east", "system:node:west"),
		forAYear(csr("child-renewal-for-a-year", "child", "system:node:child")),
		forAYear(csr("kubelet-renewal", "kubelet", "system:node:kubelet")),
		withGroups(csr("any-child-fresh-name", "fresh", "system:bootstrap:dddddd")),
		withGroups(csr("any-child-taken-name", "kubelet", "system:bootstrap:dddddd")),
	}
	client := fake.NewClientset(objs...)
	rev := revoked.New(nil, nil)
	rev.Set(map[string]string{"gone": "2026-11-25T12:00:00Z, nestctl revoke"})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	require.NoError(t, nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Labels: map[string]string{api.LabelCluster: "child"}}}))
	require.NoError(t, nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kubelet"}}))
	ap, err := newApprover(client, rev, corelisters.NewNodeLister(nodes), newChildren(nil, "", ""))
	require.NoError(t, err)
	for _, o := range objs {
		if c, ok := o.(*certificatesv1.CertificateSigningRequest); ok {
			require.NoError(t, ap.informer.GetIndexer().Add(c))
		}
	}
	for _, name := range []string{"east", "impostor", "manual", "renewal", "gone-renewal", "gone-join", "someone-elses-renewal", "child-renewal-for-a-year", "kubelet-renewal", "any-child-fresh-name", "any-child-taken-name"} {
		require.NoError(t, ap.sync(t.Context(), name))
	}
	decision := func(name string) string { return csrDecision(t, client, name) }
	require.Contains(t, decision("east"), "Approved: ")
	require.Contains(t, decision("impostor"), `Denied: bootstrap token aaaaaa was made for child "east"`)
	require.Equal(t, "pending", decision("manual"), "a token without --auto-approve waits for nestctl approve")
	require.Contains(t, decision("renewal"), "Approved: ", "a node renewing its own certificate")
	require.Contains(t, decision("gone-renewal"), `Denied: node "gone" was revoked`)
	require.Contains(t, decision("gone-join"), `Denied: node "gone" was revoked`)
	require.Contains(t, decision("someone-elses-renewal"), `Denied: filed by system:node:west, not by node "east" itself`)
	require.Contains(t, decision("child-renewal-for-a-year"), "Denied: the request asks for 8760h0m0s", "a child's certificate lives a day at most")
	require.Contains(t, decision("kubelet-renewal"), "Approved: ", "a real kubelet's renewal is the signer's to bound")
	// A token made for no child takes a name no node holds: the nodes
	// are the informer's (the fake API server holds none).
	require.Contains(t, decision("any-child-fresh-name"), "Approved: ")
	require.Contains(t, decision("any-child-taken-name"), `Denied: node "kubelet" exists`)
}

// forAYear makes csr ask for a year.
func forAYear(csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	csr.Spec.ExpirationSeconds = ptr.To(int32(365 * 24 * 3600))
	return csr
}

// A virtual node's request for its kubelet serving certificate is approved
// for its own name and addresses only; a real kubelet's is left alone, and
// one filed before its node is seen waits.
func TestApproverServing(t *testing.T) {
	csr := func(name, user string, tmpl *x509.CertificateRequest) *certificatesv1.CertificateSigningRequest {
		key, err := join.NewKey()
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
		require.NoError(t, err)
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeletServingSignerName,
				Usages:     join.ServingUsages,
				Username:   user,
				// What the agent asks for (provider/child/serving.go).
				ExpirationSeconds: ptr.To(int32(join.NodeCertificateLifetime / time.Second)),
			}}
	}
	node := func(name, ip string, virtual bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
		if virtual {
			n.Labels[api.LabelCluster] = name
		}
		return n
	}
	ips := func(s ...string) []net.IP {
		var out []net.IP
		for _, a := range s {
			out = append(out, net.ParseIP(a))
		}
		return out
	}
	objs := []runtime.Object{
		csr("own", "system:node:east", join.ServingTemplate("east", ips("10.0.0.2"))),
		csr("foreign-ip", "system:node:east", join.ServingTemplate("east", ips("10.0.0.2", "10.0.0.9"))),
		csr("kubelets-ip", "system:node:east", join.ServingTemplate("east", ips("10.0.0.3"))),
		csr("other-name", "system:node:east", &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:west", Organization: []string{"system:nodes"}}, IPAddresses: ips("10.0.0.2")}),
		csr("other-dns", "system:node:east", &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:east", Organization: []string{"system:nodes"}}, DNSNames: []string{"kubernetes.default"}}),
		csr("real-kubelet", "system:node:worker", join.ServingTemplate("worker", ips("10.0.0.3"))),
		csr("gone", "system:node:gone", join.ServingTemplate("gone", ips("10.0.0.4"))),
		csr("early", "system:node:later", join.ServingTemplate("later", ips("10.0.0.5"))),
		csr("service-ip", "system:node:east", join.ServingTemplate("east", ips("10.96.0.1"))),
		// A child named like the API server (its token made for that name).
		csr("api-name", "system:node:kubernetes.default.svc", join.ServingTemplate("kubernetes.default.svc", ips("10.0.0.6"))),
		csr("for-a-year", "system:node:east", join.ServingTemplate("east", ips("10.0.0.2"))),
	}
	objs[len(objs)-1].(*certificatesv1.CertificateSigningRequest).Spec.ExpirationSeconds = ptr.To(int32(365 * 24 * 3600))
	client := fake.NewClientset(objs...)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	// East also claims the real kubelet's address.
	east := node("east", "10.0.0.2", true)
	east.Status.Addresses = append(east.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "10.0.0.3"},
		// And the kubernetes Service's.
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "10.96.0.1"})
	for _, n := range []*corev1.Node{east, node("worker", "10.0.0.3", false), node("gone", "10.0.0.4", true),
		node("kubernetes.default.svc", "10.0.0.6", true)} {
		require.NoError(t, nodes.Add(n))
	}
	rev := revoked.New(nil, nil)
	rev.Set(map[string]string{"gone": "2026-11-25T12:00:00Z, nestctl revoke"})
	ap, err := newApprover(client, rev, corelisters.NewNodeLister(nodes), newChildren(nil, "", ""))
	require.NoError(t, err)
	ap.own = func() []reserved {
		return []reserved{{what: "Service CIDRs", set: podcidrs.SetOf(podcidrs.Strings([]string{"10.96.0.0/12"}))}}
	}
	for _, o := range objs {
		require.NoError(t, ap.informer.GetIndexer().Add(o))
	}
	for _, name := range []string{"own", "foreign-ip", "kubelets-ip", "other-name", "other-dns", "real-kubelet", "gone", "service-ip", "api-name", "for-a-year"} {
		require.NoError(t, ap.sync(t.Context(), name), name)
	}
	require.ErrorIs(t, ap.sync(t.Context(), "early"), errNodeNotYet, "filed before its node is seen: tried again")
	decision := func(name string) string { return csrDecision(t, client, name) }
	require.Contains(t, decision("own"), "Approved: ")
	require.Contains(t, decision("foreign-ip"), "IP address 10.0.0.9 is not one the node reports")
	require.Contains(t, decision("kubelets-ip"), `IP address 10.0.0.3 is node "worker"'s`)
	require.Contains(t, decision("other-name"), `Denied: not a serving certificate for virtual node "east" alone: common name "system:node:west"`)
	require.Contains(t, decision("other-dns"), `DNS name "kubernetes.default"`)
	require.Contains(t, decision("service-ip"), "IP address 10.96.0.1 is this cluster's (Service CIDRs)", "an address it listed, but the parent's own")
	require.Contains(t, decision("api-name"), `DNS name "kubernetes.default.svc" is the API server's name`)
	require.Contains(t, decision("for-a-year"), "Denied: the request asks for 8760h0m0s")
	require.Equal(t, "pending", decision("real-kubelet"), "a real kubelet's request is left to whoever approves those")
	require.Contains(t, decision("gone"), `Denied: node "gone" was revoked`)
	require.Equal(t, "pending", decision("early"))
}

// csrDecision is "pending", or the first condition of CSR name: its type
// and message.
func csrDecision(t *testing.T, client *fake.Clientset, name string) string {
	t.Helper()
	c, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	if len(c.Status.Conditions) == 0 {
		return "pending"
	}
	return string(c.Status.Conditions[0].Type) + ": " + c.Status.Conditions[0].Message
}
