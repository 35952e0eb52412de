package admission

import (
	"testing"
	"time"
)

func TestProofOf(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(h ...int) []time.Time {
		var out []time.Time
		for _, x := range h {
			out = append(out, t0.Add(time.Duration(x)*time.Hour))
		}
		return out
	}
	canary := Canary{Nodes: 2, Bake: 3 * time.Hour, MaxFailed: 2}
	for _, c := range []struct {
		name       string
		s          VersionStats
		c          Canary
		resumed    time.Time
		personHalt bool
		now        time.Time
		proven     time.Time
		halted     bool
	}{
		{name: "no cycle", c: canary, now: t0.Add(100 * time.Hour)},
		{name: "one canary of two", s: VersionStats{Finished: at(1)}, c: canary, now: t0.Add(100 * time.Hour)},
		{name: "baking", s: VersionStats{Finished: at(1, 2)}, c: canary, now: t0.Add(4 * time.Hour)},
		{name: "bake passed", s: VersionStats{Finished: at(1, 2, 3)}, c: canary, now: t0.Add(5 * time.Hour), proven: t0.Add(5 * time.Hour)},
		{name: "a failure", s: VersionStats{Finished: at(1, 2), Failures: at(3)}, c: canary, now: t0.Add(9 * time.Hour)},
		{name: "halted by failures", s: VersionStats{Finished: at(1, 2), Failures: at(3, 4)}, c: canary, now: t0.Add(9 * time.Hour), halted: true},
		{name: "resumed after the failure", s: VersionStats{Finished: at(1, 2), Failures: at(3)}, c: canary, resumed: t0.Add(7 * time.Hour),
			now: t0.Add(9 * time.Hour), proven: t0.Add(7 * time.Hour)},
		{name: "a person's halt", s: VersionStats{Finished: at(1, 2)}, c: canary, personHalt: true, now: t0.Add(9 * time.Hour), halted: true},
		{name: "canaries off: one cycle", s: VersionStats{Finished: at(1)}, now: t0.Add(2 * time.Hour), proven: t0.Add(time.Hour)},
	} {
		p := ProofOf("4459.2.1", c.s, c.c, c.resumed, c.personHalt, c.now)
		if !p.ProvenSince.Equal(c.proven) || p.Halted != c.halted || p.Finished != len(c.s.Finished) {
			t.Errorf("%s: %+v, want proven since %v, halted %v", c.name, p, c.proven, c.halted)
		}
	}
}
