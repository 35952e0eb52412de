package blocker

import (
	"strings"
	"testing"
	"time"
)

func TestCheckSelector(t *testing.T) {
	for _, ok := range []string{`cluster="staging"`, `cluster="staging",env=~"stg.*"`, ` cluster = "a,b" , region!="eu"`, `job!~"x|y"`, `name="quote \" inside"`} {
		if err := CheckSelector(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{``, `staging`, `cluster=staging`, `cluster="staging"}`, `version="1"`, `__name__="x"`, `cluster="a" or vector(1)`, `env=~"("`, `cluster="a",`} {
		if err := CheckSelector(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Known answers of the proof rule: every matching source must have proved the version (the least
// proven decides), fail closed on none.
func TestJudgeProof(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rule := ProofRule{Selector: `cluster="staging"`, MinCycles: 2, Soak: 72 * time.Hour}
	proven := func(ago time.Duration, finished float64) ProofSeries {
		return ProofSeries{Labels: `{cluster="staging"}`, Finished: finished, HasFinished: true, ProvenSince: now.Add(-ago)}
	}
	for _, c := range []struct {
		name   string
		series []ProofSeries
		ok     bool
		why    string
		retry  time.Duration
	}{
		{"nothing there", nil, false, "has no proof of it", 0},
		{"soaked", []ProofSeries{proven(80*time.Hour, 3)}, true, "", 0},
		{"soaking", []ProofSeries{proven(20*time.Hour, 3)}, false, `4459.2.1: {cluster="staging"} proved it 20h0m0s ago, soak 72h0m0s (until 2026-11-29T16:00:00Z)`, 52*time.Hour + 10*time.Millisecond},
		{"too few cycles", []ProofSeries{proven(80*time.Hour, 1)}, false, "finished 1 of the 2 cycles required", 0},
		{"halted there", []ProofSeries{{Labels: "x", Finished: 5, HasFinished: true, Halted: true, ProvenSince: now.Add(-100 * time.Hour)}}, false, "halted at x", 0},
		{"not proven", []ProofSeries{{Labels: "x", Finished: 5, HasFinished: true}}, false, "not proven at x yet", 0},
		{"no cycles series", []ProofSeries{{Labels: "x", ProvenSince: now.Add(-100 * time.Hour)}}, false, "finished 0 of the 2", 0},
		{"two sources, the later decides", []ProofSeries{proven(100*time.Hour, 3), proven(10*time.Hour, 3)}, false, "proved it 10h0m0s ago", 62*time.Hour + 10*time.Millisecond},
	} {
		ok, why, retry := JudgeProof(c.series, rule, "4459.2.1", now)
		if ok != c.ok || !strings.Contains(why, c.why) || retry != c.retry {
			t.Errorf("%s: %v %q %s; want %v %q %s", c.name, ok, why, retry, c.ok, c.why, c.retry)
		}
	}
}
