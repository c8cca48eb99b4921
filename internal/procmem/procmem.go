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
	f := status(pid, "VmRSS", "VmHWM")
	return f[0], f[1]
}

// Split returns how much of process pid's resident memory is anonymous (heap,
// stacks: what the program allocated) and how much file-backed (its mapped
// binary's touched pages), in MiB; zeros when it cannot be read.
func Split(pid string) (anon, file float64) {
	f := status(pid, "RssAnon", "RssFile")
	return f[0], f[1]
}

// status returns the named kB fields of /proc/<pid>/status, in MiB.
func status(pid string, names ...string) []float64 {
	out := make([]float64, len(names))
	data, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		for i, name := range names {
			var kb float64
			if _, err := fmt.Sscanf(line, name+": %f kB", &kb); err == nil {
				out[i] = kb / 1024
			}
		}
	}
	return out
}
