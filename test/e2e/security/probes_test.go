package security

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go4.org/netipx"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/test/framework"
)

// A probe tries one attack of the hostile child: run returns nil when it
// was refused and left the parent unchanged, and what got through
// otherwise; a probe that cannot be set up fails tb.
type probe struct {
	name string
	run  func(tb testing.TB, s *suite) error
}

// probes, in order: the revocation last (it cuts east off for a while).
var probes = []probe{
	{"summary claims node-restriction.kubernetes.io/ labels", injectLabel("node-restriction.kubernetes.io/probe", "yes", "")},
	{"summary claims node-role.kubernetes.io/control-plane", injectLabel("node-role.kubernetes.io/control-plane", "", "")},
	{"summary claims another node's kubernetes.io/hostname", injectLabel(corev1.LabelHostname, "west", "west")},
	{"summary claims a label of a subdomain of node-restriction.kubernetes.io", injectLabel("x.node-restriction.kubernetes.io/probe", "yes", "")},
	{"oversized summary", oversizedSummary},
	{"route claims: all of IPv4, a sibling's range with branches, a /32 of the parent's", routeClaims},
	{"capacity beyond its quota", beyondQuota},
	{"certificate for another child's name, asked as a node", csrAsNode},
	{"certificate for another child's name with its auto-approved token", csrWithToken},
	{"certificate for another child's name with its token, nestctl approve", csrApprovedByHand},
	{"a fleet's token for the API server's name and for a node's", fleetTokenNames},
	{"second tunnel of its name with another certificate", secondTunnel},
	{"deleting its Node to register it again without the provider taint", deleteOwnNode},
	{"creating a Node of another name", createOtherNode},
	{"leaving, then registering again without the provider taint, a malformed desired-taints", registerUntainted},
	{"a mirror pod on its node, labelled like a Service's pods", mirrorPod},
	{"a DaemonSet tolerating every taint, with a Secret", daemonSetOnChild},
	{"a serving certificate for the kubernetes Service's IP", servingForServiceIP},
	{"a kubelet endpoint of its choosing: the API server's address, a pod's IP, a hostname, a port not given", ownKubeletEndpoint},
	{"renewing its certificate for a year", renewalForAYear},
	{"a flood of Events", eventFlood},
	{"removing an admin's taint", removeAdminTaint},
	{"desired taints naming the key of an admin's taint", desiredAdminKey},
	{"reading a Secret", readSecret},
	{"listing every pod", listPods},
	{"reading a pod bound to another node", readOtherPod},
	{"listing nodes", listNodes},
	{"writing another node's status", writeOtherStatus},
	{"WebSocket exec with get nodes/proxy only", execWithGetOnly},
	{"a revoked certificate: tunnel and renewal", revokedCertificate},
}

// expected is what the table of probes (BenchmarkProbes) says a probe
// expects, where "refused" says too little.
var expected = map[string]string{
	"route claims: all of IPv4, a sibling's range with branches, a /32 of the parent's": "refused but one share of the pool",
	"capacity beyond its quota":                             "counted up to the quota",
	"oversized summary":                                     "not read",
	"a serving certificate for the kubernetes Service's IP": "the address refused, the certificate denied",
	"a flood of Events":                                     "served at the children's own level, the parent's pod bound meanwhile",
	"removing an admin's taint":                             "refused, the taint kept",
	"a revoked certificate: tunnel and renewal":             "tunnel closed, renewal denied",
}

// TestHostileChild runs every probe; each must be refused.
func TestHostileChild(t *testing.T) {
	for name := range expected {
		require.True(t, slices.ContainsFunc(probes, func(p probe) bool { return p.name == name }), "expected names no probe: %q", name)
	}
	s := newSuite(t)
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			require.NoError(t, p.run(t, s), "the hostile child got through")
		})
	}
	t.Logf("a revoked child's tunnel was closed %s after nestctl revoke started", s.cutoff)
}

// BenchmarkProbes runs every probe once and prints how many were tried and
// refused, and the revocation's cut-off time for the tunnel. A stolen
// certificate stays usable against the API server until it expires (the
// API server has no revocation): the node certificates' lifetime.
//
// It also writes the table of probes (probe, expected, seen) to
// _output/probes.md, which hack/bench.sh prints and puts in
// docs/security.md.
func BenchmarkProbes(b *testing.B) {
	s := newSuite(b)
	refused := 0
	var table strings.Builder
	for b.Loop() {
		refused = 0
		table.Reset()
		table.WriteString("| probe | expected | seen |\n|---|---|---|\n")
		for _, p := range probes {
			// Each probe's cleanups run when it ends, as in a subtest.
			tb := &probeTB{TB: b}
			err := p.run(tb, s)
			tb.cleanup()
			want := "refused"
			if e, ok := expected[p.name]; ok {
				want = e
			}
			seen := want
			if err != nil {
				b.Logf("NOT REFUSED: %s: %v", p.name, err)
				seen = "**not refused**: " + strings.NewReplacer("|", "\\|", "\n", " ").Replace(err.Error())
			} else {
				refused++
			}
			fmt.Fprintf(&table, "| %s | %s | %s |\n", p.name, want, seen)
		}
	}
	fmt.Fprintf(&table, "\n%d of %d probes refused.\n", refused, len(probes))
	root, err := launcher.RepoRoot()
	require.NoError(b, err)
	require.NoError(b, os.MkdirAll(filepath.Join(root, "_output"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(root, "_output", "probes.md"), []byte(table.String()), 0o644))
	b.ReportMetric(float64(len(probes)), "probes-tried")
	b.ReportMetric(float64(refused), "probes-refused")
	b.ReportMetric(float64(s.cutoff.Milliseconds()), "revoked-tunnel-cutoff-ms")
}

// probeTB runs the cleanups registered during one probe when it ends
// (cleanup), not at the end of the whole benchmark.
type probeTB struct {
	testing.TB
	cleanups []func()
}

func (p *probeTB) Cleanup(f func()) { p.cleanups = append(p.cleanups, f) }

func (p *probeTB) cleanup() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	p.cleanups = nil
}

