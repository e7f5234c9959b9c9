package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StateFileName is the state file of a detached Environment (Config.Detach),
// in its directory.
const StateFileName = "state.json"

// ErrNoState is returned by ReadState and StopDetached for a directory that
// holds no state file.
var ErrNoState = errors.New("no state file")

// State is what a detached Environment has started, written to its state
// file as each process starts, so that another program can find the clusters
// and stop everything (StopDetached) after the one that started them ended.
type State struct {
	// Dir is the Environment's directory.
	Dir string `json:"dir"`
	// Processes are in the order they were started.
	Processes []ProcessRecord `json:"processes"`
	// Clusters are in the order they became ready.
	Clusters []ClusterRecord `json:"clusters"`
}

// ProcessRecord is one process of a detached Environment.
type ProcessRecord struct {
	// Name is the log path relative to the directory, without ".log":
	// "etcd", "east/kube-apiserver", "east-nestlet".
	Name string `json:"name"`
	// PID is also the process group id and session id (each process leads
	// a session of its own).
	PID int `json:"pid"`
	// StartTime is the process's start time in clock ticks since boot
	// (/proc/<pid>/stat), which tells the process from a later one that
	// reuses its pid.
	StartTime uint64 `json:"startTime"`
	// Log is the path of its log.
	Log string `json:"log"`
}

// ClusterRecord is one cluster of a detached Environment.
type ClusterRecord struct {
	Name string `json:"name"`
	// URL is the API server's address.
	URL string `json:"url"`
	// Kubeconfig is an admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
}

// stateWriter keeps the state file of one detached Environment.
type stateWriter struct {
	mu    sync.Mutex
	path  string
	state State
}

// detached maps the directory of every detached Environment of this program
// to its state, so that startProcess, given only a log directory, starts a
// detached process and records it.
var detached = struct {
	mu    sync.Mutex
	byDir map[string]*stateWriter
}{byDir: map[string]*stateWriter{}}

// registerDetached writes a new state file in dir (absolute) and makes every
// process started under dir detached. It refuses a dir that holds a state
// file already: whatever it lists may still run.
func registerDetached(dir string) (*stateWriter, error) {
	w := &stateWriter{path: filepath.Join(dir, StateFileName), state: State{Dir: dir}}
	if _, err := os.Stat(w.path); err == nil {
		return nil, fmt.Errorf("%s holds the state of an environment already: stop it first", dir)
	}
	if err := w.write(); err != nil {
		return nil, err
	}
	detached.mu.Lock()
	defer detached.mu.Unlock()
	detached.byDir[dir] = w
	return w, nil
}

func unregisterDetached(dir string) {
	detached.mu.Lock()
	defer detached.mu.Unlock()
	delete(detached.byDir, dir)
}

// detachedStateFor returns the state of the detached Environment whose
// directory holds logDir, or nil.
func detachedStateFor(logDir string) *stateWriter {
	detached.mu.Lock()
	defer detached.mu.Unlock()
	if len(detached.byDir) == 0 {
		return nil
	}
	abs, err := filepath.Abs(logDir)
	if err != nil {
		return nil
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if w := detached.byDir[dir]; w != nil {
			return w
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

func (w *stateWriter) addProcess(p *Process) error {
	pid := p.PID()
	rec := ProcessRecord{Name: strings.TrimSuffix(p.LogPath, ".log"), PID: pid, Log: p.LogPath}
	if rel, err := filepath.Rel(filepath.Dir(w.path), rec.Name); err == nil {
		rec.Name = rel
	}
	// The child exists until it is waited for, so its start time can be
	// read even if it has exited already.
	if st, err := readProcStat(pid); err == nil {
		rec.StartTime = st.startTime
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state.Processes = append(w.state.Processes, rec)
	if err := w.write(); err != nil {
		return fmt.Errorf("recording %s: %w", rec.Name, err)
	}
	return nil
}

func (w *stateWriter) addCluster(c *Cluster) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state.Clusters = append(w.state.Clusters, ClusterRecord{Name: c.Name, URL: c.URL, Kubeconfig: c.KubeconfigPath})
	if err := w.write(); err != nil {
		return fmt.Errorf("recording cluster %s: %w", c.Name, err)
	}
	return nil
}

// write replaces the state file atomically; the caller holds mu (or is the
// only user).
func (w *stateWriter) write() error {
	data, err := json.MarshalIndent(w.state, "", "  ")
	if err != nil {
		return err
	}
	tmp := w.path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing state file: %w", err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		return fmt.Errorf("writing state file: %w", err)
	}
	return nil
}

// ReadState reads the state file of the detached Environment in dir. It
// returns an error wrapping ErrNoState when there is none.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoState)
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, StateFileName), err)
	}
	return &s, nil
}

