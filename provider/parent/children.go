package parent

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
)

// children are the children this cluster knows, and each one's share of the
// pod CIDR pool (grants.go). A name is known once this cluster approved a
// join for it (approver.go) or saw a virtual node of it, and stays known
// after its node is gone: a node of that name is a child's, held to a
// child's rules, whatever labels and taints it comes back with. The
// record lives in a ConfigMap of the agent's namespace
// (api.ChildrenConfigMap), written in the background (run): a share is
// given at once, and a restarted agent, or the next one elected, reads it
// back before it decides any claim.
type children struct {
	client    kubernetes.Interface
	namespace string
	// effect is the children's provider taint effect, recorded beside
	// them for the admission policy (api.ChildrenKeyTaintEffect).
	effect corev1.TaintEffect

	mu sync.Mutex
	// shares holds every known child, with its share of the pool (none:
	// nil); freed, the children whose share was freed since the last save
	// (a merge with what another replica wrote keeps them freed).
	shares map[string][]netip.Prefix
	freed  map[string]bool
	rv     string // the ConfigMap's resourceVersion, as last read or written
	exists bool   // whether the ConfigMap was there, as last read or written
	loaded chan struct{}
	dirty  chan struct{}
}

func newChildren(client kubernetes.Interface, namespace string, effect corev1.TaintEffect) *children {
	return &children{client: client, namespace: namespace, effect: effect, shares: map[string][]netip.Prefix{}, freed: map[string]bool{},
		loaded: make(chan struct{}), dirty: make(chan struct{}, 1)}
}

// load reads the record and merges it into what is known (once read,
// isLoaded is true).
func (c *children) load(ctx context.Context) error {
	if c.client == nil {
		c.markLoaded()
		return nil
	}
	cm, err := c.client.CoreV1().ConfigMaps(c.namespace).Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the children and their shares of the pod CIDR pool (configmap %s/%s): %w", c.namespace, api.ChildrenConfigMap, err)
	}
	c.mu.Lock()
	if err == nil {
		c.mergeLocked(cm)
	}
	c.mu.Unlock()
	c.markLoaded()
	return nil
}

func (c *children) markLoaded() {
	select {
	case <-c.loaded:
	default:
		close(c.loaded)
	}
}

// isLoaded reports whether the record was read.
func (c *children) isLoaded() bool {
	select {
	case <-c.loaded:
		return true
	default:
		return false
	}
}

// mergeLocked adds what cm records: every name, and the union of each
// share with the one known (but those freed here since). Called with mu
// held.
func (c *children) mergeLocked(cm *corev1.ConfigMap) {
	c.rv, c.exists = cm.ResourceVersion, true
	if cm.Data[api.ChildrenKeyTaintEffect] != string(c.effect) {
		c.kickLocked() // record this agent's effect
	}
	for name, v := range cm.Data {
		if strings.HasPrefix(name, ".") {
			continue // not a child (no node name starts with a dot)
		}
		var theirs []netip.Prefix
		if v != "" {
			theirs, _ = podcidrs.Parse(v)
		}
		ours, known := c.shares[name]
		switch {
		case c.freed[name]:
		case !known:
			c.shares[name] = theirs
		default:
			c.shares[name] = podcidrs.SetOf(ours, theirs).Prefixes()
		}
	}
}

// known reports whether name is a child's (none without a record).
func (c *children) known(name string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.shares[name]
	return ok
}

// add records name as a child's.
func (c *children) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.shares[name]; !ok {
		c.shares[name] = nil
		c.kickLocked()
	}
}

// share returns name's share of the pool.
func (c *children) share(name string) []netip.Prefix {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shares[name]
}

// setShare makes share name's share of the pool (and name a known child).
func (c *children) setShare(name string, share []netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.shares[name]; ok && slices.Equal(cur, share) {
		return
	}
	c.shares[name] = share
	delete(c.freed, name)
	c.kickLocked()
}

// free gives name's share back to the pool (its node is gone); the name
// stays known.
func (c *children) free(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.shares[name]) == 0 {
		return
	}
	c.shares[name] = nil
	c.freed[name] = true
	c.kickLocked()
}

// all returns every known child's share.
func (c *children) all() map[string][]netip.Prefix {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.shares)
}

