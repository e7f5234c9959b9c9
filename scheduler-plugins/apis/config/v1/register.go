package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

// SchemeGroupVersion is kube-scheduler's configuration group at v1, where
// the in-tree plugins' v1 args are registered too.
var SchemeGroupVersion = schema.GroupVersion{Group: config.GroupName, Version: "v1"}

var (
	// SchemeBuilder registers the v1 args types, their defaults and (from
	// zz_generated.conversion.go) their conversions to the internal types.
	SchemeBuilder      = runtime.NewSchemeBuilder()
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds the v1 args types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// The generated conversions register themselves; the generated
	// defaulters are registered here, as in kube-scheduler's own v1.
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}

// addKnownTypes registers the v1 args types, each under its plugin's name
// followed by "Args", the kind kube-scheduler decodes a pluginConfig
// entry's args as.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&WatermarkArgs{},
		&LoopGuardArgs{},
		&NamespacePolicyArgs{},
	)
	return nil
}
