package kubeclient

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ConfigMapInformer follows the one ConfigMap namespace/name (listed and
// watched by name, so that a Role naming it is enough): set gets its data
// when it appears and at each change, nil when it is deleted.
func ConfigMapInformer(client kubernetes.Interface, namespace, name string, set func(data map[string]string)) cache.SharedIndexInformer {
	inf := coreinformers.NewFilteredConfigMapInformer(client, namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	update := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == name {
			set(cm.Data)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: func(any) { set(nil) },
	})
	return inf
}
