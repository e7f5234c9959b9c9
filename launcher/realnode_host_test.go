package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// A record is stale once nobody will undo it but whoever finds it: its
// owner is gone (or its pid reused) and it is not detached, or it is
// detached and its Environment's state file is gone.
func TestHostRecordStale(t *testing.T) {
	self, err := readProcStat(os.Getpid())
	require.NoError(t, err)
	owner := ProcessRecord{PID: os.Getpid(), StartTime: self.startTime}
	require.False(t, (&hostRecord{Owner: owner}).stale(), "owner alive")

	reused := owner
	reused.StartTime++
	require.True(t, (&hostRecord{Owner: reused}).stale(), "pid reused by a later process")

	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.True(t, (&hostRecord{Owner: ProcessRecord{PID: cmd.Process.Pid, StartTime: 1}}).stale(), "owner exited")

	dir := t.TempDir()
	detached := &hostRecord{Owner: reused, Detached: true, EnvDir: dir}
	require.True(t, detached.stale(), "detached, state file gone")
	require.NoError(t, os.WriteFile(filepath.Join(dir, StateFileName), []byte("{}"), 0o644))
	require.False(t, detached.stale(), "detached, state file present (its owner's end does not matter)")
}

func TestRealNodeTopology(t *testing.T) {
	_, err := ParseTopology([]byte(`
clusters:
- name: root
  nodes:
  - name: r
    real: true
    cpu: "2"
`))
	require.ErrorContains(t, err, "clusters[0].nodes[0].cpu: Forbidden: a real node has the machine's resources")
}

// A veth the kernel already deleted with its peer is not a teardown error.
func TestLinkGone(t *testing.T) {
	err := netlink.LinkDel(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nestlet-gone0", Index: 1 << 30}})
	require.Error(t, err)
	require.True(t, linkGone(err), "deleting a missing link: %v", err)
	require.False(t, linkGone(os.ErrPermission))
	require.NoError(t, deleteBridge("nestlet-gone0"))
}
