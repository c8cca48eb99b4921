// Package procmem reads a process's memory figures for the benchmarks.
package procmem

import (
	"fmt"
	"os"
	"strings"
)

// Read returns the resident and peak resident memory of process pid ("self"
// for this one), in MiB, from /proc/<pid>/status; zeros when it cannot be read.
func Read(pid string) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "VmRSS: %f kB", &kb); err == nil {
			rss = kb / 1024
		}
		if _, err := fmt.Sscanf(line, "VmHWM: %f kB", &kb); err == nil {
			hwm = kb / 1024
		}
	}
	return rss, hwm
}
