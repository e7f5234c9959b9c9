package forward

import (
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// lastApplied is kubectl's copy of what the user applied in the parent; it
// means nothing here.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// buildService returns the copy of the parent's Service src for this
// cluster: same namespace, name, labels and annotations, selector, ports,
// session affinity and traffic settings; a ClusterIP Service (headless
// stays headless; services.create asks for the parent's ClusterIP); marked with its
// origin and path, and owned by the Target (deleting the Target removes
// it).
func buildService(src *corev1.Service, c *Config, path []string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        src.Name,
			Namespace:   c.Namespaces.Name(src.Namespace),
			Labels:      maps.Clone(src.Labels),
			Annotations: maps.Clone(src.Annotations),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "nestlet.io/v1alpha1", Kind: "Target", Name: c.TargetName, UID: c.TargetUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			Selector:                 maps.Clone(src.Spec.Selector),
			SessionAffinity:          src.Spec.SessionAffinity,
			SessionAffinityConfig:    src.Spec.SessionAffinityConfig.DeepCopy(),
			PublishNotReadyAddresses: src.Spec.PublishNotReadyAddresses,
			InternalTrafficPolicy:    src.Spec.InternalTrafficPolicy,
			TrafficDistribution:      src.Spec.TrafficDistribution,
		},
	}
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	delete(svc.Annotations, lastApplied)
	svc.Labels[api.LabelTargetUID] = string(c.TargetUID)
	svc.Annotations[api.AnnotationOrigin] = c.ParentName + "/" + string(src.UID)
	svc.Annotations[api.AnnotationPath] = strings.Join(path, ",")
	if headless(src) {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if external(src) {
		// A DNS name here as in the parent: no selector, no address.
		svc.Spec.Type, svc.Spec.ExternalName, svc.Spec.Selector = corev1.ServiceTypeExternalName, src.Spec.ExternalName, nil
	}
	for _, port := range src.Spec.Ports {
		port.NodePort = 0 // the node ports stay with the parent's Service
		svc.Spec.Ports = append(svc.Spec.Ports, port)
	}
	return svc
}

func headless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }

func external(svc *corev1.Service) bool { return svc.Spec.Type == corev1.ServiceTypeExternalName }

// sameService tells whether the copy cur already is what want asks for, in
// every field Nestlet sets.
func sameService(cur, want *corev1.Service) bool {
	c, w := cur.Spec, want.Spec
	return maps.Equal(cur.Labels, want.Labels) && maps.Equal(cur.Annotations, want.Annotations) &&
		reflect.DeepEqual(cur.OwnerReferences, want.OwnerReferences) &&
		c.Type == w.Type && c.ExternalName == w.ExternalName && maps.Equal(c.Selector, w.Selector) && samePorts(c.Ports, w.Ports) &&
		c.SessionAffinity == w.SessionAffinity && sameAffinityConfig(c, w) &&
		c.PublishNotReadyAddresses == w.PublishNotReadyAddresses &&
		reflect.DeepEqual(c.InternalTrafficPolicy, w.InternalTrafficPolicy) &&
		reflect.DeepEqual(c.TrafficDistribution, w.TrafficDistribution)
}

// sameAffinityConfig compares session affinity configs, leaving out the
// timeout the API server fills in when the copy leaves it unset.
func sameAffinityConfig(c, w corev1.ServiceSpec) bool {
	if w.SessionAffinityConfig == nil {
		return true
	}
	return reflect.DeepEqual(c.SessionAffinityConfig, w.SessionAffinityConfig)
}

// samePorts compares ports as the copy sets them (the API server fills in
// the protocol and the target port).
func samePorts(cur, want []corev1.ServicePort) bool {
	if len(cur) != len(want) {
		return false
	}
	for i := range want {
		c, w := cur[i], want[i]
		if w.Protocol == "" {
			w.Protocol = corev1.ProtocolTCP
		}
		if w.TargetPort.IntVal == 0 && w.TargetPort.StrVal == "" {
			w.TargetPort = c.TargetPort
		}
		c.NodePort = 0
		if !reflect.DeepEqual(c, w) {
			return false
		}
	}
	return true
}
