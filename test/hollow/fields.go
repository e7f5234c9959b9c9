package hollow

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// selectors are the label and field selectors of a list or watch.
type selectors struct {
	label labels.Selector
	field fields.Selector
}

// supportedFields are the field labels the API server accepts in field
// selectors, by resource (every resource has metadata.name and
// metadata.namespace).
var supportedFields = map[string][]string{
	"pods":       {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
	"nodes":      {"spec.unschedulable"},
	"secrets":    {"type"},
	"events":     {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
	"namespaces": {"status.phase"},
}

// parseSelectors parses label and field selectors; a field the API server
// does not support for gvr is a BadRequest, as there.
func parseSelectors(gvr schema.GroupVersionResource, label, field string) (selectors, error) {
	s := selectors{label: labels.Everything(), field: fields.Everything()}
	var err error
	if label != "" {
		if s.label, err = labels.Parse(label); err != nil {
			return s, apierrors.NewBadRequest(fmt.Sprintf("invalid label selector %q: %v", label, err))
		}
	}
	if field != "" {
		if s.field, err = fields.ParseSelector(field); err != nil {
			return s, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %q: %v", field, err))
		}
		for _, r := range s.field.Requirements() {
			if !supportedField(gvr.Resource, r.Field) {
				return s, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
	}
	return s, nil
}

func supportedField(resource, f string) bool {
	if f == "metadata.name" || f == "metadata.namespace" {
		return true
	}
	for _, s := range supportedFields[resource] {
		if s == f {
			return true
		}
	}
	return false
}

func (s selectors) matches(obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	m, err := metaOf(obj)
	if err != nil {
		return false
	}
	if !s.label.Empty() && !s.label.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return s.field.Empty() || s.field.Matches(fieldsOf(obj, m))
}

// fieldsOf returns the field labels of obj.
func fieldsOf(obj runtime.Object, m metav1.Object) fields.Set {
	set := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
	switch o := obj.(type) {
	case *corev1.Pod:
		set["spec.nodeName"] = o.Spec.NodeName
		set["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		set["spec.schedulerName"] = o.Spec.SchedulerName
		set["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		set["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		set["status.phase"] = string(o.Status.Phase)
		set["status.podIP"] = o.Status.PodIP
		set["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		set["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Secret:
		set["type"] = string(o.Type)
	case *corev1.Namespace:
		set["status.phase"] = string(o.Status.Phase)
	case *corev1.Event:
		set["involvedObject.kind"] = o.InvolvedObject.Kind
		set["involvedObject.namespace"] = o.InvolvedObject.Namespace
		set["involvedObject.name"] = o.InvolvedObject.Name
		set["involvedObject.uid"] = string(o.InvolvedObject.UID)
		set["involvedObject.apiVersion"] = o.InvolvedObject.APIVersion
		set["involvedObject.resourceVersion"] = o.InvolvedObject.ResourceVersion
		set["involvedObject.fieldPath"] = o.InvolvedObject.FieldPath
		set["reason"] = o.Reason
		set["reportingComponent"] = o.ReportingController
		set["source"] = o.Source.Component
		set["type"] = o.Type
	}
	return set
}

func metaOf(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }
