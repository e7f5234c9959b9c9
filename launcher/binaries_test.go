package launcher

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The launcher builds nothing: a directory without our programs is an
// error that says what to run, and one with them is taken as it is.
func TestFindNestletBinaries(t *testing.T) {
	dir := t.TempDir()
	_, err := FindNestletBinaries(dir)
	require.ErrorIs(t, err, ErrNestletBinariesMissing)
	require.ErrorContains(t, err, "run make build")
	require.ErrorContains(t, err, filepath.Join(dir, "nestlet"))

	for _, name := range []string{"nestlet", "nestctl", "nestlet-scheduler"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), 0o755))
	}
	_, err = FindNestletBinaries(dir)
	require.ErrorContains(t, err, filepath.Join(dir, "nestlet-proxy"), "one missing is named")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "nestlet-proxy"), []byte("#!/bin/true\n"), 0o644))
	_, err = FindNestletBinaries(dir)
	require.ErrorIs(t, err, ErrNestletBinariesMissing, "not executable")

	require.NoError(t, os.Chmod(filepath.Join(dir, "nestlet-proxy"), 0o755))
	b, err := FindNestletBinaries(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "nestlet-scheduler"), b.Scheduler)

	t.Setenv(BinDirEnv, dir)
	b, err = FindNestletBinaries("")
	require.NoError(t, err)
	require.Equal(t, dir, b.Dir, "$"+BinDirEnv+" when no directory is given")
}
