package admission

import (
	"time"

	"github.com/slipway-dev/slipway/operator/budget"
)

// Plan is the budget's answer for every waiting node at once, computed once per change of the fleet
// (Index.Gen) rather than once per waiting node.
type Plan struct {
	Gen      uint64
	At       time.Time
	Admitted map[string]bool
	HeldBy   map[string]Verdict // per-node blockers that held a node the budget had room for
	Full     map[string]bool    // pool keys full after the admissions above
	// Settled: full pool keys that would have room but for nodes settling after their cycle.
	Settled map[string]bool
}

// candidates are the waiting nodes the plan considers: all but those reboot-paused, kept back by the
// control-plane order or held by the switch (their fleet or group is paused), which must not take budget
// from the others. A node's wait began when the index first saw it asking (now when not known).
func candidates(s *Snapshot, o Order, sw Switch, now time.Time) []budget.Candidate {
	var cands []budget.Candidate
	for name, e := range s.Waiting {
		if e.Paused || o.keptBack(e, s) {
			continue
		}
		if held, _ := sw.Holds(e.Group); held {
			continue
		}
		since, ok := s.Since[name]
		if !ok {
			since = now
		}
		keys := e.PoolKeys()
		cands = append(cands, budget.Candidate{Name: name, Unavailable: e.Counts, Pools: keys[1:], Since: since})
	}
	return cands
}

// Queue is the order in which BuildPlan admits the waiting nodes while the budget has room (budget.Order
// over candidates): first the nodes already unavailable, then the longest waiting, then by name. A node a
// check holds (a per-node blocker, its canaries, its failed version) keeps its place and is passed over.
func Queue(s *Snapshot, o Order, sw Switch, now time.Time) []string {
	cands := candidates(s, o, sw, now)
	budget.Order(cands)
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Name
	}
	return out
}

// BuildPlan takes the candidates in admission order (budget.Order: already unavailable first, then the
// longest waiting; Queue) and admits each while every pool it is in has room. check is asked, in that
// order, about each node the budget has room for; a node it holds is not admitted and uses nothing.
func BuildPlan(s *Snapshot, l Limits, o Order, sw Switch, now time.Time, check func(name string) Verdict) *Plan {
	pools := map[string]budget.Pool{}
	for _, p := range s.Pools(l) {
		if p.Limited {
			pools[p.Key] = budget.Pool{Limit: p.Limit, Used: p.Used}
		}
	}
	cands := candidates(s, o, sw, now)
	p := &Plan{Gen: s.Gen, At: now, Admitted: map[string]bool{}, HeldBy: map[string]Verdict{}, Full: map[string]bool{}, Settled: map[string]bool{}}
	skip := func(name string) bool {
		if v := check(name); !v.Passes() {
			p.HeldBy[name] = v
			return true
		}
		return false
	}
	used := map[string]int{}
	for k, pool := range pools {
		used[k] = pool.Used
	}
	for _, name := range budget.AdmitPools(pools, cands, skip) {
		p.Admitted[name] = true
		if e := s.Waiting[name]; !e.Occupies() {
			for _, k := range e.PoolKeys() {
				used[k]++
			}
		}
	}
	settling := map[string]int{}
	for _, e := range s.Settling {
		for _, k := range e.PoolKeys() {
			settling[k]++
		}
	}
	for k, pool := range pools {
		if used[k] >= pool.Limit {
			p.Full[k] = true
			if settling[k] > 0 && used[k]-settling[k] < pool.Limit {
				p.Settled[k] = true
			}
		}
	}
	return p
}
