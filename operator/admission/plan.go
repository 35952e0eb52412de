package admission

import (
	"context"
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

// candidates are the waiting nodes the plan considers: those keep lets through (the chain's PlanFilter
// gates: not reboot-paused, not kept back by the control-plane order, not held by the switch, their
// policy's window open), which must not take budget from the others. A node's wait began when the index
// first saw it asking (now when not known).
func candidates(s *Snapshot, now time.Time, keep func(name string, e Node) bool) []budget.Candidate {
	var cands []budget.Candidate
	for name, e := range s.Waiting {
		if !keep(name, e) {
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

// Queue is the order in which the plan admits the waiting nodes while the budget has room (budget.Order
// over the candidates of Gates' filters under order o, switch sw and no window): first the nodes already
// unavailable, then the longest waiting, then by name. A node a check holds (a per-node blocker, its
// canaries, its failed version) keeps its place and is passed over.
func Queue(s *Snapshot, o Order, sw Switch, now time.Time) []string {
	f := &Fleet{Snapshot: s, Switch: sw, Order: o}
	none := &Rules{}
	cands := candidates(s, now, Gates.filter(context.Background(), f, now, func(string, Node) *Rules { return none }))
	budget.Order(cands)
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Name
	}
	return out
}

// filter is the chain's PlanFilter gates as the plan's candidate filter. A gate whose answer is the
// same for the whole fleet is asked once, one whose answer is the same for a policy's nodes once per
// policy.
func (c Chain) filter(ctx context.Context, f *Fleet, now time.Time, policyOf func(string, Node) *Rules) func(string, Node) bool {
	type key struct {
		gate int
		p    *Rules
	}
	memo := map[key]bool{}
	return func(name string, e Node) bool {
		in := Input{Name: name, Node: e, Now: now, Policy: policyOf(name, e), Fleet: f}
		for i, g := range c {
			if g.Plan != PlanFilter {
				continue
			}
			var k key
			switch g.Scope {
			case ScopeFleet:
				k = key{gate: i}
			case ScopePool:
				k = key{gate: i, p: in.Policy}
			default:
				if !g.Check(ctx, in).Passes() {
					return false
				}
				continue
			}
			pass, ok := memo[k]
			if !ok {
				pass = g.Check(ctx, in).Passes()
				memo[k] = pass
			}
			if !pass {
				return false
			}
		}
		return true
	}
}

// Plan builds the budget plan of the chain: the candidates its PlanFilter gates let through, each asked
// of its PlanCheck gates in queue order while the budget has room for it.
func (c Chain) Plan(ctx context.Context, s *Snapshot, l Limits, f *Fleet, now time.Time, policyOf func(string, Node) *Rules) *Plan {
	planning := &Planning{Extra: map[string]int{}}
	return BuildPlan(s, l, now, c.filter(ctx, f, now, policyOf), func(name string) Verdict {
		e := s.Waiting[name]
		in := Input{Name: name, Node: e, Now: now, Policy: policyOf(name, e), Fleet: f, Planning: planning}
		for _, g := range c {
			if g.Plan != PlanCheck {
				continue
			}
			if v := g.Check(ctx, in); !v.Passes() {
				return v
			}
		}
		if e.AskedVersion != "" {
			planning.Extra[e.AskedVersion]++ // admitted: a canary the next candidates see
		}
		return Pass
	})
}

// BuildPlan takes the waiting nodes keep lets through, in admission order (budget.Order: already
// unavailable first, then the longest waiting; Queue), and admits each while every pool it is in has
// room. check is asked, in that order, about each node the budget has room for; a node it holds is not
// admitted and uses nothing.
func BuildPlan(s *Snapshot, l Limits, now time.Time, keep func(name string, e Node) bool, check func(name string) Verdict) *Plan {
	pools := map[string]budget.Usage{}
	for _, p := range s.Pools(l) {
		if p.Limited {
			pools[p.Key] = budget.Usage{Limit: p.Limit, Used: p.Used}
		}
	}
	cands := candidates(s, now, keep)
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
