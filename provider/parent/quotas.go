package parent

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/quota"
)

// childQuotas is the parent's side of the capacity quotas
// (api.QuotasConfigMap), which the parent's admin sets (`nestctl quota`,
// or `nestctl token create --quota` for a child yet to join): a child
// that claims more than its quota gets a Warning event on its node; the
// scheduler places no more than the quota on it
// (scheduler-plugins/watermark). A child without a quota is believed.
type childQuotas struct {
	quotas   *quota.Watcher
	recorder record.EventRecorder
	// warned holds, per node, what was last warned about.
	mu     sync.Mutex
	warned map[string]string
}

// check warns when n claims more than its quota, or its quota does not
// parse.
func (c *childQuotas) check(n *corev1.Node) {
	if c == nil || !c.quotas.HasSynced() {
		return
	}
	q, ok, err := c.quotas.Of(n.Name)
	switch {
	case err != nil:
		c.warn(n, "QuotaInvalid", err.Error()+": the scheduler places nothing more on this child until it is fixed (nestctl quota "+n.Name+" RESOURCE=QUANTITY,...)")
	case !ok:
		c.setWarned(n.Name, "")
	default:
		if over := quota.Exceeds(n.Status.Allocatable, q); len(over) > 0 {
			c.warn(n, "OverQuota", "the child claims "+strings.Join(over, ", ")+
				", beyond the quota its parent set (configmap "+metav1.NamespaceSystem+"/"+api.QuotasConfigMap+
				"): the scheduler places no more than the quota there; raise it with nestctl quota "+n.Name+" RESOURCE=QUANTITY,...")
			return
		}
		c.setWarned(n.Name, "")
	}
}

// warn records a Warning event on n, once per distinct message.
func (c *childQuotas) warn(n *corev1.Node, reason, message string) {
	if c.setWarned(n.Name, reason+message) {
		// The node's UID as its object reference: events about nodes
		// are found by name.
		c.recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, corev1.EventTypeWarning, reason, message)
	}
}

// setWarned sets what was last warned about node name and reports
// whether it changed.
func (c *childQuotas) setWarned(name, what string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[name] == what {
		return false
	}
	if what == "" {
		delete(c.warned, name)
	} else {
		c.warned[name] = what
	}
	return true
}
