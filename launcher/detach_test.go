package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Processes started under a detached directory lead sessions of their own,
// without a death signal, and are in the state file as soon as they start;
// StopDetached stops them from that file alone (even one that ignores
// SIGTERM, and what it started), removes the directory, and can be repeated.
func TestDetachedProcessesStopFromState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "c1"), 0o755))
	_, err := registerDetached(dir)
	require.NoError(t, err)
	t.Cleanup(func() { unregisterDetached(dir) })

	stubborn, err := startProcess(filepath.Join(dir, "c1"), "stubborn", "/bin/sh", "-c", "trap '' TERM; sleep 300 & echo started; wait")
	require.NoError(t, err)
	plain, err := startProcess(dir, "plain", "/bin/sh", "-c", "sleep 300")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(stubborn.Tail(1), "started") }, 10*time.Second, 20*time.Millisecond)

	s, err := ReadState(dir)
	require.NoError(t, err)
	require.Equal(t, dir, s.Dir)
	require.Len(t, s.Processes, 2)
	require.Equal(t, "c1/stubborn", s.Processes[0].Name)
	require.Equal(t, "plain", s.Processes[1].Name)
	for _, p := range []*Process{stubborn, plain} {
		st, err := readProcStat(p.PID())
		require.NoError(t, err)
		require.Equal(t, p.PID(), st.session, "%s leads a session of its own", p.Name)
	}
	require.Len(t, s.Alive(), 2)

	running, err := StopDetached(dir, 300*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, running, 2)
	for _, p := range s.Processes {
		require.False(t, p.Alive(), "%s survived", p.Name)
	}
	require.NoDirExists(t, dir)

	_, err = StopDetached(dir, time.Second)
	require.True(t, errors.Is(err, ErrNoState), "second stop: %v", err)
}

// Without Detach nothing changes: a process group of its own, in this
// program's session, and no state file.
func TestAttachedProcessesUnchanged(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, "attached", "/bin/sh", "-c", "sleep 300")
	require.NoError(t, err)
	defer p.Stop(time.Second)
	st, err := readProcStat(p.PID())
	require.NoError(t, err)
	require.Equal(t, p.PID(), st.pgrp, "a process group of its own")
	mine, err := readProcStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, mine.session, st.session, "in this program's session")
	require.NoFileExists(t, filepath.Join(dir, StateFileName))
}

// A record whose pid now belongs to a later process is neither alive nor
// signalled.
func TestReusedPIDIsNotOurs(t *testing.T) {
	p, err := startProcess(t.TempDir(), "later", "/bin/sh", "-c", "sleep 300")
	require.NoError(t, err)
	defer p.Stop(time.Second)
	st, err := readProcStat(p.PID())
	require.NoError(t, err)
	same := ProcessRecord{Name: "same", PID: p.PID(), StartTime: st.startTime}
	require.True(t, same.Alive())
	reused := ProcessRecord{Name: "earlier", PID: p.PID(), StartTime: st.startTime - 1}
	require.False(t, reused.Alive())
	reused.signal(syscall.SIGKILL)
	require.True(t, p.Alive(), "the later process was signalled")
	exited, _ := p.Exited()
	require.False(t, exited)
}

func TestStopDetachedLeavesForeignDirectories(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644))
	_, err := StopDetached(dir, time.Second)
	require.ErrorIs(t, err, ErrNoState)
	require.FileExists(t, filepath.Join(dir, "precious"))
}
