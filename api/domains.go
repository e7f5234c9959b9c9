package api

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// Domains returns the topology domains AnnotationDomains of pod holds, nil
// when it has none or they do not parse.
func Domains(pod *corev1.Pod) map[string]string {
	raw := pod.Annotations[AnnotationDomains]
	if raw == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}

// FormatDomains is the value of AnnotationDomains for domains.
func FormatDomains(domains map[string]string) string {
	b, _ := json.Marshal(domains) // a map of strings always marshals
	return string(b)
}
