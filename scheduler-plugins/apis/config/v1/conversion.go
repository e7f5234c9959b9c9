package v1

import (
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

// Convert_Pointer_v1_WatermarkMode_To_config_WatermarkMode converts an
// optional mode: unset is the empty mode.
func Convert_Pointer_v1_WatermarkMode_To_config_WatermarkMode(in **WatermarkMode, out *config.WatermarkMode, _ conversion.Scope) error {
	if *in == nil {
		*out = ""
		return nil
	}
	*out = config.WatermarkMode(**in)
	return nil
}

// Convert_config_WatermarkMode_To_Pointer_v1_WatermarkMode converts a mode
// to an optional one, always set.
func Convert_config_WatermarkMode_To_Pointer_v1_WatermarkMode(in *config.WatermarkMode, out **WatermarkMode, _ conversion.Scope) error {
	mode := WatermarkMode(*in)
	*out = &mode
	return nil
}
