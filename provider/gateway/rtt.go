package gateway

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

// WireGuard's message types and sizes (the whitepaper, section 5.4), as
// the first four bytes (little-endian) and the length of each datagram.
const (
	msgInitiation     = 1
	msgResponse       = 2
	msgTransport      = 4
	sizeInitiation    = 148
	sizeResponse      = 92
	minSizeTransport  = 32
	handshakeInFlight = 10 * time.Second // a handshake not answered by then was lost (WireGuard retries after 5 s with a new index)
)

// rttBind is wireguard-go's UDP bind, timing the handshakes it carries:
// the round trip to a peer is measured at each handshake (every two
// minutes while packets flow), on both ends, with no packet of its own.
// The end that starts a handshake times its initiation to the response
// (the response names the initiation's index); the end that answers times
// its response to the first transport packet naming the response's index,
// which the initiator sends as soon as the response arrives. WireGuard in
// the kernel offers no such hook: there the round trip is unknown.
type rttBind struct {
	conn.Bind
	now func() time.Time

	mu sync.Mutex
	// sent are the handshake messages sent and not answered yet, by the
	// index this end chose for the session (their sender index).
	sent map[uint32]sentHandshake
	// inFlight is len(sent), read without the lock on every batch received.
	inFlight atomic.Int32
	// rtt is the last round trip measured, by the peer's endpoint
	// (ip:port, as wireguard-go reports it).
	rtt map[string]time.Duration
}

type sentHandshake struct {
	at       time.Time
	endpoint string
	// answer is the message type that completes it: a response to an
	// initiation, a transport packet to a response.
	answer uint32
}

func newRTTBind(b conn.Bind) *rttBind {
	return &rttBind{Bind: b, now: time.Now, sent: map[uint32]sentHandshake{}, rtt: map[string]time.Duration{}}
}

// Send notes each handshake message among bufs before sending them.
func (b *rttBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	for _, buf := range bufs {
		if len(buf) != sizeInitiation && len(buf) != sizeResponse {
			continue
		}
		switch binary.LittleEndian.Uint32(buf) {
		case msgInitiation:
			if len(buf) == sizeInitiation {
				b.sentHandshake(binary.LittleEndian.Uint32(buf[4:]), ep, msgResponse)
			}
		case msgResponse:
			if len(buf) == sizeResponse {
				b.sentHandshake(binary.LittleEndian.Uint32(buf[4:]), ep, msgTransport)
			}
		}
	}
	return b.Bind.Send(bufs, ep)
}

func (b *rttBind) sentHandshake(index uint32, ep conn.Endpoint, answer uint32) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range b.sent {
		if now.Sub(s.at) > handshakeInFlight {
			delete(b.sent, i)
		}
	}
	b.sent[index] = sentHandshake{at: now, endpoint: ep.DstToString(), answer: answer}
	b.inFlight.Store(int32(len(b.sent)))
}

// Open wraps each receive function to look for the answers to the
// handshakes in flight.
func (b *rttBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	if err != nil {
		return nil, 0, err
	}
	wrapped := make([]conn.ReceiveFunc, len(fns))
	for i, fn := range fns {
		wrapped[i] = func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
			n, err := fn(packets, sizes, eps)
			if b.inFlight.Load() > 0 {
				for j := range n {
					b.received(packets[j][:sizes[j]])
				}
			}
			return n, err
		}
	}
	return wrapped, actual, nil
}

// received completes the handshake p answers, if any.
func (b *rttBind) received(p []byte) {
	var index uint32
	kind := uint32(0)
	switch {
	case len(p) == sizeResponse && binary.LittleEndian.Uint32(p) == msgResponse:
		kind, index = msgResponse, binary.LittleEndian.Uint32(p[8:]) // the receiver index: the initiation's
	case len(p) >= minSizeTransport && binary.LittleEndian.Uint32(p) == msgTransport:
		kind, index = msgTransport, binary.LittleEndian.Uint32(p[4:]) // the receiver index: the response's
	default:
		return
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sent[index]
	if !ok || s.answer != kind {
		return
	}
	delete(b.sent, index)
	b.inFlight.Store(int32(len(b.sent)))
	b.rtt[s.endpoint] = now.Sub(s.at)
}

// RTT is the last round trip measured to endpoint (ip:port); 0 when none
// was.
func (b *rttBind) RTT(endpoint string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rtt[endpoint]
}

// keep forgets the round trips of every endpoint but those in current (a
// peer gone, or roamed to another address and port): the map stays as
// small as the peers.
func (b *rttBind) keep(current map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ep := range b.rtt {
		if !current[ep] {
			delete(b.rtt, ep)
		}
	}
}