// injectLabel: east, its agent frozen, writes a summary whose groups
// claim key=value and a zone of its own making. A pod selecting that zone
// lands on east (the scheduler read the summary); one selecting key=value
// must not: it stays unscheduled, or lands on legit (when not empty), the
// node that really has that label.
func injectLabel(key, value, legit string) func(testing.TB, *suite) error {
	return func(tb testing.TB, s *suite) error {
		thaw := freeze(tb)
		defer thaw()
		zone := "probe-" + rand.String(6)
		s.writeSummary(tb, mustFormat(tb, withGroupLabels(s.eastSummary(tb), map[string]string{key: value, "topology.kubernetes.io/zone": zone})))
		control, attack := "control-"+rand.String(6), "attack-"+rand.String(6)
		s.pod(tb, control, map[string]string{"topology.kubernetes.io/zone": zone})
		s.boundTo(tb, control, "east")
		s.pod(tb, attack, map[string]string{key: value})
		node, why := s.placement(tb, attack)
		switch {
		case node == "east":
			return fmt.Errorf("a pod selecting %s=%q was bound to east", key, value)
		case node != "" && node != legit:
			return fmt.Errorf("a pod selecting %s=%q was bound to %s", key, value, node)
		case node == "" && legit != "":
			return fmt.Errorf("a pod selecting %s=%q fits nowhere (%s), not even on %s", key, value, why, legit)
		}
		return nil
	}
}

// oversizedSummary: east writes a summary over api.MaxSummaryBytes that
// claims a zone: the root reads none of it (a pod selecting that zone fits
// nowhere); the same claim within the limit is read (the pod lands then).
func oversizedSummary(tb testing.TB, s *suite) error {
	thaw := freeze(tb)
	defer thaw()
	zone := "probe-" + rand.String(6)
	sum := withGroupLabels(s.eastSummary(tb), map[string]string{"topology.kubernetes.io/zone": zone})
	big := sum
	big.Groups = append([]api.Group(nil), sum.Groups...)
	big.Groups[0].Labels = map[string]string{"example.com/padding": strings.Repeat("x", 63)}
	for k, v := range sum.Groups[0].Labels {
		big.Groups[0].Labels[k] = v
	}
	for i := 0; len(mustFormat(tb, big)) <= api.MaxSummaryBytes; i++ {
		big.Groups = append(big.Groups, api.Group{Labels: map[string]string{"example.com/padding": fmt.Sprintf("%063d", i)}})
	}
	s.writeSummary(tb, mustFormat(tb, big))
	pod := "attack-" + rand.String(6)
	s.pod(tb, pod, map[string]string{"topology.kubernetes.io/zone": zone})
	if node, _ := s.placement(tb, pod); node != "" {
		return fmt.Errorf("a summary of %d bytes was read: a pod selecting its zone was bound to %s", len(mustFormat(tb, big)), node)
	}
	// Control: within the limit, the same claim is read.
	s.writeSummary(tb, mustFormat(tb, sum))
	s.boundTo(tb, pod, "east")
	return nil
}

// routeClaims: east, its agent frozen, claims in its summary all of IPv4
// (0.0.0.0/1 and 128.0.0.0/1), west's pod CIDRs, naming west among the
// clusters where the graph branches (and a branch filter that does not
// parse, once read as all bits set), and the /32 where the root's gateway
// relays its API server. The root grants it none of them but, from its
// pool (first come), at most one share of what it claims inside the pool,
// west's range and the root's addresses never: its gateway routes nothing
// beyond east's and west's own ranges and that share, what it tells west
// of the tree holds nothing more, west is refused nothing, and east's
// virtual node says what it is refused. Control:
// before the claim, every child's range is routed.
func routeClaims(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	root := env.Cluster("root")
	west, err := root.Client.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
	require.NoError(tb, err)
	westSum, ok := api.ParseSummary(west)
	require.True(tb, ok && len(westSum.PodCIDRs) > 0, "west claims pod CIDRs")
	sum := s.eastSummary(tb)
	require.NotEmpty(tb, sum.PodCIDRs, "east claims pod CIDRs")
	apiAddress := root.Host.APIAddress() + "/32"
	legit := append(slices.Clone(sum.PodCIDRs), westSum.PodCIDRs...)
	framework.Eventually(tb, time.Minute, "the root routes east's and west's pod CIDRs", func(ctx context.Context) (bool, string) {
		routes, out, err := framework.GatewayRoutes(ctx, root)
		return err == nil && framework.Covers(routes, legit...), out
	})

	thaw := freeze(tb)
	defer thaw()
	hostile := sum
	hostile.PodCIDRs = append([]string{"0.0.0.0/1", "128.0.0.0/1", apiAddress}, legit...)
	hostile.Branches = append(slices.Clone(sum.Branches), "west")
	hostile.BranchFilter = "not a filter"
	s.writeSummary(tb, mustFormat(tb, hostile))
	var refused string
	framework.Eventually(tb, time.Minute, "the root decides east's claim", func(ctx context.Context) (bool, string) {
		n, err := root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		refused = n.Annotations[api.AnnotationPodCIDRsRefused]
		return strings.Contains(refused, "outside this cluster's pool"), refused
	})
	tb.Logf("east's claim refused: %s", refused)

	// The root's pool (launcher.PodCIDRRange) gives east, first come, at
	// most one share (a /16's worth) of what it claims inside the pool:
	// read it from the root's record of its children. Never west's range,
	// never the root's own addresses.
	cm, err := root.Client.CoreV1().ConfigMaps(api.DefaultNamespace).Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	require.NoError(tb, err)
	share, err := podcidrs.Parse(cm.Data["east"])
	require.NoError(tb, err, "east's share of the pool")
	var got []string
	shareSet := podcidrs.SetOf(share)
	if v4, _ := shareSet.Size(); v4.Cmp(big.NewInt(1<<16)) > 0 {
		got = append(got, fmt.Sprintf("east's share of the pool holds %s addresses: %s", v4, podcidrs.Format(share)))
	}
	if !shareSet.Minus(podcidrs.SetOf(podcidrs.Strings([]string{launcher.PodCIDRRange}))).Empty() {
		got = append(got, "east's share reaches outside the pool: "+podcidrs.Format(share))
	}
	if o := shareSet.Intersect(podcidrs.SetOf(podcidrs.Strings(append(slices.Clone(westSum.PodCIDRs), apiAddress)))); !o.Empty() {
		got = append(got, "east's share holds west's or the root's addresses: "+podcidrs.Format(o.Prefixes()))
	}
	allowed := podcidrs.Format(podcidrs.SetOf(podcidrs.Strings(legit), share).Prefixes())
	routes, out, err := framework.GatewayRoutes(ctx, root)
	require.NoError(tb, err)
	for _, r := range routes {
		if !framework.Covers(podcidrs.Strings(strings.Split(allowed, ",")), r.String()) {
			got = append(got, "the root's gateway routes "+r.String())
		}
	}
	if !framework.Covers(routes, westSum.PodCIDRs...) {
		got = append(got, "west's pod CIDRs are no longer routed: "+out)
	}
	west, err = root.Client.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
	require.NoError(tb, err)
	if r := west.Annotations[api.AnnotationPodCIDRsRefused]; r != api.PodCIDROverlapNone {
		got = append(got, "west is refused "+r)
	}
	var gp api.GatewayParent
	require.NoError(tb, json.Unmarshal([]byte(west.Annotations[api.AnnotationGatewayParent]), &gp), "the root tells west its gateway")
	for _, r := range gp.Routes {
		if !framework.Covers(podcidrs.Strings(append(strings.Split(allowed, ","), apiAddress)), r) {
			got = append(got, "the root tells west it carries "+r)
		}
	}
	got = append(got, directoryClaims(tb, s, share, sum.PodCIDRs, legit)...)
	if len(got) > 0 {
		return errors.New(strings.Join(got, "; "))
	}
	return nil
}

