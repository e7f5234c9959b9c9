package forward

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/queue"
)

// rootCAConfigMap is published in every namespace of every cluster by the
// controller manager; each cluster keeps its own.
const rootCAConfigMap = "kube-root-ca.crt"

type depKind string

const (
	kindConfigMap depKind = "ConfigMap"
	kindSecret    depKind = "Secret"
)

type depKey struct {
	kind            depKind
	namespace, name string
}

// references returns the ConfigMaps and Secrets a pod uses (volumes,
// projected volumes, env, envFrom, image pull secrets), as the kubelet
// finds them.
func references(pod *corev1.Pod) []depKey {
	var keys []depKey
	podutil.VisitPodConfigmapNames(pod, func(name string) bool {
		if name != rootCAConfigMap {
			keys = append(keys, depKey{kindConfigMap, pod.Namespace, name})
		}
		return true
	})
	podutil.VisitPodSecretNames(pod, func(name string) bool {
		keys = append(keys, depKey{kindSecret, pod.Namespace, name})
		return true
	})
	return keys
}

// delegateReferences returns what the delegate d references, named as in
// the parent (the namespace of d's parent pod).
func (p *Provider) delegateReferences(d *corev1.Pod) []depKey {
	keys := references(d)
	if ns, _, ok := parentKey(d); ok {
		for i := range keys {
			keys[i].namespace = ns
		}
	}
	return keys
}

// dependencies copies what delegates reference from the parent, keeps the
// copies in sync by watching each object in the parent (the node identity
// may watch exactly the objects its pods reference), and removes a copy
// once no delegate of this Target uses it. It reads no ConfigMap or Secret
// of this cluster (copies.go); the ledger says which copies exist.
type dependencies struct {
	p      *Provider
	queue  *queue.Worker[string] // namespaces to collect
	ledger *ledger

	mu       sync.Mutex
	watches  map[depKey]context.CancelFunc
	versions map[depKey]copyVersion
}

// copyVersion is the parent's version of an object this agent last wrote
// into its copy; when a write of it last began, and how many have begun
// (gen), so that a collection can tell one that raced with it.
type copyVersion struct {
	rv  string
	at  time.Time
	gen uint64
}

func newDependencies(p *Provider) *dependencies {
	d := &dependencies{
		p:        p,
		ledger:   newLedger(&p.cfg),
		watches:  map[depKey]context.CancelFunc{},
		versions: map[depKey]copyVersion{},
	}
	d.queue = queue.New(queue.Config[string]{Name: "dependency-gc", Failure: "Collecting unused copies", KeyName: "namespace",
		Reconcile: func(ctx context.Context, ns string) (time.Duration, error) { return 0, d.gc(ctx, ns) }})
	return d
}

// copyFor copies every object pod references into this cluster and starts
// watching each in the parent.
func (d *dependencies) copyFor(ctx context.Context, pod *corev1.Pod) error {
	for _, k := range references(pod) {
		if err := d.copyOne(ctx, k); err != nil {
			return err
		}
		d.watch(k)
	}
	return d.serviceAccountFor(ctx, pod)
}

// conflict tells why what pod references cannot be copied here: an object
// of that name here is not this Target's copy (this cluster's own, or
// another parent's copy in a namespace two parents share). It asks with a
// patch made of the label test alone, which changes nothing, since the
// agent reads no ConfigMap or Secret here (copies.go); a copy the ledger
// records is this Target's, unasked. "" when every one is free or this
// Target's.
func (d *dependencies) conflict(ctx context.Context, pod *corev1.Pod) (string, error) {
	for _, k := range references(pod) {
		if d.ledger.has(k) {
			continue // this Target's copy: nothing to ask
		}
		_, err := d.patch(ctx, k, []jsonOp{d.testOurs()})
		switch {
		case notOurs(err):
			return fmt.Sprintf("%s %s/%s in cluster %s is not a copy of this parent's (another parent's copy, or the cluster's own): "+
				"its admin can give each parent namespaces of its own (Target spec.namespaces.mapping Prefixed), or rename one of them",
				k.kind, d.p.ns(k.namespace), k.name, d.p.cfg.ClusterName), nil
		case err != nil && !apierrors.IsNotFound(err):
			return "", fmt.Errorf("checking %s %s/%s here: %w", k.kind, d.p.ns(k.namespace), k.name, err)
		}
	}
	return "", nil
}

// serviceAccountFor makes the service account pod runs as here, which this
// cluster's admission wants before it takes the pod (a held delegate too);
// "default" is the namespace's own.
func (d *dependencies) serviceAccountFor(ctx context.Context, pod *corev1.Pod) error {
	if sa := pod.Spec.ServiceAccountName; sa != "" && sa != "default" {
		return d.ensureServiceAccount(ctx, d.p.ns(pod.Namespace), sa)
	}
	return nil
}

