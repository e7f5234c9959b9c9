package parent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/queue"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/provider/join"
)

// approver approves, in this cluster as a parent, the node certificate
// requests that children file with a bootstrap token made with
// `nestctl token create --auto-approve`, and only for the name the token
// was made for (api.GroupTokenChildPrefix): whoever holds a token can
// join as that child, never as another. A token made without a name
// (shared by a fleet) admits any name that no live node holds. Requests of
// other tokens wait for `nestctl approve`, which checks the same; renewals
// (a node asking for its own name again) are approved unless the node was
// revoked (`nestctl revoke`, api.RevokedConfigMap); a revoked node's joins
// are denied too. The grant is read from the request's groups
// (join.GrantOf), so the agent reads no Secret of kube-system.
type approver struct {
	client  kubernetes.Interface
	revoked *revoked.Watcher
	nodes   corelisters.NodeLister
	// kids record the children it admits (children.go); own are this
	// cluster's own addresses (reserved.go).
	kids     *children
	own      func() []reserved
	informer cache.SharedIndexInformer
	csrs     certlisters.CertificateSigningRequestLister
	queue    *queue.Worker[string]
}

func newApprover(client kubernetes.Interface, rev *revoked.Watcher, nodes corelisters.NodeLister, kids *children) (*approver, error) {
	inf := certinformers.NewCertificateSigningRequestInformer(client, 0, cache.Indexers{})
	ap := &approver{client: client, revoked: rev, nodes: nodes, kids: kids, informer: inf, csrs: certlisters.NewCertificateSigningRequestLister(inf.GetIndexer())}
	ap.queue = queue.New(queue.Config[string]{Name: "node-csrs", Reconcile: ap.reconcile, Failure: "Deciding a node certificate request", KeyName: "csr"})
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && (nodeRequest(csr) || servingRequest(csr)) && !join.Decided(csr) {
			ap.queue.Add(csr.Name)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return ap, err
}

// nodeRequest reports whether csr asks for a node client certificate,
// with a bootstrap token or as a node (a renewal).
func nodeRequest(csr *certificatesv1.CertificateSigningRequest) bool {
	return csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
		(strings.HasPrefix(csr.Spec.Username, bootstrapapi.BootstrapUserPrefix) || strings.HasPrefix(csr.Spec.Username, join.NodeUser("")))
}

// servingRequest reports whether csr asks for a kubelet serving
// certificate, filed by a node (join.ServingRequest).
func servingRequest(csr *certificatesv1.CertificateSigningRequest) bool {
	_, ok := join.ServingRequest(csr)
	return ok
}

func (ap *approver) run(ctx context.Context) {
	go ap.informer.RunWithContext(ctx)
	// Nothing is approved before the revocations are known.
	if !cache.WaitForCacheSync(ctx.Done(), ap.informer.HasSynced, ap.revoked.HasSynced) {
		ap.queue.ShutDown()
		return
	}
	// A fleet joining at once files its requests together: a few
	// workers decide them side by side (each decision is a few reads).
	ap.queue.Run(ctx, approverWorkers)
}

// approverWorkers decide node certificate requests concurrently.
const approverWorkers = 4

// reconcile decides request name, or looks at it again in a second when
// its node is not seen yet.
func (ap *approver) reconcile(ctx context.Context, name string) (time.Duration, error) {
	err := ap.sync(ctx, name)
	if errors.Is(err, errNodeNotYet) {
		return time.Second, nil
	}
	return 0, err
}

func (ap *approver) sync(ctx context.Context, name string) error {
	csr, err := ap.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if join.Decided(csr) {
		return nil
	}
	if servingRequest(csr) {
		return ap.syncServing(ctx, csr)
	}
	if !nodeRequest(csr) {
		return nil
	}
	token, ok := join.GrantOf(csr)
	if !ok {
		verdict, err := join.CheckRenewal(ctx, csr, ap.revoked.Lookup)
		if err != nil {
			return err
		}
		if v := join.CheckLifetime(csr); verdict.Allowed && v != nil && ap.isChild(csr) {
			// A real kubelet's renewal names no lifetime and is left to
			// the signer's; a child's is held to a day.
			verdict = *v
		}
		return ap.decide(ctx, csr, verdict, "NestletRenewal")
	}
	if !token.AutoApprove {
		return nil // for `nestctl approve`
	}
	// Nodes as the informer has them (synced before the approver runs):
	// a node made a moment ago and not yet seen is another fresh join's,
	// which a read of the API server could miss just as well; the agent
	// whose registration then finds the name taken says so (NameTaken).
	nodes := func(_ context.Context, name string) (*corev1.Node, error) { return ap.nodes.Get(name) }
	verdict, err := join.CheckNodeRequest(ctx, nodes, csr, token, ap.revoked.Lookup)
	if err != nil {
		return err
	}
	if name, err := join.CheckNodeCSR(csr.Spec.Request, csr.Spec.Usages); verdict.Allowed && err == nil {
		// A node of that name is a child's from now on, whatever it
		// says of itself.
		ap.kids.add(name)
	}
	return ap.decide(ctx, csr, verdict, "NestletAutoApprove")
}

// reservedAddress says what of this cluster's own a is (its Service
// CIDRs, its nodes' addresses, its API addresses on the pod network: no
// child gets a serving certificate for it), "" for none.
func (ap *approver) reservedAddress(a netip.Addr) string {
	if ap.own == nil {
		return ""
	}
	one := podcidrs.SetOf([]netip.Prefix{netip.PrefixFrom(a, a.BitLen())})
	for _, r := range ap.own() {
		if !one.Intersect(r.set).Empty() {
			return r.what
		}
	}
	return ""
}

// isChild reports whether csr was filed by a child: a node of a known
// child's name, or whose node here is a child's (isChild).
func (ap *approver) isChild(csr *certificatesv1.CertificateSigningRequest) bool {
	name, ok := strings.CutPrefix(csr.Spec.Username, join.NodeUser(""))
	if !ok {
		return false
	}
	if ap.kids.known(name) {
		return true
	}
	n, err := ap.nodes.Get(name)
	return err == nil && isChild(n, ap.kids)
}

// decide writes verdict on csr: approved with reason, or denied.
func (ap *approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, verdict join.Verdict, reason string) error {
	cond := certificatesv1.CertificateSigningRequestCondition{Status: corev1.ConditionTrue, Message: verdict.Message}
	if verdict.Allowed {
		cond.Type, cond.Reason = certificatesv1.CertificateApproved, reason
	} else {
		cond.Type, cond.Reason = certificatesv1.CertificateDenied, "NestletRefused"
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	if _, err := ap.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: api.FieldManager}); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Decided a child's node certificate request", "csr", csr.Name, "approved", verdict.Allowed, "reason", verdict.Message)
	return nil
}

// errNodeNotYet requeues a serving certificate request filed before its
// virtual node is seen here.
var errNodeNotYet = errors.New("the node is not registered yet")

// syncServing decides a virtual node's request for its kubelet serving
// certificate (join.CheckServingRequest); a real kubelet's is left alone.
func (ap *approver) syncServing(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	name, _ := join.ServingRequest(csr)
	node, err := ap.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		if time.Since(csr.CreationTimestamp.Time) < servingNodeWait {
			return fmt.Errorf("%w: node %s", errNodeNotYet, name)
		}
		return nil
	}
	if err != nil {
		return err
	}
	all, err := ap.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	verdict, ok, err := join.CheckServingRequest(ctx, csr, node, all, ap.revoked.Lookup, ap.reservedAddress)
	if err != nil || !ok {
		return err
	}
	return ap.decide(ctx, csr, verdict, "NestletServing")
}

// servingNodeWait is how long a serving certificate request waits for its
// node to be seen.
const servingNodeWait = 5 * time.Minute
