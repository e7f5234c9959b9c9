package forward

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// A pod's API identity is the parent's (Config.OriginAPI): a pod made in
// the parent talks to the parent's API server, with a token the parent
// issued for the pod's service account and bound to the pod, as its
// kubelet would have mounted there. The delegate gets, in place of each
// projected service account token, the same file from a Secret the agent
// keeps here (and in place of kube-root-ca.crt, the parent's CA), and the
// parent's address in KUBERNETES_SERVICE_HOST and _PORT (its gateway's
// relay through the tunnels where it offers one: OriginAPI.Relay). Levels
// below copy that Secret as any other a pod uses, so a pod keeps the
// identity of the cluster it was made in however deep it runs. The tokens are requested
// again before half their life has passed (the kubelet does at 80%; the
// copies below and the kubelet's refresh of Secret volumes take time).

// OriginAPI is where the pods of the parent reach its API server.
type OriginAPI struct {
	// URL of the parent's API server as pods reach it (https://host:port).
	URL string
	// CA is the parent API server's CA bundle (PEM).
	CA []byte
	// Relay, when set, returns where pods reach the parent's API server
	// through the gateways' tunnels (ip:port, api.GatewayParent.APIAddress),
	// "" while the parent offers none: pods made then call URL. Its second
	// value is false while the parent has not yet said whether it offers
	// one: the pods that would get an identity wait (an error, retried).
	Relay func() (string, bool)
	// RelayOnly gives pods the parent's identity only where the parent
	// offers a relay: while Relay returns "", they get this cluster's, as
	// a kubelet would mount it (the agent's --pod-api=auto).
	RelayOnly bool
}

// withParentIdentity tells whether the delegate of pod gets the parent's
// API identity (withIdentity): the pod has service account tokens, and
// the parent's API is where its pods call (OriginAPI). errRelayUnknown
// while the parent has not yet said whether it relays it.
func (p *Provider) withParentIdentity(pod *corev1.Pod) (bool, error) {
	origin := p.cfg.OriginAPI
	if origin == nil || len(tokenSources(pod)) == 0 {
		return false, nil
	}
	if origin.Relay == nil {
		return true, nil
	}
	relay, known := origin.Relay()
	if !known {
		return false, errRelayUnknown
	}
	return relay != "" || !origin.RelayOnly, nil
}

// errRelayUnknown: the parent has not yet said whether it offers a relay
// (OriginAPI.Relay). Transient: the write is retried here, and the parent
// pod, told nothing, stays as it is (a Never pod is not failed for it).
var errRelayUnknown = errors.New("the parent's relay is not known yet")

// errParentLags marks a token request the parent refused because it has
// not yet seen the pod as this agent does: kube-apiserver's node
// restriction admission reads the pod (by name, then its UID and node)
// from the API server's own informer, which trails the watch that told
// this agent of the pod's binding by a moment. The pod is bound here with
// that UID (the agent acts on no other), so it passes by itself; a pod
// deleted or recreated meanwhile is dropped by the retry (retryNow).
// Returned to virtual-kubelet, it would fail a pod of restartPolicy Never.
var errParentLags = errors.New("the parent's API server has not yet seen the pod bound here")

// parentLags reports whether err is the node restriction admission
// refusing a token for a pod its informer does not hold yet, or holds
// unbound or as an earlier pod of the same name.
func parentLags(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	if apierrors.IsNotFound(err) {
		return s.Details != nil && (s.Details.Kind == "pod" || s.Details.Kind == "pods")
	}
	return apierrors.IsForbidden(err) && (strings.Contains(s.Message, "bound to a pod scheduled on a different node") ||
		strings.Contains(s.Message, "does not match the UID in record"))
}

// apiServerNames are the names in-cluster clients know an API server by,
// which its serving certificate holds (kube-apiserver's own and
// kubeadm's do): a delegate resolves them to the parent's relay.
var apiServerNames = []string{"kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "kubernetes.default", "kubernetes"}

// Keys of the identity Secret.
const (
	identityCAKey      = "ca.crt"
	identityTokenKey   = "token-%d" // one per projected token, in order
	identityRefreshDue = 0.5        // of a token's life
	// identityScan is how often the tokens are checked for refresh.
	identityScan = 20 * time.Second
)

// tokenSource is a projected service account token of a pod.
type tokenSource struct {
	audience string
	seconds  int64
}

// tokenSources returns the projected service account tokens of the pod, in
// the order of its volumes and their sources.
func tokenSources(pod *corev1.Pod) []tokenSource {
	var out []tokenSource
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if t := s.ServiceAccountToken; t != nil {
				out = append(out, tokenSource{audience: t.Audience, seconds: ptr.Deref(t.ExpirationSeconds, 3600)})
			}
		}
	}
	return out
}

// identitySecretName is the name of the Secret holding a parent pod's
// tokens here: stable for the pod, unique to it.
func identitySecretName(pod *corev1.Pod) string {
	sum := sha256.Sum256([]byte(pod.UID))
	return "nestlet-identity-" + hex.EncodeToString(sum[:])[:16]
}