// Cluster returns the record of the named cluster, or nil.
func (s *State) Cluster(name string) *ClusterRecord {
	for i := range s.Clusters {
		if s.Clusters[i].Name == name {
			return &s.Clusters[i]
		}
	}
	return nil
}

// Alive returns the processes of which something still runs.
func (s *State) Alive() []ProcessRecord {
	var out []ProcessRecord
	for _, p := range s.Processes {
		if p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

// Alive reports whether any process of the record's process group still
// runs (zombies, which only wait for their new parent to reap them, do not
// count). A group whose leader's pid now belongs to a later process is gone:
// Linux gives out no pid that is still a process group's id.
func (r ProcessRecord) Alive() bool {
	if !r.ownsGroup() {
		return false
	}
	members, err := groupMembers(r.PID)
	if err != nil {
		// Without /proc, fall back on the kernel's word (zombies count).
		err := syscall.Kill(-r.PID, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	return len(members) > 0
}

// ownsGroup reports whether the record's process group may still be the one
// it started: its leader is that very process, or has exited.
func (r ProcessRecord) ownsGroup() bool {
	st, err := readProcStat(r.PID)
	if err != nil {
		return true // leader gone (or no /proc): the group may remain
	}
	return r.StartTime == 0 || st.startTime == r.StartTime
}

// signal sends sig to the record's process group, unless its pid was reused.
func (r ProcessRecord) signal(sig syscall.Signal) {
	if r.PID > 1 && r.ownsGroup() {
		_ = syscall.Kill(-r.PID, sig)
	}
}

// StopDetached stops everything the state file in dir lists, then checks
// that none of it remains and removes dir. It stops in three waves, each
// with SIGTERM to every process group and SIGKILL to those left after
// grace: first the clients (agents, controller managers, schedulers, kwok),
// then the API servers, then etcd; stopped all at once, etcd and the API
// servers each wait for the other, and stopping takes ten times longer. It
// returns the processes that were still running. For a dir without a state
// file it returns an error wrapping ErrNoState and touches nothing. Stopping
// a dir whose processes are gone already just removes it, so StopDetached
// may be repeated.
func StopDetached(dir string, grace time.Duration) ([]ProcessRecord, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s, err := ReadState(abs)
	if err != nil {
		return nil, err
	}
	if err := stopDetachedRealNodes(abs); err != nil {
		return nil, fmt.Errorf("stopping real nodes: %w; %s kept", err, abs)
	}
	running := s.Alive()
	var left []ProcessRecord
	for wave := range 3 {
		procs := slices.DeleteFunc(slices.Clone(running), func(p ProcessRecord) bool { return stopWave(p.Name) != wave })
		for _, p := range procs {
			p.signal(syscall.SIGTERM)
		}
		procs = waitGone(procs, grace)
		for _, p := range procs {
			p.signal(syscall.SIGKILL)
		}
		left = append(left, waitGone(procs, 10*time.Second)...)
	}
	if len(left) > 0 {
		names := make([]string, 0, len(left))
		for _, p := range left {
			names = append(names, fmt.Sprintf("%s (pid %d)", p.Name, p.PID))
		}
		return running, fmt.Errorf("still running after SIGKILL: %s; %s kept", strings.Join(names, ", "), abs)
	}
	if err := removeDetachedHosts(abs); err != nil {
		return running, fmt.Errorf("removing hosts: %w; %s kept", err, abs)
	}
	if err := removeUnusedWAN(); err != nil {
		return running, err
	}
	unregisterDetached(abs)
	if err := os.RemoveAll(abs); err != nil {
		return running, fmt.Errorf("removing %s: %w", abs, err)
	}
	return running, nil
}

// stopWave is when StopDetached stops the process of a record name.
func stopWave(name string) int {
	switch filepath.Base(name) {
	case "etcd":
		return 2
	case "kube-apiserver":
		return 1
	default:
		return 0
	}
}

// waitGone waits up to timeout for every process group of procs to end and
// returns those left.
func waitGone(procs []ProcessRecord, timeout time.Duration) []ProcessRecord {
	deadline := time.Now().Add(timeout)
	for {
		procs = slices.DeleteFunc(procs, func(p ProcessRecord) bool { return !p.Alive() })
		if len(procs) == 0 || time.Now().After(deadline) {
			return procs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type procStat struct {
	state     byte
	pgrp      int
	session   int
	startTime uint64
}

// readProcStat reads the state, process group, session and start time of
// pid.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	session, err := strconv.Atoi(f[3])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, session: session, startTime: start}, nil
}

// groupMembers returns the pids of the processes of group pgid that are not
// zombies.
func groupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.pgrp != pgid || st.state == 'Z' || st.state == 'X' {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}
