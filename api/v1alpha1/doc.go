// Package v1alpha1 is the nestlet.io/v1alpha1 API: the Target a child
// cluster applies to join a parent.
//
// +kubebuilder:object:generate=true
// +groupName=nestlet.io
package v1alpha1
