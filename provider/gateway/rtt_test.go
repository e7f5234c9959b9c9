package gateway

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/conn"
)

// fakeBind hands the packets queued in in to the receive function and
// drops what is sent.
type fakeBind struct {
	conn.Bind
	in [][]byte
}

func (f *fakeBind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) {
	return []conn.ReceiveFunc{func(packets [][]byte, sizes []int, _ []conn.Endpoint) (int, error) {
		n := copy(packets, f.in)
		for i := range n {
			sizes[i] = len(f.in[i])
		}
		f.in = f.in[n:]
		return n, nil
	}}, 51820, nil
}

func (f *fakeBind) Send([][]byte, conn.Endpoint) error { return nil }

// message is a WireGuard message of type kind and size, with its two
// indices where the type keeps them.
func message(kind uint32, size int, first, second uint32) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, kind)
	binary.LittleEndian.PutUint32(b[4:], first)
	if size >= 12 {
		binary.LittleEndian.PutUint32(b[8:], second)
	}
	return b
}

func TestRTTBindTimesBothEndsOfAHandshake(t *testing.T) {
	f := &fakeBind{}
	b := newRTTBind(f)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	fns, _, err := b.Open(0)
	require.NoError(t, err)
	receive := func(p []byte) {
		f.in = [][]byte{p}
		packets, sizes := [][]byte{make([]byte, 200)}, []int{0}
		n, err := fns[0](packets, sizes, make([]conn.Endpoint, 1))
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	parent := &conn.StdNetEndpoint{AddrPort: netip.MustParseAddrPort("192.0.2.1:51820")}
	child := &conn.StdNetEndpoint{AddrPort: netip.MustParseAddrPort("198.51.100.7:40000")}

	// This end starts a handshake with the parent (index 7): the response
	// naming index 7 comes 30 ms later.
	require.NoError(t, b.Send([][]byte{message(msgInitiation, sizeInitiation, 7, 0)}, parent))
	now = now.Add(10 * time.Millisecond)
	receive(message(msgResponse, sizeResponse, 99, 8)) // another index: not ours
	require.Zero(t, b.RTT(parent.DstToString()))
	now = now.Add(20 * time.Millisecond)
	receive(message(msgResponse, sizeResponse, 99, 7))
	require.Equal(t, 30*time.Millisecond, b.RTT(parent.DstToString()))

	// This end answers the child's handshake (its index 21): the child's
	// first transport packet naming index 21 comes 4 ms later; a
	// transport packet for another session before it changes nothing.
	require.NoError(t, b.Send([][]byte{message(msgResponse, sizeResponse, 21, 5)}, child))
	now = now.Add(time.Millisecond)
	receive(message(msgTransport, minSizeTransport, 7, 0))
	now = now.Add(3 * time.Millisecond)
	receive(message(msgTransport, minSizeTransport+64, 21, 0))
	require.Equal(t, 4*time.Millisecond, b.RTT(child.DstToString()))
	require.Equal(t, 30*time.Millisecond, b.RTT(parent.DstToString()), "another peer's round trip unchanged")
	require.Zero(t, b.inFlight.Load(), "nothing left in flight")

	// An initiation never answered is forgotten after handshakeInFlight;
	// data packets are not taken for handshakes.
	require.NoError(t, b.Send([][]byte{message(msgInitiation, sizeInitiation, 40, 0), message(msgTransport, sizeInitiation, 41, 0)}, parent))
	require.EqualValues(t, 1, b.inFlight.Load())
	now = now.Add(handshakeInFlight + time.Second)
	require.NoError(t, b.Send([][]byte{message(msgInitiation, sizeInitiation, 42, 0)}, parent))
	require.EqualValues(t, 1, b.inFlight.Load(), "the lost initiation is dropped")

	// The round trips of endpoints no peer has any more are forgotten.
	b.keep(map[string]bool{child.DstToString(): true})
	require.Zero(t, b.RTT(parent.DstToString()))
	require.Equal(t, 4*time.Millisecond, b.RTT(child.DstToString()))
}