func (c *children) kickLocked() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// saveRetry spaces the attempts to save the record after a failure.
const saveRetry = 2 * time.Second

// run saves the record after each change until ctx ends: an update from
// the version last read or written, and on a conflict (another replica
// wrote) the two merged and saved again.
func (c *children) run(ctx context.Context) {
	if c.client == nil {
		return
	}
	// The FlowSchema's subjects are also set again now and then: an
	// upgrade of the chart puts its placeholder back.
	resync := time.NewTicker(flowResync)
	defer resync.Stop()
	select {
	case <-ctx.Done():
		return
	case <-c.loaded:
	}
	c.resyncFlow(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
			c.resyncFlow(ctx)
			continue
		case <-c.dirty:
		}
		for {
			err := c.save(ctx)
			if err == nil || ctx.Err() != nil {
				break
			}
			klog.FromContext(ctx).Error(err, "Saving the children's shares of the pod CIDR pool; trying again")
			select {
			case <-ctx.Done():
				return
			case <-time.After(saveRetry):
			}
		}
	}
}

// save writes the record once.
func (c *children) save(ctx context.Context) error {
	cms := c.client.CoreV1().ConfigMaps(c.namespace)
	c.mu.Lock()
	data := make(map[string]string, len(c.shares)+1)
	for name, share := range c.shares {
		data[name] = podcidrs.Format(share)
	}
	if c.effect != "" {
		data[api.ChildrenKeyTaintEffect] = string(c.effect)
	}
	rv, exists := c.rv, c.exists
	c.mu.Unlock()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.ChildrenConfigMap, Namespace: c.namespace, ResourceVersion: rv,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "nestlet"}}, Data: data}
	var out *corev1.ConfigMap
	var err error
	if !exists {
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: api.FieldManager})
	} else {
		out, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: api.FieldManager})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Another replica wrote (or the first write of this one raced):
		// keep both, and save the merge.
		if lerr := c.load(ctx); lerr != nil {
			return lerr
		}
		return fmt.Errorf("saving configmap %s/%s: %w", c.namespace, api.ChildrenConfigMap, err)
	}
	if err != nil {
		return fmt.Errorf("saving configmap %s/%s: %w", c.namespace, api.ChildrenConfigMap, err)
	}
	c.mu.Lock()
	c.rv, c.exists = out.ResourceVersion, true
	clear(c.freed)
	c.mu.Unlock()
	c.resyncFlow(ctx)
	return nil
}

// flowResync is how often the children's FlowSchema is checked.
const flowResync = time.Minute

// resyncFlow sets the FlowSchema's subjects to the children known now.
func (c *children) resyncFlow(ctx context.Context) {
	c.mu.Lock()
	names := slices.Sorted(maps.Keys(c.shares))
	c.mu.Unlock()
	if err := c.syncFlow(ctx, names); err != nil {
		klog.FromContext(ctx).Error(err, "Setting the children's FlowSchema; trying again in a minute")
	}
}

// placeholder is the FlowSchema's subject while no child is known (a rule
// needs one): a node name no cluster has.
const placeholder = "system:node:nestlet-no-child-yet"

// syncFlow makes the children's FlowSchema (api.ChildrenFlowSchema) match
// the users of names, where the cluster has one (the chart makes it, with
// flowControl.enabled; so does the launcher).
func (c *children) syncFlow(ctx context.Context, names []string) error {
	schemas := c.client.FlowcontrolV1().FlowSchemas()
	fs, err := schemas.Get(ctx, api.ChildrenFlowSchema, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading FlowSchema %s: %w", api.ChildrenFlowSchema, err)
	}
	var subjects []flowcontrolv1.Subject
	for _, name := range names {
		subjects = append(subjects, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "system:node:" + name}})
	}
	if len(subjects) == 0 {
		subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: placeholder}}}
	}
	if len(fs.Spec.Rules) == 0 || equality.Semantic.DeepEqual(fs.Spec.Rules[0].Subjects, subjects) {
		return nil
	}
	fs.Spec.Rules[0].Subjects = subjects
	if _, err := schemas.Update(ctx, fs, metav1.UpdateOptions{FieldManager: api.FieldManager}); err != nil {
		return fmt.Errorf("updating FlowSchema %s: %w", api.ChildrenFlowSchema, err)
	}
	return nil
}
