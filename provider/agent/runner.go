package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/kubeutil"
	"github.com/nestlet/nestlet/provider/vnode"
)

// Reasons after which retrying the same spec is pointless: the runner waits
// for the Target to change.
var terminalReasons = map[string]bool{
	v1alpha1.ReasonInvalidSpec: true,
	v1alpha1.ReasonSelfTarget:  true,
	v1alpha1.ReasonCSRDenied:   true,
}

// errRenewed ends a run after the node certificate was renewed, to start
// again at once with the new one.
var errRenewed = errors.New("node certificate renewed")

// errProxyChanged ends a run when the parent's nestlet-proxy appeared,
// went, or changed its endpoints, to serve the kubelet API the new way.
var errProxyChanged = errors.New("the parent's nestlet-proxy changed")

// runner joins one parent for one generation of a Target and keeps its
// virtual node running.
type runner struct {
	a          *Agent
	target     *v1alpha1.Target
	generation int64
	cancel     context.CancelFunc
	done       chan struct{}
	lastStatus time.Time
}

func newRunner(a *Agent, t *v1alpha1.Target) *runner {
	return &runner{a: a, target: t, generation: t.Generation, done: make(chan struct{})}
}

func (r *runner) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("target", r.target.Name, "parent", r.target.Spec.ParentURL))
	go r.run(ctx)
}

// stop cancels the runner and waits for it; its virtual node is left in
// the parent (a new runner takes it over, or leave removes it).
func (r *runner) stop() {
	r.cancel()
	<-r.done
}

func (r *runner) run(ctx context.Context) {
	defer close(r.done)
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 2 * time.Minute}
	for {
		err := r.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRenewed) || errors.Is(err, errProxyChanged) {
			if errors.Is(err, errProxyChanged) {
				logger.Info("The parent's nestlet-proxy changed; restarting the virtual node's kubelet API")
			}
			continue
		}
		reason, msg := join.ReasonOf(err, v1alpha1.ReasonNodeError)
		logger.Info("Target not ready", "reason", reason, "message", msg)
		r.setReady(ctx, metav1.ConditionFalse, reason, msg)
		if terminalReasons[reason] {
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.a.cfg.Clock.After(backoff.Step()):
		}
	}
}

