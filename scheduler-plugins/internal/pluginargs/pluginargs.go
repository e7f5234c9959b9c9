// Package pluginargs turns what kube-scheduler passes to a Nestlet plugin's
// New into the plugin's internal arguments (apis/config), defaulted as the
// v1 types say, and renders their validation errors.
package pluginargs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	configv1 "github.com/nestlet/nestlet/scheduler-plugins/apis/config/v1"
)

// scheme knows the args, internal and v1, and nothing else: it is the
// plugins' own, so that using them registers nothing in kube-scheduler's
// scheme (package apis/config/scheme does that).
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}

// Decode fills out, a new internal args object (&config.WatermarkArgs{}),
// from obj as New receives it:
//   - the internal args of out's type: kube-scheduler decoded the
//     pluginConfig through apis/config/scheme, or a profile built in Go
//     passes them;
//   - the v1 args of out's kind, from a profile built in Go;
//   - *runtime.Unknown, the raw JSON or YAML args, when kube-scheduler's
//     scheme does not know the args;
//   - nil, or a nil pointer: no pluginConfig.
//
// The v1 defaults apply in every case (to typed args again, which changes
// nothing when the scheme has defaulted them), to a copy: out shares
// nothing with obj.
func Decode(obj runtime.Object, out runtime.Object) error {
	gvks, _, err := scheme.ObjectKinds(out)
	if err != nil {
		return err
	}
	v1Args, err := versioned(obj, gvks[0].Kind)
	if err != nil {
		return err
	}
	scheme.Default(v1Args)
	return scheme.Convert(v1Args, out, nil)
}

// versioned returns a copy of obj as v1 args of kind.
func versioned(obj runtime.Object, kind string) (runtime.Object, error) {
	gvk := configv1.SchemeGroupVersion.WithKind(kind)
	if obj == nil || isNilPointer(obj) {
		return scheme.New(gvk)
	}
	if u, ok := obj.(*runtime.Unknown); ok {
		out, err := scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		return out, frameworkruntime.DecodeInto(u, out)
	}
	if gvks, _, err := scheme.ObjectKinds(obj); err != nil || gvks[0].Kind != kind {
		return nil, fmt.Errorf("want args of type %s, got %T", kind, obj)
	}
	// A deep copy, converted when obj is internal.
	return scheme.ConvertToVersion(obj, configv1.SchemeGroupVersion)
}

func isNilPointer(obj runtime.Object) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// ValidationError returns nil when errs is empty, else one error that reads
// "<field> <detail>, got <value>" for each, joined by "; ".
func ValidationError(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		format := "%s %s, got %v"
		if reflect.ValueOf(e.BadValue).Kind() == reflect.String {
			format = "%s %s, got %q"
		}
		msgs[i] = fmt.Sprintf(format, e.Field, e.Detail, e.BadValue)
	}
	return errors.New(strings.Join(msgs, "; "))
}
