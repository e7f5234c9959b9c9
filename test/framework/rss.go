package framework

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSBytes returns the resident set size of the process, read from
// /proc/<pid>/status.
func (p *Process) RSSBytes() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS of %s: %w", p.Name, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for %s", p.Name)
}
