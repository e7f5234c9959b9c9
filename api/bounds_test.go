package api

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestChildAnnotation(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"small": "x",
		"limit": strings.Repeat("x", MaxChildAnnotationBytes),
		"big":   strings.Repeat("x", MaxChildAnnotationBytes+1),
	}}}
	for key, want := range map[string]bool{"small": true, "limit": true, "big": false, "absent": false} {
		if _, ok := ChildAnnotation(n, key); ok != want {
			t.Errorf("%s: read %v, want %v", key, ok, want)
		}
	}
}