// directoryClaims has east list, for the direct paths between clusters,
// itself with all of IPv4 and a made-up cluster with west's range (legit
// holds own, east's, then west's): the root tells west only east's
// granted ranges, and nothing of the made-up one. It returns what went
// wrong.
func directoryClaims(tb testing.TB, s *suite, share []netip.Prefix, own, legit []string) []string {
	ctx := tb.Context()
	root := env.Cluster("root")
	east, err := root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	key := east.Annotations[api.AnnotationGatewayKey]
	require.NotEmpty(tb, key, "east publishes its gateway's key")
	fake, err := wgtypes.GeneratePrivateKey()
	require.NoError(tb, err)
	// Its own first range in two halves: how the root's answer to this
	// write is told from its answer to east's own earlier list.
	first := netip.MustParsePrefix(own[0])
	halves := []string{netip.PrefixFrom(first.Addr(), first.Bits()+1).String()}
	halves = append(halves, netip.PrefixFrom(netipx.PrefixLastIP(first).Prev(), first.Bits()+1).Masked().String())
	raw, err := json.Marshal([]api.GatewayEntry{
		{PublicKey: key, Routes: append(append([]string{"0.0.0.0/1", "128.0.0.0/1"}, halves...), legit...)},
		{Cluster: "made-up", PublicKey: fake.PublicKey().String(), Endpoint: "10.250.0.1:51820", Routes: legit[len(own):]},
	})
	require.NoError(tb, err)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationGatewaySubtree: string(raw)}}})
	require.NoError(tb, err)
	_, err = s.hostile.CoreV1().Nodes().Patch(ctx, "east", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(tb, err, "a node may write its own annotations")
	granted := podcidrs.SetOf(podcidrs.Strings(own), share).Prefixes()
	var gp api.GatewayParent
	framework.Eventually(tb, time.Minute, "the root tells west of east's gateway", func(ctx context.Context) (bool, string) {
		west, err := root.Client.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		gp = api.GatewayParent{}
		raw := west.Annotations[api.AnnotationGatewayParent]
		return json.Unmarshal([]byte(raw), &gp) == nil && slices.ContainsFunc(gp.Directory, func(e api.GatewayEntry) bool {
			return e.PublicKey == key && slices.Contains(e.Routes, halves[1])
		}), raw
	})
	var got []string
	for _, e := range gp.Directory {
		if e.PublicKey != key {
			got = append(got, fmt.Sprintf("the root tells west of a gateway east made up: %+v", e))
			continue
		}
		for _, r := range e.Routes {
			if !framework.Covers(granted, r) {
				got = append(got, "the root tells west that east's gateway carries "+r)
			}
		}
	}
	return got
}

