// Package scheme registers the Nestlet scheduler plugins' arguments,
// internal and v1, into kube-scheduler's configuration scheme, so that
// kube-scheduler decodes, defaults and converts the args of a
// KubeSchedulerConfiguration's pluginConfig into the internal types of
// apis/config, as it does the in-tree plugins' args. A binary registers them
// by importing this package:
//
//	import _ "github.com/nestlet/nestlet/scheduler-plugins/apis/config/scheme"
//
// Without it, the plugins receive their args raw (runtime.Unknown) and
// decode and default them themselves, the same way.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	kubeschedulerv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	configv1 "github.com/nestlet/nestlet/scheduler-plugins/apis/config/v1"
)

// Scheme is kube-scheduler's configuration scheme, which kube-scheduler
// decodes its --config file with.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	AddToScheme(Scheme)
	// kube-scheduler defaults plugin args, and converts them to their
	// internal types, with a scheme of its own.
	AddToScheme(kubeschedulerv1.GetPluginArgConversionScheme())
}

// AddToScheme adds the args types, their defaults and their conversions to
// scheme.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}
