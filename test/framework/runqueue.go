package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// RunQueue is what the kernel's scheduler recorded for a process's
// threads (/proc/<pid>/task/<tid>/schedstat): how long they ran on a CPU,
// and how long they were ready to run but waited for one. On a machine
// that many processes share, the second is how much CPU a process wanted
// and could not have at once: what tells a slow program from a starved
// one.
type RunQueue struct {
	Ran, Waited time.Duration
}

// RunQueueOf sums the schedstat of every thread pid has now. A thread that
// has ended is no longer counted, so a difference taken across its end
// loses its share; Go programs rarely end their threads.
func RunQueueOf(pid int) (RunQueue, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return RunQueue{}, err
	}
	var sum RunQueue
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		q, err := parseSchedstat(string(data))
		if err != nil {
			return RunQueue{}, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum = sum.Add(q)
	}
	return sum, nil
}

// parseSchedstat reads "<ns on a CPU> <ns waiting on a run queue>
// <timeslices>".
func parseSchedstat(s string) (RunQueue, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return RunQueue{}, fmt.Errorf("want at least 2 fields, got %q", s)
	}
	ran, err1 := strconv.ParseInt(f[0], 10, 64)
	waited, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return RunQueue{}, fmt.Errorf("not numbers: %q", s)
	}
	return RunQueue{Ran: time.Duration(ran), Waited: time.Duration(waited)}, nil
}

// Add returns the sum of both.
func (q RunQueue) Add(o RunQueue) RunQueue {
	return RunQueue{Ran: q.Ran + o.Ran, Waited: q.Waited + o.Waited}
}

// Sub returns what was recorded between o (earlier) and q, never below
// zero (threads that ended take their times with them).
func (q RunQueue) Sub(o RunQueue) RunQueue {
	return RunQueue{Ran: max(q.Ran-o.Ran, 0), Waited: max(q.Waited-o.Waited, 0)}
}

// WaitPerRun is the time waited for a CPU per second run: 0 when there
// was no wait, 1 when the process waited as long as it ran. 0 when it did
// not run.
func (q RunQueue) WaitPerRun() float64 {
	if q.Ran <= 0 {
		return 0
	}
	return q.Waited.Seconds() / q.Ran.Seconds()
}

// String gives both times and their ratio.
func (q RunQueue) String() string {
	return fmt.Sprintf("ran %.1f s, waited %.1f s (%.2f s per second run)", q.Ran.Seconds(), q.Waited.Seconds(), q.WaitPerRun())
}
