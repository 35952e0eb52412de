package admission

import (
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/protocol"
)

func TestVersionsOf(t *testing.T) {
	t1 := t0.Add(-time.Hour)
	s := VersionsOf([]Node{
		{State: protocol.Idle, Version: "B", FinishedAt: t1},                                             // on B
		{State: protocol.Idle, Version: "B"},                                                             // on B since it was built
		{State: protocol.Draining, Version: "A", AskedVersion: "B"},                                      // in flight for B
		{State: protocol.Rebooted, Version: "B", FinishedAt: t1.Add(-time.Hour)},                         // back on B, not finished
		{State: protocol.NeedsReboot, Version: "A", AskedVersion: "B"},                                   // asking
		{State: protocol.NeedsReboot, Version: "A", AskedVersion: "B", FailedVersion: "B", FailedAt: t1}, // failed once
		{State: protocol.Rebooting, Version: "A", AskedVersion: "C", StalledVersion: "C", StalledAt: t0}, // stalled for C
	})
	b, c, a := s["B"], s["C"], s["A"]
	// What Nodes say of themselves is no proof and no failure: those come from the fleet's memory.
	if b.On != 2 || b.InFlight != 2 || b.Asking != 2 || b.Failures != nil || b.Finished != nil {
		t.Errorf("B: %+v", *b)
	}
	if c.InFlight != 1 || c.Failures != nil || c.On != 0 || len(c.Stalled) != 1 || !c.Stalled[0].Equal(t0) {
		t.Errorf("C: %+v", *c)
	}
	if a.On != 2 || a.Finished != nil {
		t.Errorf("A: %+v (the two waiting nodes run it)", *a)
	}
	m := memory{failures: map[string][]time.Time{"B": {t1}}, proofs: map[string][]time.Time{"B": {t1, t0}}}
	if w := WithMemory(*b, "B", m); w.On != 2 || len(w.Failures) != 1 || len(w.Finished) != 2 {
		t.Errorf("B with memory: %+v", w)
	}
	if w := WithMemory(*b, "B", nil); w.Failures != nil || w.Finished != nil {
		t.Errorf("B without memory: %+v", w)
	}
}

// memory is an admission.Memory of known answers.
type memory struct {
	resumed                  map[string]time.Time
	failures, stalls, proofs map[string][]time.Time
}

func (m memory) VersionResumedAt(v string) time.Time                     { return m.resumed[v] }
func (m memory) VersionFailures(v string) []time.Time                    { return m.failures[v] }
func (m memory) VersionStalls(v string) []time.Time                      { return m.stalls[v] }
func (m memory) VersionProofs(v string, _ func(string) bool) []time.Time { return m.proofs[v] }
func (m memory) Holds(string) (bool, string)                             { return false, "" }

