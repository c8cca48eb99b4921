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

// Split returns how much of process pid's resident memory is anonymous (heap,
// stacks: what the program allocated) and how much file-backed (its mapped
// binary's touched pages), in MiB; zeros when it cannot be read.
func Split(pid string) (anon, file float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "RssAnon: %f kB", &kb); err == nil {
			anon = kb / 1024
		}
		if _, err := fmt.Sscanf(line, "RssFile: %f kB", &kb); err == nil {
			file = kb / 1024
		}
	}
	return anon, file
}
