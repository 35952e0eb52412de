package fleetsim

import (
	"os"
	"testing"
	"time"
)

// procCPU reads this process's CPU time from /proc: it grows by about what a busy loop burns.
func TestProcCPU(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	after, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 0.1 || d > 5 {
		t.Errorf("a 300 ms busy loop (%d turns) used %.2f s of CPU by /proc", x, d)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
