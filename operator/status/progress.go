package status

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
)

// queue is each waiting node's place (from 1) in the order the operator admits them: admission.Queue
// over the same entries, the published --control-plane-order and the switch. The operator's wait of a
// node begins when its leader first saw it ask; the Nodes record that as waiting-since (written with
// the first blocked-by), which is what the view orders by (a node without it waits from now).
func queue(nodes []corev1.Node, entries []admission.Node, order admission.Order, sw fleetswitch.Switch, now time.Time) map[string]int {
	x := admission.NewIndex()
	for i := range nodes {
		e := entries[i]
		x.Update(nodes[i].Name, now, func() (admission.Node, bool) { return e, true })
	}
	s := x.Snapshot()
	for i := range nodes {
		if _, ok := s.Waiting[nodes[i].Name]; ok {
			if t := parseTime(nodes[i].Annotations[protocol.WaitingSince]); !t.IsZero() {
				s.Since[nodes[i].Name] = t
			}
		}
	}
	out := map[string]int{}
	for i, name := range admission.Queue(&s, order, sw, now) {
		out[name] = i + 1
	}
	return out
}

// cycles summarises the published cycle durations.
func cycles(secs []int) Cycles {
	c := Cycles{Measured: len(secs)}
	if m, ok := median(secs); ok {
		s := int(m / time.Second)
		c.MedianSeconds = &s
	}
	return c
}

// median of durations in seconds (the mean of the middle two for an even count); ok false when none.
func median(secs []int) (time.Duration, bool) {
	if len(secs) == 0 {
		return 0, false
	}
	s := slices.Clone(secs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return time.Duration(s[m]) * time.Second, true
	}
	return time.Duration(s[m-1]+s[m]) * time.Second / 2, true
}

// ETA is how long nodes still to reboot take: left counts them per budget pool they are in (pool key,
// admission.Node.PoolKeys), limits is each limited pool's limit. They go in rounds: each pool lets at
// most its limit go at once, so the rounds are the most any pool needs (left over limit, rounded up);
// each round takes the median measured cycle (cycleSeconds), with settle (--settle-time) between
// rounds. ok is false when no cycle was measured or the fleet's limit is not known. It is an estimate:
// reboot windows, pauses, blockers, canary bakes and other versions sharing the budget are not in it.
func ETA(left map[string]int, limits map[string]int, cycleSeconds []int, settle time.Duration) (time.Duration, bool) {
	cycle, ok := median(cycleSeconds)
	if _, limited := limits[admission.FleetPool]; !ok || !limited {
		return 0, false
	}
	rounds := 0
	for k, n := range left {
		if l, ok := limits[k]; ok && l > 0 {
			rounds = max(rounds, (n+l-1)/l)
		}
	}
	if rounds == 0 {
		return 0, true
	}
	return time.Duration(rounds)*cycle + time.Duration(rounds-1)*settle, true
}

// progress is what a version's ETA is computed from besides its nodes.
type progress struct {
	limits   map[string]int // limited pools by key
	cycles   []int          // measured cycle durations, seconds
	settle   time.Duration
	schedule Schedule
	paused   bool // the fleet (a person, or the failure budget)
}

// eta is how long until the nodes left are through, in seconds: the wait for the reboot window to
// open, then ETA. nil when the fleet is paused or it is not known.
func (p progress) eta(left map[string]int, now time.Time) *int {
	d, ok := ETA(left, p.limits, p.cycles, p.settle)
	switch s := p.schedule; {
	case !ok || p.paused || !s.Known:
		return nil
	case !s.Open && s.NextOpen == nil:
		return nil // no window within 400 days
	case !s.Open:
		d += s.NextOpen.Sub(now)
	}
	secs := int(d / time.Second)
	return &secs
}

// leftOf counts, per pool, the nodes still to reboot for version v: asking for it, or in their cycle
// for it (as admission.VersionsOf counts them).
func leftOf(entries []admission.Node, v string) map[string]int {
	left := map[string]int{}
	for _, e := range entries {
		cycling := e.State.InCycle() && (e.AskedVersion == v || e.AskedVersion == "" && e.Version == v)
		if cycling || e.Waiting() && e.AskedVersion == v {
			for _, k := range e.PoolKeys() {
				left[k]++
			}
		}
	}
	return left
}

// poolLimits are the limited budgets by pool key.
func poolLimits(bs []Budget) map[string]int {
	out := map[string]int{}
	for _, b := range bs {
		if b.Limit == nil {
			continue
		}
		switch b.Pool {
		case PoolFleet:
			out[admission.FleetPool] = *b.Limit
		case PoolControlPlane:
			out[admission.ControlPlanePool] = *b.Limit
		case PoolGroup:
			out[admission.GroupPool(b.Group)] = *b.Limit
		}
	}
	return out
}
