package api

import "time"

// GatewayParent is what a parent's agent tells each child on its virtual
// node (AnnotationGatewayParent) about the parent's gateway: the key and
// the address the child's gateway dials as its peer, and the pod CIDRs
// the parent carries (its own nodes', its other children's, and those its
// own parents route to it). The child routes those of them outside its
// own subtree to that peer.
type GatewayParent struct {
	// PublicKey is the parent gateway's WireGuard public key (base64).
	PublicKey string `json:"publicKey"`
	// Endpoint is host:port (UDP) where children reach it; empty when the
	// parent's agent was given none (the children cannot dial it).
	Endpoint string `json:"endpoint,omitempty"`
	// Routes are pod CIDRs reachable through the parent.
	Routes []string `json:"routes,omitempty"`
	// PeerKey is the child's gateway key the parent's gateway knows it by
	// (empty while the child is no peer there, e.g. its pod CIDRs overlap
	// another's). A child that rotated its key dials its parent again at
	// once when it reads its new key here.
	PeerKey string `json:"peerKey,omitempty"`
	// APIAddress is ip:port where pods anywhere below reach the parent's
	// API server through the peers (the parent's gateway relays it; one
	// of Routes holds the address); empty when the parent offers none.
	// Pods made in the parent call it there (--pod-api=origin).
	APIAddress string `json:"apiAddress,omitempty"`
	// Directory lists the gateways of clusters outside the child's
	// subtree that it may reach directly, without climbing the tree (a
	// direct path: provider/peers/direct.go): the parent's other
	// children's subtrees and what its own parents listed for it, each
	// with no more routes than the tree already sends that way.
	Directory []GatewayEntry `json:"directory,omitempty"`
}

// GatewayEntry is one cluster's gateway in a directory of direct paths:
// a parent's list for a child (GatewayParent.Directory), or a child's
// list of its subtree for a parent (AnnotationGatewaySubtree).
type GatewayEntry struct {
	// Cluster is the cluster's name (its virtual node's in its parent).
	Cluster string `json:"cluster"`
	// PublicKey is its gateway's WireGuard key (base64).
	PublicKey string `json:"publicKey"`
	// Endpoint is ip:port (UDP) where its parent's gateway sees its
	// packets come from: its NAT's mapping, which a direct peer dials.
	Endpoint string `json:"endpoint"`
	// Routes are its own nodes' pod CIDRs (not its subtree's), as far as
	// its parent grants them.
	Routes []string `json:"routes"`
}

// DirectPath is what a cluster tells its parents of one of its direct
// paths (AnnotationGatewayPaths), for `nestctl tree`.
type DirectPath struct {
	// Cluster is the other end.
	Cluster string `json:"cluster"`
	// State is DirectUp, DirectTrying or DirectFailed.
	State string `json:"state"`
	// Endpoint is where this cluster dials it.
	Endpoint string `json:"endpoint,omitempty"`
	// Reason says why the traffic goes through the tree, when it does.
	Reason string `json:"reason,omitempty"`
	// Since is when State began.
	Since time.Time `json:"since"`
	// RTTMicroseconds is the round trip on the direct path, timed at the
	// handshake that brought it up (the agent's metrics have it live);
	// absent when unknown.
	RTTMicroseconds int64 `json:"rttMicroseconds,omitempty"`
}

// The states of a DirectPath.
const (
	// DirectUp: the traffic between the two clusters takes the direct
	// path.
	DirectUp = "direct"
	// DirectTrying: both ends dial each other; the traffic goes through
	// the tree meanwhile.
	DirectTrying = "trying"
	// DirectFailed: no handshake came through (a NAT that maps each
	// destination to another port, a firewall); the traffic goes through
	// the tree, and the ends keep trying, slowly.
	DirectFailed = "failed"
)

// PeerStats is what a child tells its parent of the peer link between
// their gateways (AnnotationGatewayTunnelStats), as its gateway counts
// it: written with each change of the link's state and, while traffic
// flows, at most once a minute (the agent's metrics have it live).
type PeerStats struct {
	// LastHandshake is the last WireGuard handshake; none before the first.
	LastHandshake *time.Time `json:"lastHandshake,omitempty"`
	// Received and Sent are the bytes through the link, as the child
	// counts them, since its gateway started.
	Received int64 `json:"received"`
	Sent     int64 `json:"sent"`
	// RTTMicroseconds is the round trip between the two gateways, timed
	// at the last handshake; absent when unknown (WireGuard in the
	// kernel, or no handshake yet).
	RTTMicroseconds int64 `json:"rttMicroseconds,omitempty"`
	// At is when the child read these.
	At time.Time `json:"at"`
}
