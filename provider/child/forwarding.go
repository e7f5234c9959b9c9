package child

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/provider/forward"
)

// forwarding is a run's side of the pods bound to its virtual node: the
// forwarder (provider/forward), which creates them here as delegates and
// handles "a parent pod changed", and virtual-kubelet's pod controller,
// which hands it the parent pods.
type forwarding struct {
	// factory holds the informer of the parent pods bound to the node
	// (the node identity may list and watch only those).
	factory  *kubeclient.CoreFactory
	pods     coreinformers.PodInformer
	fwd      *forward.Provider
	recorder record.EventRecorder
}

// newForwarding builds the forwarder of cfg over the parent pods bound to
// virtual node cfg.ClusterName, read through nodeClient; nothing runs
// before start. Its delegates answer the kubelet API from the start: none
// until start has synced them.
func newForwarding(ctx context.Context, nodeClient kubernetes.Interface, cfg forward.Config) (*forwarding, error) {
	f := &forwarding{factory: kubeclient.NewCoreFactory(nodeClient, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.ClusterName).String()
	}, kubeclient.StripManagedFields)}
	f.pods = f.factory.CoreV1().Pods()
	f.pods.Informer() // register before Start
	f.recorder = kubeclient.NewRecorder(ctx, nodeClient, cfg.ClusterName)
	cfg.Parent = nodeClient
	cfg.ParentPods = f.pods.Lister()
	cfg.ParentPodEvents = f.pods.Informer()
	cfg.Recorder = f.recorder
	cfg.ChildRecorder = kubeclient.NewRecorder(ctx, cfg.Child, cfg.ClusterName)
	var err error
	f.fwd, err = forward.New(cfg)
	return f, err
}

// start runs the forwarder and virtual-kubelet's pod controller over the
// parent pods until ctx ends.
func (f *forwarding) start(ctx context.Context, nodeClient kubernetes.Interface, workers int) (*node.PodController, error) {
	// virtual-kubelet requires these informers, for downward API
	// resolution, which is skipped (the child resolves it); they are never
	// started, so they make no requests.
	unused := kubeclient.NewCoreFactory(nodeClient, nil, nil)
	f.factory.Start(ctx.Done())
	if err := f.fwd.Run(ctx); err != nil {
		return nil, err
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:   currentMeta{PodsGetter: nodeClient.CoreV1(), pods: f.pods.Lister()},
		PodInformer: f.pods,
		// virtual-kubelet records a Normal event for every pod it hands
		// to the provider ("Create pod in provider successfully"): one
		// more write per pod at every level, saying nothing the pod's
		// status does not. Its warnings, and ours, are kept.
		EventRecorder:             warningsOnly{f.recorder},
		Provider:                  f.fwd,
		ConfigMapInformer:         unused.CoreV1().ConfigMaps(),
		SecretInformer:            unused.CoreV1().Secrets(),
		ServiceInformer:           unused.CoreV1().Services(),
		SkipDownwardAPIResolution: true,
		// virtual-kubelet's default is client-go's controller limiter,
		// whose overall bucket (10/s after a burst of 100) would make a
		// burst of pods wait seconds at each level.
		SyncPodsFromKubernetesRateLimiter:    podQueueLimiter(),
		DeletePodsFromKubernetesRateLimiter:  podQueueLimiter(),
		SyncPodStatusFromProviderRateLimiter: podQueueLimiter(),
	})
	if err != nil {
		return nil, err
	}
	go func() { _ = pc.Run(ctx, workers) }()
	return pc, nil
}

// podQueueLimiter retries a failing pod with per-pod exponential backoff
// and lets new pods through at up to 1000/s.
func podQueueLimiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, time.Minute),
		&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(rate.Limit(1000), 2000)},
	)
}

// warningsOnly drops Normal events.
type warningsOnly struct{ record.EventRecorder }

func (w warningsOnly) Event(obj runtime.Object, eventtype, reason, message string) {
	if eventtype != corev1.EventTypeNormal {
		w.EventRecorder.Event(obj, eventtype, reason, message)
	}
}

func (w warningsOnly) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if eventtype != corev1.EventTypeNormal {
		w.EventRecorder.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (w warningsOnly) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if eventtype != corev1.EventTypeNormal {
		w.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// currentMeta is the pod client virtual-kubelet's pod controller gets. Its
// status posts carry the whole pod the forwarder last sent, whose metadata
// can be older than the parent's by the time it is posted (a post retried
// after a conflict, a pod deleted meanwhile with a shorter grace period):
// the API server applies a status post's labels, annotations and
// finalizers, and refuses a deletionGracePeriodSeconds that differs from
// its own, which no retry mends (a Job's pod, evicted, then never posted
// Failed, stayed at the root for good with its finalizer). Each post
// carries the pod's metadata as the informer last saw it instead, at that
// version: a newer one makes it a conflict, retried with the next.
type currentMeta struct {
	corev1client.PodsGetter
	pods corelisters.PodLister
}

func (c currentMeta) Pods(namespace string) corev1client.PodInterface {
	return statusPods{PodInterface: c.PodsGetter.Pods(namespace), pods: c.pods.Pods(namespace)}
}

type statusPods struct {
	corev1client.PodInterface
	pods corelisters.PodNamespaceLister
}

func (s statusPods) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	post := *pod // the status is the caller's; the metadata is replaced
	if cur, err := s.pods.Get(pod.Name); err == nil && cur.UID == pod.UID {
		post.ObjectMeta = *cur.ObjectMeta.DeepCopy()
	} else {
		// Not seen (gone, or another pod of the name): the server's
		// own grace period is kept, whatever this one says.
		post.DeletionGracePeriodSeconds = nil
	}
	return s.PodInterface.UpdateStatus(ctx, &post, opts)
}
