package framework

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// RSSBytes returns the resident set size of the process, read from
// /proc/<pid>/status.
func RSSBytes(p *launcher.Process) (int64, error) {
	return vmRSS(fmt.Sprintf("/proc/%d/status", p.PID()))
}

// SelfRSSBytes returns this process's resident set size.
func SelfRSSBytes() (int64, error) { return vmRSS("/proc/self/status") }

// vmRSS reads VmRSS from a /proc/<pid>/status file, in bytes.
func vmRSS(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS in %s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in %s", path)
}
