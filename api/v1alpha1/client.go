package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	if err := AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// TargetInterface is a typed client for Targets.
type TargetInterface = *gentype.ClientWithList[*Target, *TargetList]

// NewTargetClient returns a typed client for Targets, built on client-go's
// generic client as generated clientsets are.
func NewTargetClient(cfg *rest.Config) (TargetInterface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = codecs.WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return gentype.NewClientWithList[*Target, *TargetList](
		"targets", rc, parameterCodec, "",
		func() *Target { return &Target{} },
		func() *TargetList { return &TargetList{} },
	), nil
}
