package api

import (
	"errors"
	"strings"
	"time"
)

// Placement by reservation (docs/scheduling.md#placement-by-reservation).
// A parent's scheduler binds a pod to a virtual node only once the child
// has a place for it: at Permit it asks the child's agent to reserve one
// (ReservePath, through the parent API server's nodes/proxy), the agent
// creates the delegate held (AnnotationHold), the child's scheduler
// chooses its node, reserves below in turn when that node is virtual, and
// holds it at Permit, saying where (AnnotationReservedOn). Binding the
// parent pod releases it: the agent copies what it references and sets
// AnnotationHold to HoldReleased, and the child's scheduler binds it.
const (
	// AnnotationHold is set on a delegate created as a reservation: "held"
	// until its parent pod is bound to the virtual node, then "released".
	AnnotationHold = "nestlet.io/hold"
	// AnnotationReservedOn is set by a cluster's scheduler on a held pod
	// once it holds a place for it: the node, real or virtual (whose own
	// child then holds one too).
	AnnotationReservedOn = "nestlet.io/reserved-on"

	HoldHeld     = "held"
	HoldReleased = "released"

	// TryingOtherNodes starts the message of a held pod's scheduling
	// failure that is not this cluster's last word: the node it chose had
	// no place below, and its scheduler tries its other nodes at once.
	// The agent answering the parent waits for the last word.
	TryingOtherNodes = "no place below, trying the other nodes: "

	// NoAnswerYet starts the reason a node is refused to a pod for when
	// its child could not be asked (its agent, tunnel or proxy down or
	// still starting): not the child's word on the pod. The scheduler asks
	// again after a short back-off, and an agent answering its parent
	// with a message that holds it says so (Reservation.Retry), so that
	// every level above asks again too instead of waiting for a summary
	// to change.
	NoAnswerYet = "no answer yet, asked again shortly: "

	// AnnotationReserves is set to "true" on a virtual node whose agent
	// answers reservations (it serves the kubelet API); the parent's
	// scheduler binds pods to a virtual node without it first, as before
	// reservations.
	AnnotationReserves = "nestlet.io/reserves"

	// AnnotationReserveEncodings lists, on a virtual node whose agent
	// reserves, the encodings besides JSON its agent reads in a
	// reservation's body: EncodingProtobuf, the Kubernetes protobuf
	// encoding (runtime.ContentTypeProtobuf), as API servers speak it. A
	// parent's scheduler sends the pod as JSON to an agent that does not
	// list it (one release older).
	AnnotationReserveEncodings = "nestlet.io/reserve-encodings"
	EncodingProtobuf           = "protobuf"

	// AnnotationBindFirst set to "true" on a pod makes every scheduler on
	// its way bind it to a virtual node at once, without asking the child
	// for a place (as before reservations: a child that then has no place
	// fails it after the bounce timeout). It saves the reservation's round
	// trip per level; BenchmarkHopLatency measures that against the
	// default in the same run. Delegates carry it down.
	AnnotationBindFirst = "nestlet.io/bind-first"

	// ReservePath is the first segment of the kubelet API route of a
	// virtual node that reserves a place for a pod:
	// /reserve/<node>/<namespace>/<pod>, POST (the pod in the body, as
	// JSON or, where AnnotationReserveEncodings says so, protobuf) to
	// reserve, DELETE to withdraw the reservation.
	ReservePath = "reserve"
)

// ErrBadReservation is wrapped by the errors of a reservation request
// that is wrong in itself (a pod already bound): 400, not retried.
var ErrBadReservation = errors.New("bad reservation request")

// Reservation is the answer of a child's agent to a reservation request.
type Reservation struct {
	// Held is true when the delegate is held in the child with a place
	// (Node), false when the child does not hold pods of this kind (the
	// parent binds as before reservations: see Reservable).
	Held bool `json:"held"`
	// Node is where the child's scheduler holds the delegate.
	Node string `json:"node,omitempty"`
	// Unschedulable is the child scheduler's reason when it has no place
	// for the pod; Held is false then.
	Unschedulable string `json:"unschedulable,omitempty"`
	// Waiting is true, with Unschedulable, when the child keeps the
	// delegate Pending for room to appear (Target spec.waitForRoom): the
	// parent does not withdraw it, and asks again (RenewWaiting) for as
	// long as its pod waits.
	Waiting bool `json:"waiting,omitempty"`
	// Retry is true, with Unschedulable, when the child's reason is not
	// its last word: a cluster below could not be asked (NoAnswerYet).
	// The parent refuses the node to the pod for a short back-off only,
	// and asks again.
	Retry bool `json:"retry,omitempty"`
}

// RenewWaiting is how often a parent asks again for a pod that waits in a
// child for room; a child drops a waiting delegate not asked for in
// HeldMaxAge (by default: the agent's --held-max-age), which must be
// longer.
const (
	RenewWaiting = 30 * time.Second
	HeldMaxAge   = 2 * time.Minute
)

// ReservePathFor returns the kubelet API path of a reservation of the pod
// namespace/name on the virtual node node.
func ReservePathFor(node, namespace, name string) string {
	return "/" + strings.Join([]string{ReservePath, node, namespace, name}, "/")
}

// ParseReservePath returns the node, namespace and pod of a reservation
// path.
func ParseReservePath(path string) (node, namespace, name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) != 4 || parts[0] != ReservePath || parts[1] == "" || parts[2] == "" || parts[3] == "" {
		return "", "", "", false
	}
	return parts[1], parts[2], parts[3], true
}