func (r *runner) setReady(ctx context.Context, status metav1.ConditionStatus, reason, msg string) {
	conds := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}}
	if status == metav1.ConditionFalse && !joinedReasons[reason] {
		conds = append(conds, metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
	r.a.setConditions(ctx, r.target.Name, r.generation, nil, conds...)
}

// Reasons that leave the Joined condition as it is (the identity is fine).
var joinedReasons = map[string]bool{v1alpha1.ReasonNameTaken: true, v1alpha1.ReasonNodeError: true, v1alpha1.ReasonChildNotReady: true}

// once joins (or reuses the stored identity) and runs the virtual node until
// ctx ends, the node controller fails, or the certificate is renewed.
func (r *runner) once(ctx context.Context) error {
	t := r.target
	if err := validateSpec(t); err != nil {
		return err
	}
	id, err := r.identity(ctx)
	if err != nil {
		return err
	}
	expiry := metav1.NewTime(id.NotAfter())
	r.a.setConditions(ctx, t.Name, r.generation, func(s *v1alpha1.TargetStatus) {
		s.CertificateExpiry = &expiry
		s.ParentClusterName = id.ParentClusterName
	}, metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonJoined,
		Message: fmt.Sprintf("this cluster holds the identity %s in the parent until %s", join.NodeUser(t.Spec.ClusterName), id.NotAfter().UTC().Format(time.RFC3339))})

	nodeClient, err := kubernetes.NewForConfig(id.RESTConfig())
	if err != nil {
		return err
	}
	nodes := nodeClient.CoreV1().Nodes()
	existing, err := nodes.Get(ctx, t.Spec.ClusterName, metav1.GetOptions{})
	switch {
	case err == nil && existing.Annotations[api.AnnotationClusterUID] != r.a.clusterUID:
		return join.Errorf(v1alpha1.ReasonNameTaken, nil,
			"the parent already has a node named %q that is not this cluster's: choose another spec.clusterName, or delete that node in the parent if it is stale", t.Spec.ClusterName)
	case err != nil && !apierrors.IsNotFound(err):
		return join.Classify(err, t.Spec.ParentURL)
	}
	registered := err == nil

	delegates := &lazyDelegates{}
	kapi, err := r.setupKubeletAPI(ctx, id, nodeClient, delegates)
	if err != nil {
		return err
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	if kapi.run != nil {
		go kapi.run(kctx)
	}

	changed, unsubscribe := r.a.changes.subscribe()
	defer unsubscribe()
	prov, err := vnode.New(vnode.Config{
		ClusterName:     t.Spec.ClusterName,
		ClusterUID:      r.a.clusterUID,
		ParentName:      parentName(id, t),
		GroupKeys:       r.a.cfg.GroupKeys,
		Labels:          t.Spec.Labels,
		Taints:          t.Spec.Taints,
		ReportFrequency: reportFrequency(t),
		Nodes:           r.a.nodes,
		Pods:            r.a.pods,
		Changed:         changed,
		Ready:           r.a.ready,
		Reported:        func(at time.Time) { r.reported(ctx, at) },
		KubeletEndpoint: kapi.hostPort,
		PatchSummary: func(ctx context.Context, sum string) error {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationSummary: sum}}})
			if err != nil {
				return err
			}
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			return err
		},
		Clock: r.a.cfg.Clock,
	})
	if err != nil {
		return err
	}
	initial, err := prov.InitialNode()
	if err != nil {
		return err
	}
	// The node is registered here, not by the node controller, so that it
	// carries its summary from the start (the node controller never
	// applies the summary: PatchSummary writes it).
	if !registered {
		_, err = nodes.Create(ctx, initial, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		var patch []byte
		if patch, err = prov.AdoptPatch(existing, initial); err == nil {
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		}
	}
	if err != nil {
		return nodeError(err, t)
	}
	nc, err := node.NewNodeController(prov, prov.ControllerNode(initial), nodes,
		node.WithNodeEnableLeaseV1(nodeClient.CoordinationV1().Leases(corev1.NamespaceNodeLease), r.a.cfg.LeaseDurationSeconds),
		node.WithNodeStatusUpdateErrorHandler(func(ctx context.Context, err error) error {
			if !apierrors.IsNotFound(err) {
				return err
			}
			// Someone deleted the node in the parent: register it again.
			n, berr := prov.InitialNode()
			if berr != nil {
				return berr
			}
			_, cerr := nodes.Create(ctx, n, metav1.CreateOptions{FieldManager: fieldManager})
			return cerr
		}),
	)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		<-nc.Done()
	}()
	go func() { _ = nc.Run(runCtx) }()
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return nodeError(nc.Err(), t)
	case <-ctx.Done():
		return ctx.Err()
	}
	pc, err := r.startPods(runCtx, nodeClient, prov, parentName(id, t), delegates)
	if err != nil {
		return err
	}
	select {
	case <-pc.Ready():
	case <-pc.Done():
		return join.Errorf(v1alpha1.ReasonNodeError, pc.Err(), "forwarding pods stopped")
	case <-ctx.Done():
		return ctx.Err()
	}

	r.a.setConditions(ctx, t.Name, r.generation, func(s *v1alpha1.TargetStatus) { s.NodeName = t.Spec.ClusterName },
		metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReporting,
			Message: fmt.Sprintf("virtual node %s is registered in the parent and reports every %s; %s", t.Spec.ClusterName, reportFrequency(t), kapi.describe())})

	renew := r.a.cfg.Clock.After(id.RenewAt().Sub(r.a.cfg.Clock.Now()))
	proxyChanged := r.watchProxy(runCtx, nodeClient, kapi)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-proxyChanged:
		return errProxyChanged
	case <-nc.Done():
		return nodeError(nc.Err(), t)
	case <-pc.Done():
		return join.Errorf(v1alpha1.ReasonNodeError, pc.Err(), "forwarding pods stopped")
	case <-renew:
		cancel()
		<-nc.Done()
		if err := r.renew(ctx, id); err != nil {
			return err
		}
		return errRenewed
	}
}

