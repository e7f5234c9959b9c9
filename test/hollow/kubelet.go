package hollow

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// kubelet is the simulated scheduler and kubelets of a cluster. The
// scheduler binds each pod without a node to a node that matches its
// nodeSelector and required node affinity, tolerates its taints and has
// room for its requests (CPU, memory, pods and any other resource the node
// declares), taking the nodes in turn (round robin); a pod that fits
// nowhere gets PodScheduled=False/Unschedulable and is tried again when a
// pod goes away. The kubelet runs a bound pod (Running, Ready, a pod IP,
// every container running) after StartDelay, and finishes a pod marked
// for deletion: containers terminated, then deleted for good.
type kubelet struct {
	client     kubernetes.Interface
	nodes      []*corev1.Node
	startDelay time.Duration
	clock      clock.Clock

	queue  workqueue.TypedRateLimitingInterface[string]
	lister corelisters.PodLister

	mu            sync.Mutex
	assigned      map[string]assignment // by pod key
	used          []corev1.ResourceList // by node index
	unschedulable map[string]bool
	next          int // round robin
	ips           int
}

// assignment is a pod's place and requests, counted against its node.
type assignment struct {
	node     int
	requests corev1.ResourceList
	bound    time.Time
}

func newKubelet(client kubernetes.Interface, nodes []*corev1.Node, startDelay time.Duration, clk clock.Clock) *kubelet {
	k := &kubelet{client: client, nodes: nodes, startDelay: startDelay, clock: clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "hollow-kubelet"}),
		assigned: map[string]assignment{}, used: make([]corev1.ResourceList, len(nodes)), unschedulable: map[string]bool{}}
	for i := range k.used {
		k.used[i] = corev1.ResourceList{}
	}
	return k
}

const kubeletWorkers = 2

func (k *kubelet) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(k.client, 0)
	pods := factory.Core().V1().Pods()
	k.lister = pods.Lister()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	_, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			k.release(key)
			k.retryUnschedulable()
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Simulated kubelet: adding handler")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer k.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return
	}
	var wg sync.WaitGroup
	for range kubeletWorkers {
		wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
}

func (k *kubelet) processNext(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(4).Info("Simulated kubelet: retrying pod", "pod", key, "err", err)
		}
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *kubelet) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := k.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.release(key)
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return k.finish(ctx, key, pod)
	case terminal(pod):
		k.release(key)
		return nil
	case pod.Spec.NodeName == "":
		return k.schedule(ctx, key, pod)
	}
	node := k.nodeIndex(pod.Spec.NodeName)
	if node < 0 {
		return nil // bound to a node this cluster has no kubelet for
	}
	a := k.account(key, pod, node)
	if pod.Status.Phase != corev1.PodPending {
		return nil
	}
	if wait := k.startDelay - k.clock.Since(a.bound); wait > 0 {
		k.queue.AddAfter(key, wait)
		return nil
	}
	return k.start(ctx, pod, node)
}

func (k *kubelet) nodeIndex(name string) int {
	for i, n := range k.nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// schedule binds pod to the next node that takes it.
func (k *kubelet) schedule(ctx context.Context, key string, pod *corev1.Pod) error {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	logger := klog.FromContext(ctx)
	k.mu.Lock()
	chosen := -1
	var reasons []string
	for j := range k.nodes {
		i := (k.next + j) % len(k.nodes)
		n := k.nodes[i]
		if ok, _ := affinity.Match(n); !ok {
			reasons = append(reasons, "node affinity/selector")
			continue
		}
		if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, n.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			reasons = append(reasons, fmt.Sprintf("untolerated taint %s", taint.Key))
			continue
		}
		if r := k.insufficient(i, req); r != "" {
			reasons = append(reasons, "insufficient "+r)
			continue
		}
		chosen = i
		break
	}
	if chosen >= 0 {
		k.next = (chosen + 1) % len(k.nodes)
		k.assigned[key] = assignment{node: chosen, requests: req, bound: k.clock.Now()}
		addTo(k.used[chosen], req, 1)
		delete(k.unschedulable, key)
	} else {
		k.unschedulable[key] = true
	}
	k.mu.Unlock()

	if chosen < 0 {
		msg := fmt.Sprintf("0/%d nodes are available: %s.", len(k.nodes), summarize(reasons))
		if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil
		}
		p := pod.DeepCopy()
		setPodCondition(&p.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.NewTime(k.clock.Now())})
		_, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "hollow-scheduler"})
		return err
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: k.nodes[chosen].Name},
	}, metav1.CreateOptions{FieldManager: "hollow-scheduler"})
	if err != nil {
		k.release(key)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("binding %s: %w", key, err)
	}
	return nil
}

