package hollow

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/provider/agent"
)

// Parent is what a child needs to join a parent: what `nestctl token
// create` prints for `nestctl join`.
type Parent struct {
	URL        string
	Token      string
	CACertHash string
}

var (
	parentURLFlag  = regexp.MustCompile(`--parent-url\s+(\S+)`)
	tokenFlag      = regexp.MustCompile(`--token\s+(\S+)`)
	caCertHashFlag = regexp.MustCompile(`--ca-cert-hash\s+(\S+)`)
)

// ParentOf runs `nestctl token create --auto-approve` against parent, as
// launcher.Join does, and returns what its printed join command holds. A
// bootstrap token is not used up by a join: many children may share it.
func ParentOf(ctx context.Context, parent *launcher.Cluster) (Parent, error) {
	out, err := parent.Nestctl(ctx, "token", "create", "--cluster-name="+parent.Name, "--auto-approve")
	if err != nil {
		return Parent{}, err
	}
	var p Parent
	for _, f := range []struct {
		re  *regexp.Regexp
		out *string
	}{{parentURLFlag, &p.URL}, {tokenFlag, &p.Token}, {caCertHashFlag, &p.CACertHash}} {
		m := f.re.FindStringSubmatch(out)
		if m == nil {
			return Parent{}, fmt.Errorf("nestctl token create printed no %s: %q", f.re, out)
		}
		*f.out = m[1]
	}
	return p, nil
}

// Config of a hollow child.
type Config struct {
	// Name is the cluster's name and its node name in the parent
	// (Target.spec.clusterName). Required.
	Name string
	// Parent is where it joins. Required.
	Parent Parent
	// Nodes, NodeCapacity and Labels describe its nodes (ClusterConfig).
	Nodes        int
	NodeCapacity corev1.ResourceList
	Labels       map[string]string
	// StartDelay is how long its pods take to run once bound.
	StartDelay time.Duration
	// TargetLabels are Target.spec.labels (extra labels of the virtual
	// node).
	TargetLabels map[string]string
	// ReportFrequency is Target.spec.reportFrequency (default 10s, as
	// `nestctl join`).
	ReportFrequency time.Duration
	// Logger receives the agent's and the simulation's logs (default:
	// discarded).
	Logger *klog.Logger
	// Agent, when set, adjusts the agent's configuration before it starts.
	Agent func(*agent.Config)
}

// Child is a hollow child cluster: a simulated cluster whose real Nestlet
// agent has joined (or is joining) a real parent.
type Child struct {
	*Cluster
	// Target is the name of its Target.
	Target string
	// Created is when its Target was created.
	Created time.Time

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
	// seen is when each condition of the Target was first seen with a
	// status, and with a reason (keys "type/status" and "type/reason").
	seen map[string]time.Time
}

