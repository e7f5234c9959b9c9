package api

import (
	"fmt"
	"strconv"
	"strings"
)

// The protocol is what a parent's Nestlet components and a child's agent
// read of each other: the annotations of the child's virtual node (this
// package's keys), the summary's schemas, and the keys of
// kube-public/nestlet-info. Protocol is the one this build writes;
// MinProtocol the oldest it still reads. A change an older reader would
// misread raises Protocol; a build keeps reading the previous one for one
// release, so that a parent and a child one release apart meet (docs/upgrade.md,
// "Version skew").
const (
	Protocol    = 1
	MinProtocol = 1
)

// AnnotationProtocols is set by a child's agent on its virtual node, and
// AnnotationParentProtocols by the parent's agent on it: the protocols each
// side reads, "<min>-<max>" (or "<n>"). AnnotationAgentVersion and
// AnnotationParentVersion say which Nestlet build each side runs, for
// people and for the messages of a skew.
const (
	AnnotationProtocols       = "nestlet.io/protocols"
	AnnotationAgentVersion    = "nestlet.io/agent-version"
	AnnotationParentProtocols = "nestlet.io/parent-protocols"
	AnnotationParentVersion   = "nestlet.io/parent-version"
	// TaintKeyVersionSkew is the NoSchedule taint a parent puts on the
	// virtual node of a child whose protocols do not meet its own: nothing
	// new is placed there until one side is upgraded.
	TaintKeyVersionSkew = "nestlet.io/version-skew"
)

// ProtocolRange is the protocols one side reads, Min to Max.
type ProtocolRange struct{ Min, Max int }

// OwnProtocols is this build's range.
func OwnProtocols() ProtocolRange { return ProtocolRange{Min: MinProtocol, Max: Protocol} }

// BeforeProtocols is the range of the builds that stated none: they spoke
// protocol 1.
var BeforeProtocols = ProtocolRange{Min: 1, Max: 1}

func (r ProtocolRange) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(r.Min)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// Meets reports whether the two sides share a protocol.
func (r ProtocolRange) Meets(o ProtocolRange) bool { return r.Min <= o.Max && o.Min <= r.Max }

// ParseProtocolRange reads "<n>" or "<min>-<max>".
func ParseProtocolRange(s string) (ProtocolRange, error) {
	lo, hi, ranged := strings.Cut(s, "-")
	if !ranged {
		hi = lo
	}
	minP, err1 := strconv.Atoi(lo)
	maxP, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || minP < 1 || maxP < minP {
		return ProtocolRange{}, fmt.Errorf("protocols %q: want <n> or <min>-<max>, 1 <= min <= max", s)
	}
	return ProtocolRange{Min: minP, Max: maxP}, nil
}

// ProtocolsIn reads the range stated in annotations under key, the
// builds before it was stated (BeforeProtocols) when it is absent.
func ProtocolsIn(annotations map[string]string, key string) (ProtocolRange, error) {
	v, ok := annotations[key]
	if !ok {
		return BeforeProtocols, nil
	}
	if len(v) > MaxChildAnnotationBytes {
		return ProtocolRange{}, fmt.Errorf("%s: %d bytes, over the bound", key, len(v))
	}
	return ParseProtocolRange(v)
}

// VersionOf is the version stated in annotations under key, or a phrase
// saying none was.
func VersionOf(annotations map[string]string, key string) string {
	if v, ok := annotations[key]; ok && v != "" && len(v) <= 256 {
		return v
	}
	return "a build that does not state its version (older than protocol ranges)"
}
