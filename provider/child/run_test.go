package child

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

func TestReportFrequency(t *testing.T) {
	tests := []struct {
		name string
		spec metav1.Duration
		want time.Duration
	}{
		{name: "default", want: 10 * time.Second},
		{name: "set", spec: metav1.Duration{Duration: 3 * time.Second}, want: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportFrequency(&v1alpha1.Target{Spec: v1alpha1.TargetSpec{ReportFrequency: tt.spec}})
			assert.Equal(t, tt.want, got)
		})
	}
}