// beyondQuota: the root's admin sets east's quota to what east claims
// (nestctl quota east --claimed); then east, its agent frozen, claims 1000
// CPUs in its node's status and summary. A pod within the quota lands on
// east (control), one beyond it fits nowhere, and the root's agent warns
// on east's node.
func beyondQuota(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	out, err := s.root.Nestctl(ctx, "quota", "east", "--claimed")
	require.NoError(tb, err, out)
	tb.Cleanup(func() { s.forgetEast(api.QuotasConfigMap) })
	cm, err := s.root.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.QuotasConfigMap, metav1.GetOptions{})
	require.NoError(tb, err)
	q, err := quota.Parse(cm.Data["east"])
	require.NoError(tb, err)
	limit := q[corev1.ResourceCPU]
	require.False(tb, limit.IsZero(), "a CPU quota: %s", quota.Format(q))

	thaw := freeze(tb)
	defer thaw()
	lots := resource.MustParse("1000")
	s.writeEastStatus(tb, "a node may write its own status", func(n *corev1.Node) {
		n.Status.Capacity[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceCPU] = lots, lots
	})
	sum := s.eastSummary(tb)
	for i := range sum.Groups {
		g := &sum.Groups[i]
		g.Allocatable, g.Free = g.Allocatable.DeepCopy(), g.Free.DeepCopy()
		g.Allocatable[corev1.ResourceCPU], g.Free[corev1.ResourceCPU] = lots, lots
		for j := range g.Shapes {
			g.Shapes[j] = g.Shapes[j].DeepCopy()
			g.Shapes[j][corev1.ResourceCPU] = lots
		}
	}
	s.writeSummary(tb, mustFormat(tb, sum))

	east := map[string]string{"topology.kubernetes.io/region": "east"}
	control, attack := "control-"+rand.String(6), "attack-"+rand.String(6)
	s.podRequesting(tb, control, east, resource.MustParse("100m"))
	s.boundTo(tb, control, "east")
	s.podRequesting(tb, attack, east, limit)
	node, why := s.placement(tb, attack)
	if node != "" {
		return fmt.Errorf("a pod requesting the whole quota (cpu %s) on top of another was bound to %s", limit.String(), node)
	}
	if !strings.Contains(why, "beyond the quota") {
		return fmt.Errorf("refused, but not for the quota: %s", why)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := s.root.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "east", "reason": "OverQuota"}.AsSelector().String()})
		return err == nil && len(evs.Items) > 0, nil
	})
	if err != nil {
		return errors.New("no OverQuota warning on east's node")
	}
	return nil
}

func mustFormat(tb testing.TB, sum api.Summary) string {
	tb.Helper()
	raw, err := api.FormatSummary(sum)
	require.NoError(tb, err)
	return raw
}

// requestCert files a node certificate request for name with client and
// returns the certificate, or the error when denied or still pending
// after a minute.
func requestCert(tb testing.TB, client kubernetes.Interface, name string, filed func(string)) (tls.Certificate, error) {
	tb.Helper()
	key, err := join.NewKey()
	require.NoError(tb, err)
	ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
	defer cancel()
	certPEM, err := join.RequestNodeCertificate(ctx, client, name, key, filed)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	require.NoError(tb, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(tb, err)
	return cert, nil
}

// denied is nil when err says the request was denied.
func denied(err error) error {
	if err == nil {
		return errors.New("a certificate was issued")
	}
	if !strings.Contains(err.Error(), "denied") {
		return fmt.Errorf("not denied: %w", err)
	}
	return nil
}

// csrAsNode: east, as a node, asks for west's certificate: the API
// server refuses the request (a node may only ask for its own name), or
// the root's agent denies it.
func csrAsNode(tb testing.TB, s *suite) error {
	_, err := requestCert(tb, s.hostile, "west", nil)
	if err != nil && strings.Contains(err.Error(), "CSRDenied") && strings.Contains(err.Error(), "can only create a node CSR with CN=system:node:east") {
		return nil
	}
	return denied(err)
}

var tokenOf = regexp.MustCompile(`--token\s+(\S+)`)

// tokenClient makes a bootstrap token for east in the root (nestctl token
// create with args) and returns a client with it.
func tokenClient(tb testing.TB, s *suite, args ...string) kubernetes.Interface {
	tb.Helper()
	return bootstrapClient(tb, s, append([]string{"--child-name=east"}, args...)...)
}

// bootstrapClient makes a bootstrap token in the root (nestctl token create
// with args) and returns a client with it.
func bootstrapClient(tb testing.TB, s *suite, args ...string) kubernetes.Interface {
	tb.Helper()
	out, err := s.root.Nestctl(tb.Context(), append([]string{"token", "create", "--cluster-name=root"}, args...)...)
	require.NoError(tb, err)
	m := tokenOf.FindStringSubmatch(out)
	require.NotNil(tb, m, out)
	cfg := rest.AnonymousClientConfig(s.root.Config)
	cfg.BearerToken = m[1]
	return kubernetes.NewForConfigOrDie(cfg)
}

func csrWithToken(tb testing.TB, s *suite) error {
	_, err := requestCert(tb, tokenClient(tb, s, "--auto-approve"), "west", nil)
	return denied(err)
}

// fleetTokenNames: east's admin holds a token made for no child (a
// fleet's, auto-approved) and asks with it for the API server's name,
// which a serving certificate of that node would carry, and for east's
// own, a node the root has: both denied.
func fleetTokenNames(tb testing.TB, s *suite) error {
	client := bootstrapClient(tb, s, "--auto-approve")
	for _, name := range []string{"kubernetes.default.svc", "east"} {
		if _, err := requestCert(tb, client, name, nil); denied(err) != nil {
			return fmt.Errorf("%s: %w", name, denied(err))
		}
	}
	return nil
}

func csrApprovedByHand(tb testing.TB, s *suite) error {
	client := tokenClient(tb, s)
	filed, done := make(chan string, 1), make(chan error, 1)
	go func() {
		_, err := requestCert(tb, client, "west", func(name string) { filed <- name })
		done <- err
	}()
	select {
	case <-filed:
	case err := <-done:
		return fmt.Errorf("decided before nestctl approve: %w", err)
	}
	out, err := s.root.Nestctl(tb.Context(), "approve", "west")
	if err == nil {
		return fmt.Errorf("nestctl approve west approved east's request: %s", out)
	}
	return denied(<-done)
}

// secondTunnel: east gets a second certificate of its own name (a renewal,
// which the root approves) and opens a tunnel with it while its agent's is
// up: refused, as the tunnel of an impostor holding a certificate of that
// name would be.
func secondTunnel(tb testing.TB, s *suite) error {
	renewed, err := requestCert(tb, s.hostile, "east", nil)
	require.NoError(tb, err, "a renewal of its own name")
	code, ws := s.dialTunnel(tb, renewed)
	if ws != nil {
		_ = ws.Close()
	}
	if code != http.StatusConflict {
		return fmt.Errorf("a second tunnel for east got %d, want %d (Conflict)", code, http.StatusConflict)
	}
	return nil
}

func deleteOwnNode(tb testing.TB, s *suite) error {
	return forbidden("delete node east", s.hostile.CoreV1().Nodes().Delete(tb.Context(), "east", metav1.DeleteOptions{}))
}

func createOtherNode(tb testing.TB, s *suite) error {
	_, err := s.hostile.CoreV1().Nodes().Create(tb.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east-impostor"}}, metav1.CreateOptions{})
	return forbidden("create node east-impostor", err)
}

// registerUntainted: east, its agent frozen, marks its node leaving; the
// root's agent deletes it; east creates its Node again, without the
// provider taint (and with a desired-taints annotation that does not
// parse), and without its cluster label: both refused (the root knows east
// as a child). Its agent, let go, registers the node again as it should.
func registerUntainted(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	n, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	thaw := freeze(tb)
	defer func() {
		thaw()
		waitWhole(tb)
	}()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		api.AnnotationLeaving: n.Annotations[api.AnnotationClusterUID]}}})
	require.NoError(tb, err)
	_, err = s.hostile.CoreV1().Nodes().Patch(ctx, "east", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(tb, err, "a node may mark itself leaving")
	framework.Eventually(tb, time.Minute, "the root's agent deletes east's node", func(ctx context.Context) (bool, string) {
		_, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	untainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{api.LabelCluster: "east"},
		Annotations: map[string]string{api.AnnotationDesiredTaints: "{"}}}
	_, err = s.hostile.CoreV1().Nodes().Create(ctx, untainted, metav1.CreateOptions{})
	if e := forbidden("create node east without the provider taint", err); e != nil {
		return e
	}
	unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{api.ProviderTaint()}}}
	_, err = s.hostile.CoreV1().Nodes().Create(ctx, unlabelled, metav1.CreateOptions{})
	return forbidden("create node east without its cluster label", err)
}

