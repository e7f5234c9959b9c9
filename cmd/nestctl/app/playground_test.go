package app

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultPlaygroundDir(t *testing.T) {
	t.Setenv("NESTLET_CACHE_DIR", "/somewhere/nestlet")
	require.Equal(t, "/somewhere/nestlet/playground", defaultPlaygroundDir())
	t.Setenv("NESTLET_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	require.Equal(t, "/xdg/nestlet/playground", defaultPlaygroundDir())
}

// down without a playground says so and succeeds; down on a directory that
// is not a playground's refuses and leaves it alone.
func TestPlaygroundDownWithoutPlayground(t *testing.T) {
	var out bytes.Buffer
	missing := filepath.Join(t.TempDir(), "none")
	require.NoError(t, playgroundDown(&out, missing))
	require.Contains(t, out.String(), "nothing to stop")

	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "keep"), nil, 0o644))
	err := playgroundDown(&out, foreign)
	require.ErrorContains(t, err, "holds no playground state file")
	require.FileExists(t, filepath.Join(foreign, "keep"))
}
