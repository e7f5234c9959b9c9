package api

// GatewayParent is what a parent's agent tells each child on its virtual
// node (AnnotationGatewayParent) about the parent's gateway: the key and
// the address the child's gateway opens its tunnel to, and the pod CIDRs
// the parent carries (its own nodes', its other children's, and those its
// own parents route to it). The child routes those of them outside its
// own subtree through the tunnel.
type GatewayParent struct {
	// PublicKey is the parent gateway's WireGuard public key (base64).
	PublicKey string `json:"publicKey"`
	// Endpoint is host:port (UDP) where children reach it; empty when the
	// parent's agent was given none (the children cannot open tunnels).
	Endpoint string `json:"endpoint,omitempty"`
	// Routes are pod CIDRs reachable through the parent.
	Routes []string `json:"routes,omitempty"`
}
