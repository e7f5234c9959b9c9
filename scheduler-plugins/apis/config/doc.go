// Package config holds the internal types of the Nestlet scheduler plugins'
// arguments, in the kube-scheduler's configuration group
// (kubescheduler.config.k8s.io) as the in-tree plugins' are. The plugins
// read these types; a KubeSchedulerConfiguration file is written in the v1
// types of package v1, which default and convert to these. Package
// validation checks them and package scheme registers both versions into
// kube-scheduler's configuration scheme.
//
// +k8s:deepcopy-gen=package
// +groupName=kubescheduler.config.k8s.io
package config
