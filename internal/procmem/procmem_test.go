package procmem

import (
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// This test process's own /proc/<pid>/stat: its name, its parent, and CPU
// time that grows while it works.
func TestStatAndCPUOfThisProcess(t *testing.T) {
	comm, fields, ok := Stat(os.Getpid())
	if !ok || comm != "procmem.test" || len(fields) < 15 || fields[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("Stat(self) = %q, %v, %v", comm, fields, ok)
	}
	// Spin until the process has used 0.3 CPU-s by its own clock (the Go
	// runtime's view of this thread is not what is under test): on a loaded
	// machine that takes longer than 300 ms of wall time, so spinning for a
	// fixed wall time would prove nothing. /proc must see it within 10 s.
	before := CPU(os.Getpid(), false)
	var self unix.Rusage
	for start := time.Now(); time.Since(start) < 10*time.Second; {
		_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
		if time.Duration(self.Utime.Nano()) > 300*time.Millisecond+time.Duration(before*float64(time.Second)) {
			break
		}
	}
	if used := CPU(os.Getpid(), false) - before; used < 0.1 {
		t.Errorf("spinning for 0.3 CPU-s shows %.2f CPU-s in /proc", used)
	}
	if CPU(os.Getpid(), true) < CPU(os.Getpid(), false) {
		t.Error("CPU with children is less than without")
	}
	if _, _, ok := Stat(-1); ok || CPU(-1, false) != 0 {
		t.Error("a process that does not exist has a stat")
	}
}