// mirrorPod: east creates a mirror pod bound to itself (which
// NodeRestriction allows a node) labelled like the pods of a Service of the
// root's: refused.
func mirrorPod(tb testing.TB, s *suite) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mirror-" + rand.String(6), Namespace: s.ns, Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "probe"}},
		Spec: corev1.PodSpec{NodeName: "east", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	_, err := s.hostile.CoreV1().Pods(s.ns).Create(tb.Context(), p, metav1.CreateOptions{})
	if err == nil {
		tb.Cleanup(func() {
			_ = s.root.Client.CoreV1().Pods(s.ns).Delete(context.Background(), p.Name, *metav1.NewDeleteOptions(0))
		})
	}
	return forbidden("create a mirror pod bound to east", err)
}

// daemonSetOnChild: the root's admin makes a DaemonSet that tolerates
// every taint and mounts a Secret. No pod of it is made for east (nor for
// west), so east may read neither the Secret nor a token of the
// DaemonSet's ServiceAccount.
func daemonSetOnChild(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	name := "ds-" + rand.String(6)
	_, err := s.root.Client.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{"password": "probe"}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	_, err = s.root.Client.CoreV1().ServiceAccounts(s.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{ServiceAccountName: name, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/secret"}}}},
					Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}}}}}}
	_, err = s.root.Client.AppsV1().DaemonSets(s.ns).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = s.root.Client.AppsV1().DaemonSets(s.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The DaemonSet controller tries, and is refused.
	framework.Eventually(tb, time.Minute, "the DaemonSet controller is refused its pods", func(ctx context.Context) (bool, string) {
		return framework.DaemonSetRefused(ctx, s.root.Client, s.ns, name)
	})
	pods, err := s.root.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(tb, err)
	if len(pods.Items) > 0 {
		return fmt.Errorf("the DaemonSet has %d pods, the first for node %q", len(pods.Items), pods.Items[0].Spec.NodeName)
	}
	_, err = s.hostile.CoreV1().Secrets(s.ns).Get(ctx, name, metav1.GetOptions{})
	if e := forbidden("get the DaemonSet's Secret", err); e != nil {
		return e
	}
	_, err = s.hostile.CoreV1().ServiceAccounts(s.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	return forbidden("a token of the DaemonSet's ServiceAccount", err)
}

// servingForServiceIP: east lists the kubernetes Service's IP among its
// node's addresses (a node writes its own status: refused, its addresses
// are the root's proxy's) and asks for a kubelet serving certificate for
// it anyway: denied (the address is the root's own).
func servingForServiceIP(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	svc, err := s.root.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(tb, err)
	ip := svc.Spec.ClusterIP
	if err := s.refusedEndpoint(tb, "the kubernetes Service's IP as an address", func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}); err != nil {
		return err
	}
	key, err := join.NewKey()
	require.NoError(tb, err)
	der, err := x509.CreateCertificateRequest(crand.Reader, join.ServingTemplate("east", []net.IP{net.ParseIP(ip)}), key)
	require.NoError(tb, err)
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-serving-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName, Usages: join.ServingUsages,
			ExpirationSeconds: ptr.To(int32(join.NodeCertificateLifetime / time.Second))}}
	created, err := s.hostile.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	require.NoError(tb, err, "a node may ask for a serving certificate")
	// Denied: the node does not report the address (the write above was
	// refused), which is also the root's own.
	return decidedDenied(tb, s, created.Name, "IP address "+ip+" is not one the node reports")
}