// withIdentity changes the delegate d of pod to read its tokens and CA
// from the identity Secret and to call the parent's API server.
func withIdentity(d, pod *corev1.Pod, origin *OriginAPI) error {
	u, err := url.Parse(origin.URL)
	if err != nil {
		return fmt.Errorf("the parent's API server URL %q: %w", origin.URL, err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	if alias, relayPort, ok := relayAlias(host, origin); ok {
		d.Spec.HostAliases = append(d.Spec.HostAliases, alias)
		host, port = alias.Hostnames[0], relayPort
	}
	name := identitySecretName(pod)
	i := 0
	for _, v := range d.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, s := range v.Projected.Sources {
			switch {
			case s.ServiceAccountToken != nil:
				v.Projected.Sources[j] = corev1.VolumeProjection{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: name},
					Items:                []corev1.KeyToPath{{Key: fmt.Sprintf(identityTokenKey, i), Path: s.ServiceAccountToken.Path}},
				}}
				i++
			case s.ConfigMap != nil && s.ConfigMap.Name == "kube-root-ca.crt":
				items := make([]corev1.KeyToPath, 0, len(s.ConfigMap.Items))
				for _, it := range s.ConfigMap.Items {
					items = append(items, corev1.KeyToPath{Key: identityCAKey, Path: it.Path, Mode: it.Mode})
				}
				if len(items) == 0 {
					items = []corev1.KeyToPath{{Key: identityCAKey, Path: identityCAKey}}
				}
				v.Projected.Sources[j] = corev1.VolumeProjection{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items,
				}}
			}
		}
	}
	env := []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: host}, {Name: "KUBERNETES_SERVICE_PORT", Value: port},
		{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: port}}
	for _, cs := range [][]corev1.Container{d.Spec.InitContainers, d.Spec.Containers} {
		for k := range cs {
			cs[k].Env = withEnv(cs[k].Env, env)
		}
	}
	d.Annotations[api.AnnotationIdentity] = name
	return nil
}

// relayAlias is the host alias that sends the delegate's calls to the
// parent's API server to its relay, when the parent offers one: its names
// (host first, when the URL names it: its certificate holds that name;
// else kubernetes.default.svc) resolve to the relay's address. The server
// name the client checks stays one the certificate holds, and the pod's
// clients that resolve kubernetes.default.svc themselves reach the
// parent too, as its token expects.
func relayAlias(host string, origin *OriginAPI) (alias corev1.HostAlias, port string, ok bool) {
	if origin.Relay == nil {
		return corev1.HostAlias{}, "", false
	}
	addr, _ := origin.Relay()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return corev1.HostAlias{}, "", false
	}
	names := slices.Clone(apiServerNames)
	if _, err := netip.ParseAddr(host); err != nil && host != "" && !slices.Contains(names, host) {
		names = append([]string{host}, names...)
	}
	return corev1.HostAlias{IP: ap.Addr().String(), Hostnames: names}, strconv.Itoa(int(ap.Port())), true
}

// withEnv adds to env the variables it does not set itself.
func withEnv(env, add []corev1.EnvVar) []corev1.EnvVar {
	set := map[string]bool{}
	for _, e := range env {
		set[e.Name] = true
	}
	for _, e := range add {
		if !set[e.Name] {
			env = append(env, e)
		}
	}
	return env
}

// identities keeps the tokens of the parent pods whose delegates have an
// identity Secret here, and when each is due again.
type identities struct {
	p   *Provider
	mu  sync.Mutex
	due map[types.UID]time.Time
}

// issue requests the pod's tokens from the parent and writes them, with
// the parent's CA, to the identity Secret, owned by the delegate (owner
// may be empty before the delegate exists: the Secret is then owned by
// the Target until the next refresh).
func (ids *identities) issue(ctx context.Context, pod *corev1.Pod, owner *corev1.Pod) error {
	p := ids.p
	sources := tokenSources(pod)
	data := map[string][]byte{identityCAKey: p.cfg.OriginAPI.CA}
	var earliest time.Time
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	for i, s := range sources {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(s.seconds),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if s.audience != "" {
			req.Spec.Audiences = []string{s.audience}
		}
		tr, err := p.cfg.Parent.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if parentLags(err) {
			err = fmt.Errorf("%w: %w", errParentLags, err)
		}
		if err != nil {
			return fmt.Errorf("requesting a token of service account %s/%s for pod %s from %s: %w", pod.Namespace, sa, pod.Name, p.cfg.ParentName, err)
		}
		data[fmt.Sprintf(identityTokenKey, i)] = []byte(tr.Status.Token)
		issued := p.cfg.Clock.Now()
		refresh := issued.Add(time.Duration(float64(tr.Status.ExpirationTimestamp.Sub(issued)) * identityRefreshDue))
		if earliest.IsZero() || refresh.Before(earliest) {
			earliest = refresh
		}
	}
	if err := ids.write(ctx, pod, owner, data); err != nil {
		return err
	}
	ids.mu.Lock()
	ids.due[pod.UID] = earliest
	ids.mu.Unlock()
	return nil
}

