package child

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// renewRetry is the longest wait before renewing again after a failure.
const renewRetry = 30 * time.Second

// renewal renews a run's node certificate before it expires and rotates it
// in place: the virtual node, its tunnel and its streams go on with the new
// one. The joiner requests the new certificate; status records it.
type renewal struct {
	joiner *joiner
	status *runStatus
	clock  clock.Clock
	id     *join.Identity
	cert   *join.ClientCert
	timer  <-chan time.Time
	// renewed, when set, is called after each renewal: the gateway's key
	// is rotated with the certificate.
	renewed func(context.Context) error
}

// newRenewal renews id, whose key and certificate cert serves, when due.
func newRenewal(j *joiner, status *runStatus, clk clock.Clock, id *join.Identity, cert *join.ClientCert) *renewal {
	return &renewal{joiner: j, status: status, clock: clk, id: id, cert: cert, timer: clk.After(id.RenewAt().Sub(clk.Now()))}
}

// due fires when the certificate is to be renewed.
func (n *renewal) due() <-chan time.Time { return n.timer }

// renew renews the certificate now and rotates it. A failure while the
// current certificate is valid is retried later (due fires again); one
// after it expired is returned: the run then joins again.
func (n *renewal) renew(ctx context.Context) error {
	clk := n.clock
	next, err := n.request(ctx, n.id)
	if err == nil {
		err = n.cert.Rotate(next)
	}
	now := clk.Now()
	if err != nil {
		if !now.Before(n.id.NotAfter()) {
			return join.Errorf(v1alpha1.ReasonNodeError, err, "the node certificate expired and could not be renewed; joining again")
		}
		retry := min(renewRetry, n.id.NotAfter().Sub(now)/4)
		klog.FromContext(ctx).Error(err, "Renewing the node certificate failed; retrying while the current one is valid", "notAfter", n.id.NotAfter(), "after", retry)
		n.timer = clk.After(retry)
		return nil
	}
	n.id = next
	n.status.setIdentity(next)
	n.status.setJoined(ctx)
	n.timer = clk.After(next.RenewAt().Sub(now))
	if n.renewed != nil {
		if err := n.renewed(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Rotating the gateway's key with the node certificate; the current key stays")
		}
	}
	return nil
}

// request gets a new certificate with the current one, or with the
// bootstrap token if the parent does not let nodes renew, and stores it.
func (n *renewal) request(ctx context.Context, old *join.Identity) (*join.Identity, error) {
	j := n.joiner
	logger := klog.FromContext(ctx)
	parent := &join.Parent{URL: old.ParentURL, CAData: old.CAData, ClusterName: old.ParentClusterName}
	// Clients of their own: client-go would keep a shared transport for
	// each certificate renewed with, for the life of the process.
	client, done, err := join.OwnClient(old.RESTConfig())
	if err != nil {
		return nil, err
	}
	defer done()
	id, err := j.request(ctx, client, parent)
	if err != nil {
		logger.Info("Renewing with the node certificate failed, trying the bootstrap token", "err", err)
		token, terr := j.token(ctx)
		if terr != nil {
			return nil, err
		}
		bootstrap, done, berr := join.OwnClient(&rest.Config{Host: parent.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: parent.CAData}})
		if berr != nil {
			return nil, berr
		}
		defer done()
		if id, err = j.request(ctx, bootstrap, parent); err != nil {
			return nil, err
		}
	}
	if err := j.store.Save(ctx, j.target.Name, id); err != nil {
		return nil, err
	}
	logger.Info("Renewed node certificate", "notAfter", id.NotAfter())
	return id, nil
}