// startPods runs virtual-kubelet's pod controller over the pods bound to
// the virtual node, with the forwarding provider.
func (r *runner) startPods(ctx context.Context, nodeClient kubernetes.Interface, prov *vnode.Provider, parent string, delegates *lazyDelegates) (*node.PodController, error) {
	t := r.target
	// The node identity may list and watch only the pods bound to it.
	podFactory := kubeutil.NewCoreFactory(nodeClient, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", t.Spec.ClusterName).String()
	}, kubeutil.StripManagedFields)
	pods := podFactory.CoreV1().Pods()
	pods.Informer() // register before Start
	// virtual-kubelet requires these informers, for downward API
	// resolution, which is skipped (the child resolves it); they are never
	// started, so they make no requests.
	unused := kubeutil.NewCoreFactory(nodeClient, nil, nil)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: nodeClient.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nestlet", Host: t.Spec.ClusterName})

	fwd, err := forward.New(forward.Config{
		TargetName:    t.Name,
		TargetUID:     t.UID,
		ClusterName:   t.Spec.ClusterName,
		ParentName:    parent,
		BounceTimeout: r.a.cfg.BounceTimeout,
		Parent:        nodeClient,
		ParentPods:    pods.Lister(),
		Child:         r.a.client,
		Recorder:      recorder,
		Avoid:         prov.Avoid,
		Metrics:       r.a.metrics,
	})
	if err != nil {
		return nil, err
	}
	podFactory.Start(ctx.Done())
	if err := fwd.Run(ctx); err != nil {
		return nil, err
	}
	delegates.set(fwd)
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:   nodeClient.CoreV1(),
		PodInformer: pods,
		// virtual-kubelet records a Normal event for every pod it hands
		// to the provider ("Create pod in provider successfully"): one
		// more write per pod at every level, saying nothing the pod's
		// status does not. Its warnings, and ours, are kept.
		EventRecorder:             warningsOnly{recorder},
		Provider:                  fwd,
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
	go func() { _ = pc.Run(ctx, r.a.cfg.PodWorkers) }()
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

// parentName is the parent's cluster name as published by the parent, or
// its API server's host:port when it publishes none.
func parentName(id *join.Identity, t *v1alpha1.Target) string {
	if id.ParentClusterName != "" {
		return id.ParentClusterName
	}
	if u, err := url.Parse(t.Spec.ParentURL); err == nil {
		return u.Host
	}
	return t.Spec.ParentURL
}

func nodeError(err error, t *v1alpha1.Target) error {
	if err == nil {
		err = errors.New("node controller stopped")
	}
	if apierrors.IsForbidden(err) {
		return join.Errorf(v1alpha1.ReasonNodeError, err,
			"the parent refused the virtual node (NodeRestriction forbids some labels or taints): check spec.labels")
	}
	return join.Errorf(v1alpha1.ReasonNodeError, join.Classify(err, t.Spec.ParentURL), "running the virtual node failed; retrying")
}

// reported records the time of the last report, at most once per report
// period.
func (r *runner) reported(ctx context.Context, at time.Time) {
	if at.Sub(r.lastStatus) < reportFrequency(r.target) {
		return
	}
	r.lastStatus = at
	ts := metav1.NewTime(at)
	r.a.setConditions(ctx, r.target.Name, r.generation, func(s *v1alpha1.TargetStatus) { s.LastReportTime = &ts })
}

func reportFrequency(t *v1alpha1.Target) time.Duration {
	if t.Spec.ReportFrequency.Duration > 0 {
		return t.Spec.ReportFrequency.Duration
	}
	d, _ := time.ParseDuration(v1alpha1.DefaultReportFrequency)
	return d
}

