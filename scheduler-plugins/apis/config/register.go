package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// GroupName is kube-scheduler's configuration group.
const GroupName = schedconfig.GroupName

// SchemeGroupVersion is the internal version of the group, where the
// in-tree plugins' internal args are registered too.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

var (
	// SchemeBuilder registers the internal args types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal args types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the internal args types, each under its plugin's
// name followed by "Args", the kind kube-scheduler looks up for a
// pluginConfig entry.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&WatermarkArgs{},
		&LoopGuardArgs{},
		&NamespacePolicyArgs{},
	)
	return nil
}
