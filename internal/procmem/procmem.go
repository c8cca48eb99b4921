// Package procmem reads a process's memory and CPU figures for the benchmarks.
package procmem

import (
	"fmt"
	"os"
	"strconv"
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

// CPU is the CPU time process pid has used so far (user and system), in
// seconds; 0 when it cannot be read. With children, that of the children it
// waited for too (a program that works through short-lived tools: kube-proxy
// runs nft for each sync).
func CPU(pid int, children bool) float64 {
	_, f, ok := Stat(pid)
	if !ok || len(f) < 15 {
		return 0
	}
	fields := []int{11, 12} // utime, stime
	if children {
		fields = append(fields, 13, 14) // cutime, cstime
	}
	var ticks float64
	for _, i := range fields {
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on Linux.
const clockTicks = 100

// Stat is /proc/<pid>/stat split: the command name, and the fields after it
// (the state first, the parent's pid second), the name being the one field
// that may hold spaces.
func Stat(pid int) (comm string, fields []string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return s[open+1 : end], strings.Fields(s[end+1:]), true
}
