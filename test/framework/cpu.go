package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nestlet/nestlet/launcher"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// CPUTime returns the user plus system CPU time the process has used, read
// from /proc/<pid>/stat.
func CPUTime(p *launcher.Process) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat", p.PID())
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %d fields", p.PID(), len(f))
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat times", p.PID())
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// CPUByKind sums the CPU time of the environment's processes by program
// (kube-apiserver, etcd, kwok, agent, proxy...): where the time goes.
func CPUByKind(e *launcher.Environment) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range e.Processes() {
		kind := p.Name
		if _, component, ok := launcher.ProcessComponent(p.Name); ok {
			kind = component
		}
		if t, err := CPUTime(p); err == nil {
			out[kind] += t
		}
	}
	return out
}
