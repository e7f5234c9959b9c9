// Package v1 is the v1 version of the Nestlet scheduler plugins' arguments,
// as written in the pluginConfig of a KubeSchedulerConfiguration
// (kubescheduler.config.k8s.io/v1): optional fields are pointers, so that
// the SetDefaults_* functions can tell them unset, and the generated
// conversions turn them into the internal types of package config.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/nestlet/nestlet/scheduler-plugins/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1