// ready fails when this cluster's API server is not ready.
func (a *Agent) ready(ctx context.Context) error {
	if a.cfg.Ready != nil {
		return a.cfg.Ready(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := a.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("this cluster's API server is not ready: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("this cluster's API server is not ready: %s", body)
	}
	return nil
}

// identity returns the stored node identity, or joins to get one.
func (r *runner) identity(ctx context.Context) (*join.Identity, error) {
	t := r.target
	store := join.Store{Client: r.a.client, Namespace: r.a.cfg.Namespace}
	id, err := store.Load(ctx, t.Name, t.Spec.ParentURL, t.Spec.ClusterName, r.a.cfg.Clock.Now())
	if err != nil || id != nil {
		return id, err
	}
	if r.isSelf(t.Spec.ParentURL, nil) {
		return nil, selfTarget()
	}
	token, err := r.token(ctx)
	if err != nil {
		return nil, err
	}
	r.setJoining(ctx, v1alpha1.ReasonJoining, "discovering the parent and checking the bootstrap token")
	parent, err := join.Discover(ctx, join.DiscoveryOptions{
		ParentURL: t.Spec.ParentURL, Token: token, CACertHash: t.Spec.CACertHash, CABundle: t.Spec.CABundle,
	})
	if err != nil {
		return nil, err
	}
	if r.isSelf(t.Spec.ParentURL, parent.CAData) {
		return nil, selfTarget()
	}
	bootstrap, err := kubernetes.NewForConfig(&rest.Config{Host: parent.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: parent.CAData}})
	if err != nil {
		return nil, err
	}
	id, err = r.requestIdentity(ctx, bootstrap, parent)
	if err != nil {
		return nil, err
	}
	if err := store.Save(ctx, t.Name, id); err != nil {
		return nil, err
	}
	return id, nil
}

func (r *runner) requestIdentity(ctx context.Context, client kubernetes.Interface, parent *join.Parent) (*join.Identity, error) {
	t := r.target
	key, err := join.NewKey()
	if err != nil {
		return nil, err
	}
	cert, err := join.RequestNodeCertificate(ctx, client, t.Spec.ClusterName, key, func(csr string) {
		r.setJoining(ctx, v1alpha1.ReasonAwaitingApproval, fmt.Sprintf(
			"certificate signing request %s awaits approval in the parent: run 'nestctl approve %s' against the parent (or create tokens with 'nestctl token create --auto-approve')",
			csr, t.Spec.ClusterName))
	})
	if err != nil {
		return nil, err
	}
	return join.NewIdentity(parent, t.Spec.ClusterName, cert, key)
}

// renew gets a new certificate with the current one, or with the bootstrap
// token if the parent does not let nodes renew.
func (r *runner) renew(ctx context.Context, old *join.Identity) error {
	logger := klog.FromContext(ctx)
	parent := &join.Parent{URL: old.ParentURL, CAData: old.CAData, ClusterName: old.ParentClusterName}
	client, err := kubernetes.NewForConfig(old.RESTConfig())
	if err != nil {
		return err
	}
	id, err := r.requestIdentity(ctx, client, parent)
	if err != nil {
		logger.Info("Renewing with the node certificate failed, trying the bootstrap token", "err", err)
		token, terr := r.token(ctx)
		if terr != nil {
			return err
		}
		bootstrap, berr := kubernetes.NewForConfig(&rest.Config{Host: parent.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: parent.CAData}})
		if berr != nil {
			return berr
		}
		if id, err = r.requestIdentity(ctx, bootstrap, parent); err != nil {
			return err
		}
	}
	store := join.Store{Client: r.a.client, Namespace: r.a.cfg.Namespace}
	if err := store.Save(ctx, r.target.Name, id); err != nil {
		return err
	}
	logger.Info("Renewed node certificate", "notAfter", id.NotAfter())
	return nil
}

func (r *runner) setJoining(ctx context.Context, reason, msg string) {
	r.a.setConditions(ctx, r.target.Name, r.generation, nil,
		metav1.Condition{Type: v1alpha1.ConditionJoined, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
		metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// token reads the bootstrap token from the Secret the Target names.
func (r *runner) token(ctx context.Context) (string, error) {
	ref := r.target.Spec.BootstrapTokenSecretRef
	sec, err := r.a.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", join.Errorf(v1alpha1.ReasonTokenSecretError, err,
			"cannot read the bootstrap token Secret %s/%s: create it with 'nestctl join' or 'kubectl create secret generic %s -n %s --from-literal=token=<token>'",
			ref.Namespace, ref.Name, ref.Name, ref.Namespace)
	}
	token := strings.TrimSpace(string(sec.Data["token"]))
	if token == "" {
		return "", join.Errorf(v1alpha1.ReasonTokenSecretError, nil, "Secret %s/%s has no key 'token'", ref.Namespace, ref.Name)
	}
	return token, nil
}

func selfTarget() error {
	return join.Errorf(v1alpha1.ReasonSelfTarget, nil,
		"spec.parentURL points at this very cluster: a cluster cannot be its own parent; set the URL of another cluster's API server")
}

// isSelf reports whether parentURL is this cluster's own API server, or
// parentCA one of this cluster's CA certificates.
func (r *runner) isSelf(parentURL string, parentCA []byte) bool {
	own := r.a.cfg.RESTConfig
	if sameEndpoint(own.Host, parentURL) {
		return true
	}
	if len(parentCA) == 0 {
		return false
	}
	cfg := rest.CopyConfig(own)
	if err := rest.LoadTLSFiles(cfg); err != nil || len(cfg.CAData) == 0 {
		return false
	}
	ours, err1 := certutil.ParseCertsPEM(cfg.CAData)
	theirs, err2 := certutil.ParseCertsPEM(parentCA)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, a := range ours {
		for _, b := range theirs {
			if a.Equal(b) || bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) {
				return true
			}
		}
	}
	return false
}

func sameEndpoint(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host)
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
