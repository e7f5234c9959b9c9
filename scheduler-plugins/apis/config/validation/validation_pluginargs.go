// Package validation checks the Nestlet scheduler plugins' arguments, in
// their internal types, once defaulted. The plugins' New runs it; errors
// name the field under the path given (nil for the args themselves).
package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

// ValidateWatermarkArgs checks that every high watermark is in (0, 1] and
// that the mode is spread or pack.
func ValidateWatermarkArgs(path *field.Path, args *config.WatermarkArgs) field.ErrorList {
	var errs field.ErrorList
	wmPath := path.Child("highWatermark")
	resources := make([]corev1.ResourceName, 0, len(args.HighWatermark))
	for r := range args.HighWatermark {
		resources = append(resources, r)
	}
	slices.Sort(resources)
	for _, r := range resources {
		// Written so that NaN fails too.
		if f := args.HighWatermark[r]; !(f > 0 && f <= 1) {
			errs = append(errs, field.Invalid(wmPath.Key(string(r)), f, "must be in (0, 1]"))
		}
	}
	if args.Mode != config.WatermarkSpread && args.Mode != config.WatermarkPack {
		errs = append(errs, field.Invalid(path.Child("mode"), args.Mode,
			fmt.Sprintf("must be %q or %q", config.WatermarkSpread, config.WatermarkPack)))
	}
	return errs
}

// ValidateLoopGuardArgs checks that the hop limit is at least 1.
func ValidateLoopGuardArgs(path *field.Path, args *config.LoopGuardArgs) field.ErrorList {
	var errs field.ErrorList
	if args.HopLimit < 1 {
		errs = append(errs, field.Invalid(path.Child("hopLimit"), args.HopLimit, "must be at least 1"))
	}
	return errs
}

// ValidateNamespacePolicyArgs checks that the default policy is "",
// "none" or a label selector.
func ValidateNamespacePolicyArgs(path *field.Path, args *config.NamespacePolicyArgs) field.ErrorList {
	var errs field.ErrorList
	if d := args.DefaultClusters; d != "" && d != api.NamespaceClustersNone {
		if _, err := labels.Parse(d); err != nil {
			errs = append(errs, field.Invalid(path.Child("defaultClusters"), d, fmt.Sprintf(`must be "", %q or a label selector: %v`, api.NamespaceClustersNone, err)))
		}
	}
	return errs
}