// Start builds a simulated cluster, runs its scheduler and kubelet and a
// real agent (provider/agent, in this process) over it, and applies what
// `nestctl join` applies: the bootstrap token Secret and the Target. It
// returns once the Target exists, without waiting for the join (WaitReady
// does). The child runs until Stop or until ctx ends.
func Start(ctx context.Context, cfg Config) (*Child, error) {
	if cfg.Parent.URL == "" || cfg.Parent.Token == "" || cfg.Parent.CACertHash == "" {
		return nil, errors.New("hollow: Parent.URL, Parent.Token and Parent.CACertHash are required")
	}
	if cfg.ReportFrequency == 0 {
		cfg.ReportFrequency = 10 * time.Second
	}
	u, err := url.Parse(cfg.Parent.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("hollow: parent URL %q is not a URL", cfg.Parent.URL)
	}
	cl, err := NewCluster(ClusterConfig{Name: cfg.Name, Nodes: cfg.Nodes, NodeCapacity: cfg.NodeCapacity, Labels: cfg.Labels, StartDelay: cfg.StartDelay})
	if err != nil {
		return nil, err
	}
	acfg := agent.Config{
		// Only compared with the parent's URL and CA (a Target that
		// points at its own cluster is refused); never dialled.
		RESTConfig: &rest.Config{Host: "https://hollow-" + cfg.Name + ".invalid"},
		Client:     cl.Client,
		Targets:    cl.Targets,
		Ready:      func(context.Context) error { return nil },
		KubeletAPI: agent.KubeletAPIOff,
		// The parents run Nestlet's profile as their default scheduler.
		TrustedSchedulers: launcher.TrustedSchedulers,
	}
	if cfg.Agent != nil {
		cfg.Agent(&acfg)
	}
	a, err := agent.New(acfg)
	if err != nil {
		return nil, err
	}
	logger := klog.Logger{}
	if cfg.Logger != nil {
		logger = cfg.Logger.WithValues("hollow", cfg.Name)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	c := &Child{Cluster: cl, cancel: cancel, done: make(chan struct{}), seen: map[string]time.Time{}}
	// What `nestctl join` writes (cmd/nestctl/app/join.go) is named after
	// the parent.
	c.Target = "parent-" + strings.NewReplacer(":", "-", ".", "-", "[", "", "]", "").Replace(strings.ToLower(u.Host))
	w, err := c.Targets.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.followConditions(ctx, w) })
	wg.Go(func() { cl.Run(ctx) })
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		}
	})
	go func() {
		wg.Wait()
		close(c.done)
	}()

	ns := acfg.Namespace
	if ns == "" {
		ns = "nestlet-system"
	}
	if err := c.apply(ctx, cfg, ns); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Child) apply(ctx context.Context, cfg Config, ns string) error {
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: "nestctl"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "nestlet-token-" + c.Target, Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"token": cfg.Parent.Token},
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: "nestctl"}); err != nil {
		return fmt.Errorf("creating token secret: %w", err)
	}
	t := &v1alpha1.Target{
		ObjectMeta: metav1.ObjectMeta{Name: c.Target, Finalizers: []string{api.FinalizerCleanup}},
		Spec: v1alpha1.TargetSpec{
			ParentURL:               cfg.Parent.URL,
			ClusterName:             cfg.Name,
			BootstrapTokenSecretRef: v1alpha1.SecretReference{Namespace: ns, Name: secret.Name},
			CACertHash:              cfg.Parent.CACertHash,
			ReportFrequency:         metav1.Duration{Duration: cfg.ReportFrequency},
			Labels:                  cfg.TargetLabels,
		},
	}
	c.Created = time.Now()
	if _, err := c.Targets.Create(ctx, t, metav1.CreateOptions{FieldManager: "nestctl"}); err != nil {
		return fmt.Errorf("creating target: %w", err)
	}
	return nil
}

// followConditions records when each condition of the Target is first
// seen with each status and reason, until ctx ends.
func (c *Child) followConditions(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			t, isTarget := ev.Object.(*v1alpha1.Target)
			if !isTarget || t.Name != c.Target {
				continue
			}
			now := time.Now()
			c.mu.Lock()
			for _, cond := range t.Status.Conditions {
				for _, key := range []string{cond.Type + "/" + string(cond.Status), cond.Type + "/" + cond.Reason} {
					if _, ok := c.seen[key]; !ok {
						c.seen[key] = now
					}
				}
			}
			c.mu.Unlock()
		}
	}
}

// FirstTrue returns when the Target's condition typ (Joined: the node
// identity is issued and stored; Ready: the virtual node runs and pods are
// forwarded) was first seen True, if it was.
func (c *Child) FirstTrue(typ string) (time.Time, bool) {
	return c.firstSeen(typ + "/" + string(metav1.ConditionTrue))
}

// FirstReason returns when the Target's condition typ was first seen with
// reason (for instance Joined with AwaitingApproval: the CSR is created),
// if it was.
func (c *Child) FirstReason(typ, reason string) (time.Time, bool) {
	return c.firstSeen(typ + "/" + reason)
}

func (c *Child) firstSeen(key string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[key]
	return t, ok
}

// WaitReady waits until the Target's Ready condition is True.
func (c *Child) WaitReady(ctx context.Context) error {
	lw := kubeclient.SingleObject(c.Target, c.Targets.List, c.Targets.Watch)
	_, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.Target{}, nil, func(ev watch.Event) (bool, error) {
		t, ok := ev.Object.(*v1alpha1.Target)
		return ok && meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionReady), nil
	})
	if err != nil {
		if t, gerr := c.Targets.Get(context.WithoutCancel(ctx), c.Target, metav1.GetOptions{}); gerr == nil {
			return fmt.Errorf("hollow %s: target %s not Ready: %w (conditions %+v)", c.Name, c.Target, err, t.Status.Conditions)
		}
		return fmt.Errorf("hollow %s: target %s not Ready: %w", c.Name, c.Target, err)
	}
	return nil
}

// Stop stops the agent and the simulation and waits for them. The virtual
// node stays in the parent (as when an agent is stopped), until it is
// deleted there. Stop may be called more than once.
func (c *Child) Stop() {
	c.cancel()
	<-c.done
}

// Err returns the error the agent ended with, if it ended on its own.
func (c *Child) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
