package framework

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// /proc/net/tcp writes an IPv4 address as one little-endian word in hex.
func TestInAPIRange(t *testing.T) {
	require.True(t, inAPIRange("020AFB0A"), "10.251.10.2")
	require.False(t, inAPIRange("0500FA0A"), "10.250.0.5, a host's WAN address")
	require.False(t, inAPIRange("00000000"), "the wildcard")
	require.False(t, inAPIRange("not hex"))
}