// TestCanaryOf: the canary states at known instants.
func TestCanaryOf(t *testing.T) {
	c := Canary{Nodes: 2, Bake: 10 * time.Minute, MaxFailed: 2}
	fin := func(ago ...time.Duration) []time.Time {
		var out []time.Time
		for _, a := range ago {
			out = append(out, t0.Add(-a))
		}
		return out
	}
	for _, k := range []struct {
		name    string
		s       VersionStats
		resumed time.Time
		extra   int
		want    string
	}{
		{"nobody on it: canaries go", VersionStats{}, time.Time{}, 0, "canaries"},
		{"one in flight, room for one more", VersionStats{InFlight: 1}, time.Time{}, 0, "canaries"},
		{"...but the plan admitted one already", VersionStats{InFlight: 1}, time.Time{}, 1, "waiting"},
		{"two in flight: the rest wait", VersionStats{InFlight: 2}, time.Time{}, 0, "waiting"},
		{"one finished, one in flight", VersionStats{On: 1, InFlight: 1, Finished: fin(time.Minute)}, time.Time{}, 0, "waiting"},
		{"two finished, baking", VersionStats{On: 2, Finished: fin(20*time.Minute, time.Minute)}, time.Time{}, 0, "baking"},
		{"two finished, the bake passed", VersionStats{On: 2, Finished: fin(30*time.Minute, 11*time.Minute)}, time.Time{}, 0, "released"},
		{"on it without a cycle Slipway ran: no proof, canaries still go", VersionStats{On: 3}, time.Time{}, 0, "canaries"},
		{"...and one in flight, one proven: the rest wait", VersionStats{On: 5, InFlight: 1, Finished: fin(time.Minute)}, time.Time{}, 0, "waiting"},
		{"a failure: not released, no room", VersionStats{On: 2, Finished: fin(30*time.Minute, 11*time.Minute), Failures: fin(time.Hour)}, time.Time{}, 0, "waiting"},
		{"a failure, room for a canary", VersionStats{On: 1, Finished: fin(30 * time.Minute), Failures: fin(time.Hour)}, time.Time{}, 0, "canaries"},
		{"a canary stalled: the rest wait", VersionStats{InFlight: 2, Stalled: fin(time.Hour), Stalls: fin(time.Hour), Failures: fin(time.Hour)}, time.Time{}, 0, "waiting"},
		{"...until a person resumed it: another canary may go", VersionStats{InFlight: 2, Stalled: fin(time.Hour), Stalls: fin(time.Hour), Failures: fin(time.Hour)}, t0.Add(-50 * time.Minute), 0, "canaries"},
		{"...but not for a stall after the resume", VersionStats{InFlight: 2, Stalled: fin(10 * time.Minute), Stalls: fin(10 * time.Minute), Failures: fin(10 * time.Minute)}, t0.Add(-50 * time.Minute), 0, "waiting"},
		{"the stalled canary's Node deleted: its place stays taken until resumed", VersionStats{InFlight: 1, Stalls: fin(time.Hour), Failures: fin(time.Hour)}, time.Time{}, 0, "waiting"},
		{"...and after the resume another canary goes", VersionStats{InFlight: 1, Stalls: fin(time.Hour), Failures: fin(time.Hour)}, t0.Add(-50 * time.Minute), 0, "canaries"},
		{"a canary back on the old version gives its place back", VersionStats{InFlight: 1, Failures: fin(time.Hour)}, time.Time{}, 0, "canaries"},
		{"the failure before the resume no longer counts", VersionStats{On: 2, Finished: fin(30*time.Minute, 11*time.Minute), Failures: fin(time.Hour)}, t0.Add(-50 * time.Minute), 0, "released"},
		{"two failures: halted", VersionStats{Failures: fin(time.Hour, time.Minute)}, time.Time{}, 0, "halted"},
		{"resumed after them", VersionStats{Failures: fin(time.Hour, time.Minute)}, t0, 0, "canaries"},
	} {
		if got := CanaryOf(k.s, c, k.resumed, t0, k.extra); got.State != k.want {
			t.Errorf("%s: %s, want %s", k.name, got.State, k.want)
		}
	}
	if got := CanaryOf(VersionStats{Failures: fin(time.Hour, time.Minute)}, Canary{MaxFailed: 3}, time.Time{}, t0, 0); got.State != "off" {
		t.Errorf("no canaries, 2 of 3 failures: %s", got.State)
	}
	st := CanaryOf(VersionStats{On: 2, Finished: fin(20*time.Minute, time.Minute)}, c, time.Time{}, t0, 0)
	if v := versionVerdict("B", st, c, t0); v.Kind != KindCanary || v.Retry != 9*time.Minute+10*time.Millisecond {
		t.Errorf("baking verdict %q retry %s", v, v.Retry)
	}
	if v := versionVerdict("B", CanaryState{State: "halted", Failures: 2}, c, t0); v.String() != "version-halted: 2 failed reboots for B (--max-failed-per-version=2); kubectl slipway resume --version B releases it" {
		t.Errorf("halted verdict %q", v)
	}
}

// A proof written for a node still in its cycle (its last PATCH not landed yet, or a new leader about
// to send it) does not count: its canary is still in flight.
func TestProofOfANodeInItsCycleDoesNotCount(t *testing.T) {
	s := VersionsOf([]Node{{State: protocol.Rebooted, Version: "B", UID: "u1"}})
	b := s["B"]
	m := proofsOf{"B": {{"u1", t0}}}
	if w := WithMemory(*b, "B", m); len(w.Finished) != 0 || w.InFlight != 1 {
		t.Errorf("in its cycle: %+v", w)
	}
	s = VersionsOf([]Node{{State: protocol.Idle, Version: "B", UID: "u1"}})
	if w := WithMemory(*s["B"], "B", m); len(w.Finished) != 1 {
		t.Errorf("out of its cycle: %+v", w)
	}
}

// proofsOf is a Memory of proofs only: version -> (UID, finish).
type proofsOf map[string][]struct {
	uid string
	at  time.Time
}

func (p proofsOf) VersionResumedAt(string) time.Time  { return time.Time{} }
func (p proofsOf) VersionFailures(string) []time.Time { return nil }
func (p proofsOf) VersionStalls(string) []time.Time   { return nil }
func (p proofsOf) VersionProofs(v string, inCycle func(string) bool) []time.Time {
	var out []time.Time
	for _, x := range p[v] {
		if !inCycle(x.uid) {
			out = append(out, x.at)
		}
	}
	return out
}
