package child

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// ownSecrets watches the Secrets of the agent's namespace: the bootstrap
// tokens the Targets name (nestctl join puts them there) and the node
// identities the agent keeps. One watch for the agent, so that a join, or
// a restart of a Target's run, reads neither from the API server. Until
// the watch has listed the namespace, or where it may not (an older RBAC
// without watch), every read goes to the API server as before.
type ownSecrets struct {
	namespace string
	informer  cache.SharedIndexInformer
	lister    corelisters.SecretNamespaceLister
}

func newOwnSecrets(client kubernetes.Interface, namespace string) *ownSecrets {
	inf := coreinformers.NewSecretInformer(client, namespace, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(kubeclient.StripManagedFields) // cannot fail before the informer runs
	return &ownSecrets{namespace: namespace, informer: inf, lister: corelisters.NewSecretLister(inf.GetIndexer()).Secrets(namespace)}
}

func (s *ownSecrets) run(ctx context.Context) { s.informer.RunWithContext(ctx) }

// get returns a copy of Secret namespace/name as last seen, nil when the
// watch has not listed the namespace yet, watches another namespace, or
// has not seen it (just created: the caller reads it).
func (s *ownSecrets) get(namespace, name string) *corev1.Secret {
	if s == nil || namespace != s.namespace || !s.informer.HasSynced() {
		return nil
	}
	sec, err := s.lister.Get(name)
	if err != nil {
		return nil
	}
	return sec.DeepCopy()
}