// ownKubeletEndpoint: east points its node, where the root's API server
// sends logs, exec and port-forward and metrics scrapers call, somewhere
// of its choosing: the root API server's endpoint, the IP of a pod running
// on east (an address the VXLAN allow-list would trust were it a node's),
// a Hostname address (the API server's first choice), a port the root's
// proxy did not give it. Each write is refused by the admission policy
// nestlet-children-kubelet, and east's node still advertises the root's
// nestlet-proxy.
func ownKubeletEndpoint(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	ports, err := s.root.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
	require.NoError(tb, err, "the root runs a nestlet-proxy")
	host := ports.Data[".host"]
	require.NotEmpty(tb, host, "the root's proxy records the host its children advertise")
	u, err := url.Parse(s.root.URL)
	require.NoError(tb, err)
	apiPort, err := strconv.Atoi(u.Port())
	require.NoError(tb, err)

	name := "endpoint-" + rand.String(6)
	s.pod(tb, name, map[string]string{"topology.kubernetes.io/region": "east"})
	s.boundTo(tb, name, "east")
	var podIP string
	framework.Eventually(tb, 2*time.Minute, "the pod on east has an IP", func(ctx context.Context) (bool, string) {
		p, err := s.root.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		podIP = p.Status.PodIP
		return podIP != "", "no pod IP yet"
	})

	for _, a := range []struct {
		what   string
		change func(*corev1.Node)
	}{
		{"the root API server's address and port", func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: u.Hostname()}}
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(apiPort)
		}},
		{"a pod's IP", func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: podIP}}
		}},
		{"a Hostname address", func(n *corev1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "kubernetes.default.svc"})
		}},
		{"a port the proxy did not give", func(n *corev1.Node) {
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = 6443
		}},
	} {
		if err := s.refusedEndpoint(tb, a.what, a.change); err != nil {
			return err
		}
	}
	n, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	for _, a := range n.Status.Addresses {
		if a.Address != host {
			return fmt.Errorf("east's node advertises %s (%s), not the root's proxy %s", a.Address, a.Type, host)
		}
	}
	return nil
}

// renewalForAYear: east asks, as itself, for a node certificate of a year:
// denied.
func renewalForAYear(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	key, err := join.NewKey()
	require.NoError(tb, err)
	der, err := x509.CreateCertificateRequest(crand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: join.NodeUser("east"), Organization: []string{"system:nodes"}}}, key)
	require.NoError(tb, err)
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-renewal-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: ptr.To(int32(365 * 24 * 3600))}}
	created, err := s.hostile.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	require.NoError(tb, err, "a node may ask to renew its certificate")
	return decidedDenied(tb, s, created.Name, "8760h0m0s")
}

// eventFlood: east creates Events as fast as 16 connections go. Each of
// its requests is served by the children's FlowSchema (the response
// header X-Kubernetes-PF-FlowSchema-UID names it): a priority level of
// their own, one flow per child, below the root's kubelets' (system-nodes),
// so that the flood queues there and not before the root's own kubelets
// and controllers. Meanwhile a pod of the root's is scheduled and bound,
// and the root's admin is served by another FlowSchema.
func eventFlood(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	var uid string
	framework.Eventually(tb, 2*time.Minute, "the root's agent names east in the children's FlowSchema", func(ctx context.Context) (bool, string) {
		fs, err := s.root.Client.FlowcontrolV1().FlowSchemas().Get(ctx, api.ChildrenFlowSchema, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		uid = string(fs.UID)
		for _, r := range fs.Spec.Rules {
			for _, sub := range r.Subjects {
				if sub.User != nil && sub.User.Name == "system:node:east" {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("subjects %v", fs.Spec.Rules)
	})
	var mu sync.Mutex
	served := map[string]int{}
	cfg := rest.CopyConfig(s.cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: the flood is the server's to bound
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				served[resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")]++
				mu.Unlock()
			}
			return resp, err
		})
	})
	flood := kubernetes.NewForConfigOrDie(cfg)
	tb.Cleanup(func() {
		_ = s.root.Client.CoreV1().Events(s.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	// The flood goes on (each connection at most 250 Events) until a pod
	// of the root's, made meanwhile, is bound to east.
	var wg sync.WaitGroup
	var sent atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			for j := range 250 {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%d-%d-%s", i, j, rand.String(4)), Namespace: s.ns},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: "flood"},
					Reason:         "Flood", Message: "a hostile child's flood", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Host: "east"}}
				if _, err := flood.CoreV1().Events(s.ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsTooManyRequests(err) {
					errs <- err
					return
				}
			}
		})
	}
	pod := "during-flood-" + rand.String(4)
	s.pod(tb, pod, map[string]string{"topology.kubernetes.io/region": "east"})
	s.boundTo(tb, pod, "east")
	during := sent.Load()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err, "east may create Events")
	}
	if during >= 16*250 {
		return fmt.Errorf("the flood (%d Events) ended before the root's pod was bound: nothing shown", during)
	}
	tb.Logf("a pod of the root's bound to east during a flood of %d Events from east", during)
	var rootFlow string
	probe := rest.CopyConfig(s.root.Config)
	probe.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				rootFlow = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
			}
			return resp, err
		})
	})
	_, err := kubernetes.NewForConfigOrDie(probe).CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(tb, err)
	mu.Lock()
	defer mu.Unlock()
	if rootFlow == uid {
		return fmt.Errorf("the root's admin was served by the children's FlowSchema too")
	}
	if served[uid] == 0 || len(served) != 1 {
		return fmt.Errorf("east's requests by FlowSchema UID %v, want all by the children's (%s)", served, uid)
	}
	return nil
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// decidedDenied waits until the root decides certificate request name: nil
// when it denied it saying why, else what happened.
func decidedDenied(tb testing.TB, s *suite, name, why string) error {
	tb.Helper()
	var got *certificatesv1.CertificateSigningRequest
	framework.Eventually(tb, time.Minute, "the root decides "+name, func(ctx context.Context) (bool, string) {
		c, err := s.root.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = c
		return len(c.Status.Conditions) > 0 || len(c.Status.Certificate) > 0, "pending"
	})
	tb.Cleanup(func() {
		_ = s.root.Client.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for _, c := range got.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied && strings.Contains(c.Message, why) {
			return nil
		}
	}
	return fmt.Errorf("certificate request %s: %+v, issued: %t", name, got.Status.Conditions, len(got.Status.Certificate) > 0)
}

// removeAdminTaint: the root's admin taints east; east removes the taint
// from its node: refused; and the root's agent, deciding east's node
// after the summaries east reports next, keeps the admin's taint.
func removeAdminTaint(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	admin := s.root.Client.CoreV1().Nodes()
	quarantine := s.adminTaint(tb)

	n, err := s.hostile.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != quarantine.Key {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
	_, err = s.hostile.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if err := forbidden("east removing the admin's taint", err); err != nil {
		return err
	}
	// Two summaries later, the root's agent has decided the node again.
	first := summaryOf(tb, s)
	var changes int
	framework.EventuallyEvery(tb, 200*time.Millisecond, time.Minute, "east reports its summary twice", func(context.Context) (bool, string) {
		if cur := summaryOf(tb, s); cur != first {
			first, changes = cur, changes+1
		}
		return changes >= 2, fmt.Sprintf("%d changes", changes)
	})
	n, err = admin.Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	for _, t := range n.Spec.Taints {
		if t.Key == quarantine.Key && t.Value == quarantine.Value {
			return nil
		}
	}
	return fmt.Errorf("the admin's taint is gone: %v", n.Spec.Taints)
}

// adminTaint puts a taint of the root's admin on east's node (taken off
// when tb ends) and returns it.
func (s *suite) adminTaint(tb testing.TB) corev1.Taint {
	ctx := context.WithoutCancel(tb.Context())
	admin := s.root.Client.CoreV1().Nodes()
	quarantine := corev1.Taint{Key: "example.com/quarantine", Value: rand.String(6), Effect: corev1.TaintEffectNoSchedule}
	setTaint := func(on bool) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := admin.Get(ctx, "east", metav1.GetOptions{})
			if err != nil {
				return err
			}
			var taints []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Key != quarantine.Key {
					taints = append(taints, t)
				}
			}
			if on {
				taints = append(taints, quarantine)
			}
			n.Spec.Taints = taints
			_, err = admin.Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	require.NoError(tb, setTaint(true))
	tb.Cleanup(func() { _ = setTaint(false) })
	return quarantine
}

// desiredAdminKey: east, its agent frozen, asks in its desired taints for
// a taint of the key an admin of the root set, with a weaker effect. The
// root's agent keeps the admin's and says so in a Warning event.
func desiredAdminKey(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	quarantine := s.adminTaint(tb)
	thaw := freeze(tb)
	defer func() {
		thaw()
		waitWhole(tb)
	}()
	since := metav1.Now().Rfc3339Copy()
	desired, err := json.Marshal([]corev1.Taint{{Key: quarantine.Key, Value: "child", Effect: corev1.TaintEffectPreferNoSchedule}})
	require.NoError(tb, err)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationDesiredTaints: string(desired)}}})
	require.NoError(tb, err)
	_, err = s.hostile.CoreV1().Nodes().Patch(ctx, "east", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(tb, err, "a node may write its annotations")
	framework.Eventually(tb, time.Minute, "the root's agent refuses the desired taint in an event", func(ctx context.Context) (bool, string) {
		evs, err := s.root.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": "east", "reason": "NestletTaintsRefused"}.String()})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if !ev.LastTimestamp.Before(&since) && strings.Contains(ev.Message, quarantine.Key) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	n, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	var of []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key == quarantine.Key {
			of = append(of, t)
		}
	}
	if len(of) != 1 || of[0].Value != quarantine.Value || of[0].Effect != quarantine.Effect {
		return fmt.Errorf("taints of key %s: %v, want only the admin's %v", quarantine.Key, of, quarantine)
	}
	return nil
}

