package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProtocolRanges(t *testing.T) {
	for in, want := range map[string]ProtocolRange{"1": {1, 1}, "2-4": {2, 4}, "3-3": {3, 3}} {
		got, err := ParseProtocolRange(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "0", "3-2", "x", "1-", "-1", "1-2-3"} {
		_, err := ParseProtocolRange(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "1", ProtocolRange{1, 1}.String())
	require.Equal(t, "2-4", ProtocolRange{2, 4}.String())

	require.True(t, ProtocolRange{1, 2}.Meets(ProtocolRange{2, 3}))
	require.True(t, ProtocolRange{2, 3}.Meets(ProtocolRange{1, 2}))
	require.False(t, ProtocolRange{1, 1}.Meets(ProtocolRange{2, 3}))
	require.False(t, ProtocolRange{3, 4}.Meets(ProtocolRange{1, 2}))

	r, err := ProtocolsIn(map[string]string{}, AnnotationProtocols)
	require.NoError(t, err)
	require.Equal(t, BeforeProtocols, r, "absent: a build from before")
	_, err = ProtocolsIn(map[string]string{AnnotationProtocols: "two"}, AnnotationProtocols)
	require.Error(t, err)
	require.True(t, OwnProtocols().Meets(BeforeProtocols), "this build reads the builds from before")
}