// copyOne reads k from the parent and writes it here. A referenced object
// missing in the parent is not an error: the pod waits for it there too,
// and the watch copies it once it appears.
func (d *dependencies) copyOne(ctx context.Context, k depKey) error {
	var obj metav1.Object
	var err error
	switch k.kind {
	case kindConfigMap:
		obj, err = d.p.cfg.Parent.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	case kindSecret:
		obj, err = d.p.cfg.Parent.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s/%s in the parent: %w", k.kind, k.namespace, k.name, err)
	}
	return d.write(ctx, obj)
}

func (d *dependencies) ensureServiceAccount(ctx context.Context, ns, name string) error {
	_, err := d.p.cfg.Child.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: map[string]string{api.LabelTargetUID: string(d.p.cfg.TargetUID)},
	}}, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s/%s: %w", ns, name, err)
	}
	return nil
}

// watch keeps the copy of k in step with the parent (made, updated,
// deleted as it is there) until the copy is collected.
func (d *dependencies) watch(k depKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.watches[k]; ok {
		return
	}
	ctx, cancel := context.WithCancel(d.p.ctx)
	d.watches[k] = cancel
	go d.follow(ctx, k)
}

func (d *dependencies) follow(ctx context.Context, k depKey) {
	logger := klog.FromContext(ctx).WithValues("kind", k.kind, "object", klog.KRef(k.namespace, k.name))
	var lw *cache.ListWatch
	var example runtime.Object
	switch k.kind {
	case kindConfigMap:
		c := d.p.cfg.Parent.CoreV1().ConfigMaps(k.namespace)
		example, lw = &corev1.ConfigMap{}, kubeclient.SingleObject(k.name, c.List, c.Watch)
	case kindSecret:
		c := d.p.cfg.Parent.CoreV1().Secrets(k.namespace)
		example, lw = &corev1.Secret{}, kubeclient.SingleObject(k.name, c.List, c.Watch)
	}
	_, err := watchtools.UntilWithSync(ctx, lw, example, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Added, watch.Modified:
			obj, ok := ev.Object.(metav1.Object)
			if !ok {
				return false, nil
			}
			if err := d.write(ctx, obj); err != nil {
				logger.Error(err, "Updating copy")
			} else {
				logger.V(4).Info("Copy in step with the parent")
			}
		case watch.Deleted:
			// Gone in the parent, gone here: a container sees an
			// optional ConfigMap or Secret go as in one cluster (a
			// required one keeps its last content, as a kubelet keeps
			// it). Followed still: made again should it come back.
			_, gen := d.fresh(k)
			if err := d.remove(ctx, k, gen); err != nil {
				logger.Error(err, "Removing the copy of an object deleted in the parent")
			} else {
				logger.V(2).Info("Removed the copy of an object deleted in the parent")
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil {
		logger.Error(err, "Watching dependency in the parent")
	}
}

func (d *dependencies) enqueueGC(namespace string) { d.queue.AddAfter(namespace, time.Second) }

// run collects unused copies: at start in every namespace holding copies of
// this Target, then whenever a delegate goes away.
func (d *dependencies) run(ctx context.Context) {
	if !d.p.cfg.New {
		if err := d.ledger.load(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Unused copies made before this start are not collected until the ledger can be read")
		}
		for _, ns := range d.ledger.namespaces() {
			d.enqueueGC(ns)
		}
	}
	// Delegates that exist (after a restart) keep their copies followed.
	delegates, _ := d.p.lister.List(labels.Everything())
	for _, pod := range delegates {
		for _, k := range d.p.delegateReferences(pod) {
			d.watch(k)
		}
	}
	d.queue.Run(ctx, 1)
}

// gc deletes the copies of the parent namespace's objects that no delegate
// of this Target uses, but those written moments ago (copyGrace), which it
// looks at again later.
func (d *dependencies) gc(ctx context.Context, namespace string) error {
	used := map[depKey]bool{}
	pods, err := d.p.lister.Pods(d.p.ns(namespace)).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, pod := range pods {
		for _, k := range d.p.delegateReferences(pod) {
			used[k] = true
		}
	}
	var later time.Duration
	for _, k := range d.ledger.in(namespace) {
		if used[k] {
			continue
		}
		wait, gen := d.fresh(k)
		if wait > 0 {
			later = max(later, wait)
			continue
		}
		d.mu.Lock()
		if cancel, ok := d.watches[k]; ok {
			cancel()
			delete(d.watches, k)
		}
		d.mu.Unlock()
		if err := d.remove(ctx, k, gen); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Collected unused copy", "kind", k.kind, "object", klog.KRef(k.namespace, k.name))
	}
	if later > 0 {
		d.queue.AddAfter(namespace, later)
	}
	return nil
}
