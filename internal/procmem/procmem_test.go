package procmem

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// This test process's own /proc/<pid>/stat: its name, its parent, and CPU
// time that grows while it works.
func TestStatAndCPUOfThisProcess(t *testing.T) {
	comm, fields, ok := Stat(os.Getpid())
	if !ok || comm != "procmem.test" || len(fields) < 15 || fields[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("Stat(self) = %q, %v, %v", comm, fields, ok)
	}
	before := CPU(os.Getpid(), false)
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
	}
	if used := CPU(os.Getpid(), false) - before; used < 0.1 {
		t.Errorf("300 ms of spinning used %.2f CPU-s", used)
	}
	if CPU(os.Getpid(), true) < CPU(os.Getpid(), false) {
		t.Error("CPU with children is less than without")
	}
	if _, _, ok := Stat(-1); ok || CPU(-1, false) != 0 {
		t.Error("a process that does not exist has a stat")
	}
}