// own makes the delegate the owner of the identity Secret made before it,
// so that the Secret goes with it.
func (ids *identities) own(ctx context.Context, pod, d *corev1.Pod) error {
	owners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: d.Name, UID: d.UID, BlockOwnerDeletion: ptr.To(false)}}
	deps := ids.p.deps
	_, err := deps.patch(ctx, identityKey(pod), []jsonOp{deps.testOurs(), {Op: "add", Path: "/metadata/ownerReferences", Value: owners}})
	return err
}

// identityIssuedHere reports whether this level issues the tokens of
// parent pod for its delegate d. A level below the one that issued the
// identity sees the annotation copied down with the rest of the delegate,
// naming the Secret of the level above (copied down too); its parent pod
// has no token of its own to request.
func identityIssuedHere(d, parent *corev1.Pod) bool {
	return d.Annotations[api.AnnotationIdentity] == identitySecretName(parent) && len(tokenSources(parent)) > 0
}

// identityKey is the identity Secret of pod, as the copies name objects.
func identityKey(pod *corev1.Pod) depKey {
	return depKey{kindSecret, pod.Namespace, identitySecretName(pod)}
}

// write creates the identity Secret, or patches its data.
func (ids *identities) write(ctx context.Context, pod, owner *corev1.Pod, data map[string][]byte) error {
	p := ids.p
	meta := metav1.ObjectMeta{
		Name: identitySecretName(pod), Namespace: p.ns(pod.Namespace),
		Labels:      map[string]string{api.LabelTargetUID: string(p.cfg.TargetUID)},
		Annotations: map[string]string{api.AnnotationIdentityOf: p.cfg.ParentName + "/" + string(pod.UID)},
	}
	owners := []metav1.OwnerReference{targetOwner(&p.cfg)}
	if owner != nil {
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(false)}}
	}
	meta.OwnerReferences = owners
	ops := []jsonOp{p.deps.testOurs(), {Op: "add", Path: "/data", Value: data}, {Op: "add", Path: "/metadata/ownerReferences", Value: owners}}
	// A refresh (written before by this process) patches, one request;
	// else created, and patched if it exists and is ours (the label test),
	// as copies are.
	ids.mu.Lock()
	_, written := ids.due[pod.UID]
	ids.mu.Unlock()
	var err error
	if written {
		if _, err = p.deps.patch(ctx, identityKey(pod), ops); !apierrors.IsNotFound(err) {
			return ids.explain(err, pod, meta.Name)
		}
	}
	err = p.deps.create(ctx, &corev1.Secret{ObjectMeta: meta, Data: data})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = p.deps.patch(ctx, identityKey(pod), ops)
	return ids.explain(err, pod, meta.Name)
}

// explain says what is wrong when the identity Secret's name is taken by
// a Secret that is not Nestlet's.
func (ids *identities) explain(err error, pod *corev1.Pod, name string) error {
	if notOurs(err) {
		return fmt.Errorf("secret %s/%s exists and is not Nestlet's identity Secret of pod %s: delete or rename it", ids.p.ns(pod.Namespace), name, pod.Name)
	}
	return err
}

// run refreshes the tokens that are due, every identityScan, for as long
// as ctx lasts. After a restart nothing is known: every delegate with an
// identity gets fresh tokens at the first scan.
func (ids *identities) run(ctx context.Context) {
	for {
		ids.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ids.p.cfg.Clock.After(identityScan):
		}
	}
}

func (ids *identities) refresh(ctx context.Context) {
	p := ids.p
	now := p.cfg.Clock.Now()
	delegates, _ := p.lister.List(labels.Everything())
	for _, d := range delegates {
		if d.Annotations[api.AnnotationIdentity] == "" || d.DeletionTimestamp != nil {
			continue
		}
		ns, name, ok := parentKey(d)
		if !ok {
			continue
		}
		parent, err := p.cfg.ParentPods.Pods(ns).Get(name)
		if err != nil || parent.UID != originUID(d) || parent.DeletionTimestamp != nil {
			continue
		}
		if !identityIssuedHere(d, parent) {
			continue
		}
		ids.mu.Lock()
		due, known := ids.due[parent.UID]
		ids.mu.Unlock()
		if known && now.Before(due) {
			continue
		}
		if err := ids.issue(ctx, parent, d); err != nil {
			klog.FromContext(ctx).Info("Refreshing a pod's tokens failed; tried again shortly", "pod", klog.KObj(parent), "err", err)
		}
	}
	ids.mu.Lock()
	for uid, due := range ids.due {
		if now.Sub(due) > time.Hour { // its pod is long gone
			delete(ids.due, uid)
		}
	}
	ids.mu.Unlock()
}
