// Package kubeclient holds small helpers around client-go shared by the
// agent's packages.
package kubeclient

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// SingleObject returns a ListWatch of the one object called name, made of
// a typed client's List and Watch. It is how a node identity follows the
// objects it may see one by one (the Node authorizer allows list and watch
// with a metadata.name field selector), and how a bootstrap client follows
// its own CSR.
func SingleObject[L runtime.Object](name string,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) *cache.ListWatch {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
}

// StripManagedFields is an informer transform that drops managedFields,
// which the agent never reads: caches of pods and nodes take less memory,
// and comparisons of whole objects less time. Updates built from such an
// object leave the server's managedFields as they are (the field is
// omitted, not emptied).
func StripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// RESTConfig loads a client config as kubectl does: the kubeconfig at path
// when given, else $KUBECONFIG or ~/.kube/config, else the in-cluster
// config; context names a context other than the current one (optional).
func RESTConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// ControllerLimits sets the client-side rate limits of Nestlet's
// long-running processes (the agent, nestlet-proxy) on cfg, and returns
// it: 500 requests a second in bursts of 1,000. client-go's default of 5
// a second (burst 10) queued each child's join behind the previous ones
// when several joined in a row (the proxy writes the node ports record
// before a node registers, and checks callers' rights); the API server's
// priority and fairness is what guards it.
func ControllerLimits(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}
