package fleetsim

import (
	"os"
	"syscall"
	"testing"
)

// parseProcStat on lines as the kernel writes them, the command name holding spaces and ")".
func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		line string
		want float64
		bad  bool
	}{
		{line: "4242 (update-operato) S 1 4242 4242 0 -1 4194560 9211 0 0 0 1234 566 0 0 20 0 12 0 1000 0 0", want: 18.00},
		{line: "77 (a) b) (c) R 1 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5", want: 0.10},
		{line: "77 (a b) R 1 77 77 0 -1 0 0 0 0 0 x 3 0 0", bad: true},
		{line: "77 (short) R 1 2 3", bad: true},
		{line: "no parenthesis at all", bad: true},
	} {
		got, err := parseProcStat([]byte(c.line))
		if c.bad != (err != nil) || (!c.bad && got != c.want) {
			t.Errorf("parseProcStat(%q) = %v, %v; want %v (bad %v)", c.line, got, err, c.want, c.bad)
		}
	}
}

// procCPU agrees with getrusage read just before and just after it, within /proc's clock ticks: a
// check that holds whatever else the machine is doing (a busy machine makes the loop longer in wall
// time, not the CPU it burns).
func TestProcCPU(t *testing.T) {
	rusage := func() float64 {
		var r syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
			t.Fatal(err)
		}
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
	}
	// Burn 0.2 s of CPU, counted as CPU, so the figure is not near zero.
	for x, start := 0, rusage(); rusage()-start < 0.2; x++ {
	}
	before := rusage()
	got, err := procCPU(os.Getpid())
	after := rusage()
	if err != nil {
		t.Fatal(err)
	}
	const tick = 2.0 / clockTicks // utime and stime are each truncated to a tick
	if got < before-tick || got > after+tick {
		t.Errorf("procCPU = %.3f s; getrusage said %.3f s before and %.3f s after", got, before, after)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
