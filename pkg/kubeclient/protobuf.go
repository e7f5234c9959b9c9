package kubeclient

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Protobuf returns a copy of cfg for a client of the built-in types (a
// kubernetes.Clientset) that speaks protobuf with the API server, as
// Kubernetes' own components do (the kubelet, kube-scheduler,
// kube-controller-manager): decoding the pods and nodes an agent watches
// and writes costs it, and the API server, several times less than JSON,
// and the API server encodes each watch event once for every such client.
// Patches keep their own JSON types; answers the server has only in JSON
// (a custom resource, a Status) are still accepted. Not for the clients of
// custom resources (Targets), which take no protobuf bodies.
func Protobuf(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = runtime.ContentTypeProtobuf
	out.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return out
}