// summaryOf is the raw summary of east as the root holds it.
func summaryOf(tb testing.TB, s *suite) string {
	n, err := s.root.Client.CoreV1().Nodes().Get(tb.Context(), "east", metav1.GetOptions{})
	require.NoError(tb, err)
	return n.Annotations[api.AnnotationSummary]
}

func readSecret(tb testing.TB, s *suite) error {
	secrets, err := s.root.Client.CoreV1().Secrets(metav1.NamespaceSystem).List(tb.Context(), metav1.ListOptions{Limit: 1})
	require.NoError(tb, err)
	require.NotEmpty(tb, secrets.Items, "a Secret to read")
	_, err = s.hostile.CoreV1().Secrets(metav1.NamespaceSystem).Get(tb.Context(), secrets.Items[0].Name, metav1.GetOptions{})
	return forbidden("get secret kube-system/"+secrets.Items[0].Name, err)
}

func listPods(tb testing.TB, s *suite) error {
	_, err := s.hostile.CoreV1().Pods("").List(tb.Context(), metav1.ListOptions{})
	return forbidden("list pods in every namespace", err)
}

func readOtherPod(tb testing.TB, s *suite) error {
	name := "on-west-" + rand.String(6)
	s.pod(tb, name, map[string]string{"topology.kubernetes.io/region": "west"})
	s.boundTo(tb, name, "west")
	_, err := s.hostile.CoreV1().Pods(s.ns).Get(tb.Context(), name, metav1.GetOptions{})
	return forbidden("get a pod bound to west", err)
}

func listNodes(tb testing.TB, s *suite) error {
	_, err := s.hostile.CoreV1().Nodes().List(tb.Context(), metav1.ListOptions{})
	return forbidden("list nodes", err)
}

func writeOtherStatus(tb testing.TB, s *suite) error {
	west, err := s.root.Client.CoreV1().Nodes().Get(tb.Context(), "west", metav1.GetOptions{})
	require.NoError(tb, err)
	west.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: west.Status.Allocatable[corev1.ResourceCPU]}
	_, err = s.hostile.CoreV1().Nodes().UpdateStatus(tb.Context(), west, metav1.UpdateOptions{})
	return forbidden("update the status of node west", err)
}

