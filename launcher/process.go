package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is one program started by the launcher, in a process group of its
// own so that stopping it also stops anything it started.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File

	// What started it, for Restart.
	bin  string
	args []string
	env  []string
	// netns is the network namespace it runs in (`ip netns` name), or
	// empty for this machine's.
	netns string
}

// startProcess starts bin with args, its output appended to logDir/name.log.
// The child gets SIGKILL if the thread that started it dies, a backstop for
// a test binary that is killed before it can stop its processes.
//
// Under the directory of a detached Environment (Config.Detach) the child
// instead starts a session of its own, outlives this program, and is
// recorded in that Environment's state file before startProcess returns.
func startProcess(logDir, name, bin string, args ...string) (*Process, error) {
	return startProcessEnv(logDir, name, bin, nil, args...)
}

// startProcessEnv is startProcess with env added to this program's
// environment.
func startProcessEnv(logDir, name, bin string, env []string, args ...string) (*Process, error) {
	return startProcessIn("", logDir, name, bin, env, args...)
}

// startProcessIn is startProcessEnv in the network namespace netns (a
// host's or a real node's; this machine's when empty). nsenter enters it
// and executes the program in its place: the pid is the program's.
func startProcessIn(netns, logDir, name, bin string, env []string, args ...string) (*Process, error) {
	p := &Process{Name: name, LogPath: filepath.Join(logDir, name+".log"), bin: bin, args: args, env: env, netns: netns}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs p's command, its output appended to its log.
func (p *Process) start() error {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	if p.netns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=" + filepath.Join(netnsDir, p.netns), "--", p.bin}, p.args...)...)
	}
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout = f
	cmd.Stderr = f
	state := detachedStateFor(filepath.Dir(p.LogPath))
	if state != nil {
		// A new session: a process group of its own, no controlling
		// terminal (no SIGHUP or ^C from the shell that started it), and
		// no death signal when this program ends.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.log, p.err = cmd, done, f, nil
	if state != nil {
		if err := state.addProcess(p); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			_ = f.Close()
			return err
		}
	}
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		p.err = err // read only after done is closed
		close(done)
	}()
	return nil
}

// Restart starts the process again, with the same command line, after
// it stopped (Stop, or it exited): a fault test brings back an API server
// with its data. The Process keeps its identity, so whoever tracks it
// stops the new one. Not for the processes of a detached Environment.
func (p *Process) Restart() error {
	if exited, _ := p.Exited(); !exited {
		return fmt.Errorf("%s is still running", p.Name)
	}
	if detachedStateFor(filepath.Dir(p.LogPath)) != nil {
		return fmt.Errorf("%s belongs to a detached environment: restart it with that environment", p.Name)
	}
	return p.start()
}

// RestartWith starts the process again as Restart does, from the program
// bin with the same arguments: a test runs a component as another build
// for a while (Binary gives the one to come back to).
func (p *Process) RestartWith(bin string) error {
	if exited, _ := p.Exited(); !exited {
		return fmt.Errorf("%s is still running", p.Name)
	}
	p.bin = bin
	return p.Restart()
}

// Binary returns the program the process runs.
func (p *Process) Binary() string { return p.bin }

// PID returns the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL, and returns once no process of the group is left (or after a
// further 10s). It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	pgid := p.PID()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything left in the group (the leader is gone) is killed too, and
	// Stop returns once the group is empty (signals are delivered
	// asynchronously; orphans are reaped by init).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); p.Alive() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// Alive reports whether any process of the group still exists.
func (p *Process) Alive() bool {
	err := syscall.Kill(-p.PID(), 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.LogPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// processGroup tracks every process an Environment started.
type processGroup struct {
	mu    sync.Mutex
	procs []*Process
}

func (g *processGroup) add(p *Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
}

func (g *processGroup) list() []*Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Process(nil), g.procs...)
}

// stopAll stops every process concurrently, so that a topology stops in
// about one grace period.
func (g *processGroup) stopAll(grace time.Duration) {
	procs := g.list()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.Stop(grace) })
	}
	wg.Wait()
}