// insufficient names a resource node i lacks for req, or returns "".
func (k *kubelet) insufficient(i int, req corev1.ResourceList) string {
	alloc := k.nodes[i].Status.Allocatable
	used := k.used[i]
	if pods, ok := alloc[corev1.ResourcePods]; ok {
		count := used[corev1.ResourcePods]
		if count.Value()+1 > pods.Value() {
			return string(corev1.ResourcePods)
		}
	}
	for name, q := range req {
		if q.IsZero() {
			continue
		}
		a, ok := alloc[name]
		if !ok {
			return string(name)
		}
		total := used[name].DeepCopy()
		total.Add(q)
		if total.Cmp(a) > 0 {
			return string(name)
		}
	}
	return ""
}

// account counts a bound pod against its node once (pods bound by
// something else than this scheduler, or before a restart).
func (k *kubelet) account(key string, pod *corev1.Pod, node int) assignment {
	k.mu.Lock()
	defer k.mu.Unlock()
	if a, ok := k.assigned[key]; ok {
		return a
	}
	a := assignment{node: node, requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), bound: k.clock.Now()}
	k.assigned[key] = a
	addTo(k.used[node], a.requests, 1)
	return a
}

// release gives a pod's node back its requests.
func (k *kubelet) release(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.unschedulable, key)
	a, ok := k.assigned[key]
	if !ok {
		return
	}
	delete(k.assigned, key)
	addTo(k.used[a.node], a.requests, -1)
}

func (k *kubelet) retryUnschedulable() {
	k.mu.Lock()
	keys := make([]string, 0, len(k.unschedulable))
	for key := range k.unschedulable {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.queue.Add(key)
	}
}

func addTo(used, req corev1.ResourceList, sign int64) {
	for name, q := range req {
		v := used[name]
		if sign > 0 {
			v.Add(q)
		} else {
			v.Sub(q)
		}
		used[name] = v
	}
	pods := used[corev1.ResourcePods]
	pods.Add(*resource.NewQuantity(sign, resource.DecimalSI))
	used[corev1.ResourcePods] = pods
}

// start runs pod on node: what a kubelet reports once the containers run.
func (k *kubelet) start(ctx context.Context, pod *corev1.Pod, node int) error {
	p := pod.DeepCopy()
	now := metav1.NewTime(k.clock.Now())
	hostIP := k.nodes[node].Status.Addresses[0].Address
	k.mu.Lock()
	k.ips++
	ip := fmt.Sprintf("10.%d.%d.%d", 64+node%64, (k.ips>>8)&255, k.ips&255)
	k.mu.Unlock()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		setPodCondition(&p.Status, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "hollow://" + c.Image, ContainerID: containerID(p, c.Name), Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "hollow://" + c.Image, ContainerID: containerID(p, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "hollow-kubelet"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// finish ends a pod marked for deletion: its containers stop at once
// (exit 0), the status says so, and the pod is deleted for good. A pod
// never bound was deleted by the API server already.
func (k *kubelet) finish(ctx context.Context, key string, pod *corev1.Pod) error {
	pods := k.client.CoreV1().Pods(pod.Namespace)
	if pod.Spec.NodeName != "" && !terminal(pod) {
		p := pod.DeepCopy()
		now := metav1.NewTime(k.clock.Now())
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: started, FinishedAt: now}}
		}
		for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
			setPodCondition(&p.Status, corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now})
		}
		p.Status.Phase = corev1.PodSucceeded
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "hollow-kubelet"}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	k.release(key)
	return nil
}

func containerID(p *corev1.Pod, name string) string { return "hollow://" + string(p.UID) + "/" + name }

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// summarize counts repeated reasons as the scheduler does ("2 node(s) ...").
func summarize(reasons []string) string {
	counts := map[string]int{}
	var order []string
	for _, r := range reasons {
		if counts[r] == 0 {
			order = append(order, r)
		}
		counts[r]++
	}
	parts := make([]string, 0, len(order))
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%d node(s) with %s", counts[r], r))
	}
	return strings.Join(parts, ", ")
}