// execWithGetOnly: a user of the root allowed to get nodes/proxy, not to
// create it, opens `kubectl exec`'s WebSocket to a pod on east through
// the proxy: refused (exec is create, whatever the method), while the
// pod's logs (get) get past the authorisation (control).
func execWithGetOnly(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	name := "on-east-" + rand.String(6)
	s.pod(tb, name, map[string]string{"topology.kubernetes.io/region": "east"})
	s.boundTo(tb, name, "east")
	user := "probe-" + rand.String(6)
	cfg, err := s.root.NewClientForUser(user)
	require.NoError(tb, err)
	_, err = s.root.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	_, err = s.root.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = s.root.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		_ = s.root.Client.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	n, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	require.NotEmpty(tb, n.Status.Addresses)
	endpoint := fmt.Sprintf("%s:%d", n.Status.Addresses[0].Address, n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	require.NoError(tb, err)
	call := func(path string, websocketUpgrade bool) int {
		if websocketUpgrade {
			d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Subprotocols: []string{"v5.channel.k8s.io", "v4.channel.k8s.io"},
				TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: s.rootCAs, MinVersion: tls.VersionTLS12}}
			ws, resp, err := d.DialContext(ctx, "wss://"+endpoint+path, nil)
			if ws != nil {
				_ = ws.Close()
			}
			require.NotNil(tb, resp, "dialing the proxy (its certificate verified with the root's CA): %v", err)
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: s.rootCAs, MinVersion: tls.VersionTLS12}}}
		resp, err := client.Get("https://" + endpoint + path)
		require.NoError(tb, err, "calling the proxy (its certificate verified with the root's CA)")
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Control: what get allows (logs) gets past the authorisation.
	if code := call("/containerLogs/"+s.ns+"/"+name+"/app", false); code == http.StatusForbidden || code == http.StatusUnauthorized {
		tb.Fatalf("the logs of the pod, with get nodes/proxy: %d", code)
	}
	if code := call("/exec/"+s.ns+"/"+name+"/app?command=true&output=1", true); code != http.StatusForbidden {
		return fmt.Errorf("exec with get only: %d, want %d", code, http.StatusForbidden)
	}
	return nil
}

// revokedCertificate: east's agent frozen, east holds a tunnel with its
// certificate (the same one: it replaces the agent's); the root's admin
// runs nestctl revoke east: the tunnel is closed (cutoff measured), a new
// one is refused, a renewal denied. The API server still accepts the
// certificate until it expires (no revocation there): its lifetime is how
// long a stolen certificate stays useful. The revocation is then lifted
// and east comes back by itself.
func revokedCertificate(tb testing.TB, s *suite) error {
	ctx := tb.Context()
	before, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	thaw := freeze(tb)
	defer thaw()
	code, ws := s.dialTunnel(tb, s.cert)
	require.Equal(tb, http.StatusSwitchingProtocols, code, "east's own tunnel")
	closed := make(chan time.Time, 1)
	go func() {
		defer ws.Close()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				closed <- time.Now()
				return
			}
		}
	}()
	revoked := time.Now()
	out, err := s.root.Nestctl(ctx, "revoke", "east", "--reason=security probe")
	require.NoError(tb, err, out)
	lift := func() { s.forgetEast(api.RevokedConfigMap) }
	defer func() {
		lift()
		thaw()
		waitWhole(tb)
	}()
	var problems []string
	select {
	case at := <-closed:
		s.cutoff = max(at.Sub(revoked), 0)
	case <-time.After(time.Minute):
		problems = append(problems, "the revoked child's tunnel was still open a minute after nestctl revoke")
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := s.root.Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && n.UID != before.UID), nil
	})
	if err != nil {
		problems = append(problems, "the revoked child's node was not deleted")
	}
	if code, ws := s.dialTunnel(tb, s.cert); code != http.StatusForbidden {
		if ws != nil {
			_ = ws.Close()
		}
		problems = append(problems, fmt.Sprintf("a new tunnel of the revoked child: %d, want %d", code, http.StatusForbidden))
	}
	if err := denied(func() error { _, err := requestCert(tb, s.hostile, "east", nil); return err }()); err != nil {
		problems = append(problems, "renewal of a revoked child: "+err.Error())
	}
	leaf, err := x509.ParseCertificate(s.cert.Certificate[0])
	require.NoError(tb, err)
	_, err = s.hostile.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	tb.Logf("after the revocation the API server answers east's certificate with %v until it expires at %s (%s from now)",
		err, leaf.NotAfter.UTC().Format(time.RFC3339), time.Until(leaf.NotAfter).Round(time.Second))
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// forgetEast removes east's key from the root's kube-system ConfigMap
// name (its quota, its revocation).
func (s *suite) forgetEast(name string) {
	cms := s.root.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(cm.Data, "east")
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	})
}

// writeEastStatus changes east's node status as east (a node may write its
// own), reading it again on a conflict: the root's side writes the node too
// (the decorator, the node lifecycle controller).
func (s *suite) writeEastStatus(tb testing.TB, what string, change func(*corev1.Node)) {
	tb.Helper()
	require.NoError(tb, s.tryEastStatus(tb.Context(), change), what)
}

// tryEastStatus is writeEastStatus, returning the write's error.
func (s *suite) tryEastStatus(ctx context.Context, change func(*corev1.Node)) error {
	nodes := s.hostile.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// refusedEndpoint writes east's node status with change, as east, and
// says what got through unless the root's policy on children's kubelet
// endpoints refused it.
func (s *suite) refusedEndpoint(tb testing.TB, what string, change func(*corev1.Node)) error {
	tb.Helper()
	err := s.tryEastStatus(tb.Context(), change)
	switch {
	case err == nil:
		return fmt.Errorf("east's node status with %s was accepted", what)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "nestlet-children-kubelet"):
		return fmt.Errorf("east's node status with %s: refused, but not by the policy nestlet-children-kubelet: %w", what, err)
	}
	tb.Logf("%s: %v", what, err)
	return nil
}
