package nestctl

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/charts/nestlet/crds"
)

// JoinOptions is what `nestctl join` writes into the child.
type JoinOptions struct {
	TargetName      string
	Namespace       string
	ParentURL       string
	Token           string
	CACertHash      string
	CAFile          string
	ClusterName     string
	Labels          map[string]string
	ReportFrequency time.Duration
	// CapacityPercent, when not 0, is spec.capacityPercent.
	CapacityPercent int32
	// WaitForRoom is spec.waitForRoom.
	WaitForRoom bool
	// NamespaceMapping, NamespacePrefix and AcceptNamespaces, when set,
	// are spec.namespaces; PodSecurity is spec.podSecurity.
	NamespaceMapping string
	NamespacePrefix  string
	AcceptNamespaces []string
	PodSecurity      string
	// Limits, when set, is spec.limits (resource name to quantity).
	Limits map[string]string
}

// Join installs the CRD if needed and writes the token Secret and Target.
func Join(ctx context.Context, cfg *rest.Config, o JoinOptions) (*v1alpha1.Target, error) {
	if o.ParentURL == "" || o.Token == "" || o.ClusterName == "" {
		return nil, fmt.Errorf("--parent-url, --token and --cluster-name are required")
	}
	if (o.CACertHash == "") == (o.CAFile == "") {
		return nil, fmt.Errorf("give exactly one of --ca-cert-hash and --ca-file")
	}
	if errs := append(validation.IsDNS1123Subdomain(o.ClusterName), validation.IsValidLabelValue(o.ClusterName)...); len(errs) > 0 {
		return nil, fmt.Errorf("--cluster-name %q (a DNS subdomain, and a label value: at most 63 characters): %s", o.ClusterName, strings.Join(errs, "; "))
	}
	if o.TargetName == "" {
		u, err := url.Parse(o.ParentURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--parent-url %q is not a URL", o.ParentURL)
		}
		o.TargetName = "parent-" + strings.NewReplacer(":", "-", ".", "-", "[", "", "]", "").Replace(strings.ToLower(u.Host))
	}
	var caBundle []byte
	if o.CAFile != "" {
		data, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, err
		}
		caBundle = data
	}
	if err := crds.Install(ctx, cfg); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "nestlet-token-" + o.TargetName, Namespace: o.Namespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"token": o.Token},
	}
	secrets := client.CoreV1().Secrets(o.Namespace)
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: "nestctl"}); apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: "nestctl"})
		if err != nil {
			return nil, fmt.Errorf("updating token secret: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating token secret: %w", err)
	}

	targets, err := v1alpha1.NewTargetClient(cfg)
	if err != nil {
		return nil, err
	}
	t := &v1alpha1.Target{
		// With the agent's finalizer already, so that the agent need not
		// write it (one request less per join).
		ObjectMeta: metav1.ObjectMeta{Name: o.TargetName, Finalizers: []string{api.FinalizerCleanup}},
		Spec: v1alpha1.TargetSpec{
			ParentURL:               o.ParentURL,
			ClusterName:             o.ClusterName,
			BootstrapTokenSecretRef: v1alpha1.SecretReference{Namespace: o.Namespace, Name: secret.Name},
			CACertHash:              o.CACertHash,
			CABundle:                caBundle,
			ReportFrequency:         metav1.Duration{Duration: o.ReportFrequency},
			Labels:                  o.Labels,
			WaitForRoom:             o.WaitForRoom,
		},
	}
	if t.Spec.Namespaces, t.Spec.PodSecurity, err = tenancy(o); err != nil {
		return nil, err
	}
	if t.Spec.Limits, err = limits(o.Limits); err != nil {
		return nil, err
	}
	if o.CapacityPercent != 0 {
		if o.CapacityPercent < 1 || o.CapacityPercent > 100 {
			return nil, fmt.Errorf("--capacity-percent must be between 1 and 100, got %d", o.CapacityPercent)
		}
		t.Spec.CapacityPercent = &o.CapacityPercent
	}
	existing, err := targets.Get(ctx, t.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return targets.Create(ctx, t, metav1.CreateOptions{FieldManager: "nestctl"})
	case err != nil:
		return nil, err
	default:
		existing.Spec = t.Spec
		return targets.Update(ctx, existing, metav1.UpdateOptions{FieldManager: "nestctl"})
	}
}

// tenancy returns spec.namespaces and spec.podSecurity of o's flags.
func tenancy(o JoinOptions) (*v1alpha1.NamespacePolicy, string, error) {
	var np *v1alpha1.NamespacePolicy
	if o.NamespaceMapping != "" || o.NamespacePrefix != "" || len(o.AcceptNamespaces) > 0 {
		switch v1alpha1.NamespaceMapping(o.NamespaceMapping) {
		case "", v1alpha1.NamespaceMappingSame, v1alpha1.NamespaceMappingPrefixed:
		default:
			return nil, "", fmt.Errorf("--namespace-mapping must be %s or %s, got %q", v1alpha1.NamespaceMappingSame, v1alpha1.NamespaceMappingPrefixed, o.NamespaceMapping)
		}
		if o.NamespacePrefix != "" && o.NamespaceMapping != string(v1alpha1.NamespaceMappingPrefixed) {
			return nil, "", fmt.Errorf("--namespace-prefix goes with --namespace-mapping=%s", v1alpha1.NamespaceMappingPrefixed)
		}
		np = &v1alpha1.NamespacePolicy{Mapping: v1alpha1.NamespaceMapping(o.NamespaceMapping), Prefix: o.NamespacePrefix, Accept: o.AcceptNamespaces}
	}
	switch o.PodSecurity {
	case "", v1alpha1.PodSecurityPrivileged, v1alpha1.PodSecurityBaseline, v1alpha1.PodSecurityRestricted:
		return np, o.PodSecurity, nil
	}
	return nil, "", fmt.Errorf("--pod-security must be privileged, baseline or restricted, got %q", o.PodSecurity)
}

// limits parses --limits (cpu=2,memory=4Gi,pods=20) into spec.limits.
func limits(flags map[string]string) (corev1.ResourceList, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for name, v := range flags {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("--limits %s=%s: %w", name, v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("--limits %s=%s: a limit is not negative", name, v)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}
