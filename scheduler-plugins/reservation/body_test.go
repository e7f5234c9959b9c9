package reservation

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/nestlet/nestlet/api"
)

// The pod a reservation carries goes as protobuf to an agent that reads it
// (api.AnnotationReserveEncodings), as JSON to one that does not, and the
// agent reads the same pod either way (pkg/kubeletapi's
// TestReserveReadsJSONAndProtobuf reads both): without managed fields or
// the node the scheduler assumed.
func TestReservationBodyAsTheAgentReads(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "u1", Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{NodeName: "east", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	want := pod.DeepCopy()
	want.ManagedFields, want.Spec.NodeName = nil, ""
	for _, tc := range []struct {
		encodings, contentType string
	}{
		{"", runtime.ContentTypeJSON},
		{api.EncodingProtobuf, runtime.ContentTypeProtobuf},
		{"cbor," + api.EncodingProtobuf, runtime.ContentTypeProtobuf},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: map[string]string{}}}
		if tc.encodings != "" {
			node.Annotations[api.AnnotationReserveEncodings] = tc.encodings
		}
		contentType, body, err := reservationBody(pod, node)
		require.NoError(t, err)
		require.Equal(t, tc.contentType, contentType)
		got := &corev1.Pod{}
		if contentType == runtime.ContentTypeProtobuf {
			_, _, err = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(body, nil, got)
		} else {
			err = json.Unmarshal(body, got)
		}
		require.NoError(t, err)
		got.TypeMeta = want.TypeMeta
		require.Equal(t, want, got)
	}
	require.Equal(t, "east", pod.Spec.NodeName, "the scheduler's copy is left as it was")
}
