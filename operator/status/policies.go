package status

import (
	"time"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/operator/policy"
)

// PoolRow is one RebootPolicy (a node pool) as the view shows it: computed here from the object and
// the Nodes, as the operator computes it, not read back from what the operator last wrote.
type PoolRow struct {
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	Nodes    int    `json:"nodes"`
	// Window: open, closed, paused or invalid; NextOpen when closed.
	Window   string     `json:"window"`
	NextOpen *time.Time `json:"nextOpen"`
	// Paused: spec.paused, with Reason its pausedReason.
	Paused bool   `json:"paused"`
	Reason string `json:"reason"`
	// Error: why its spec did not compile ("" it did): its nodes are held.
	Error string `json:"error"`
}

// poolsOf compiles the RebootPolicies as the operator does, over the default policy it published
// (the flags' defaults when unknown).
func poolsOf(rps []v1alpha1.RebootPolicy, set settings) *policy.PoolSet {
	if len(rps) == 0 {
		return nil
	}
	base := policy.Defaults()
	if set.pol != nil {
		base = set.pol.Spec
	}
	var ps []*policy.Pool
	for i := range rps {
		ps = append(ps, policy.CompilePool(base, &rps[i]))
	}
	return policy.NewPoolSet(ps)
}

// policyRows are the pools as the view shows them, highest priority first.
func policyRows(set *policy.PoolSet, rps []v1alpha1.RebootPolicy, nodes []Node, now time.Time) []PoolRow {
	out := []PoolRow{}
	count := map[string]int{}
	for _, n := range nodes {
		count[n.Policy]++
	}
	spec := map[string]v1alpha1.RebootPolicySpec{}
	for _, rp := range rps {
		spec[rp.Name] = rp.Spec
	}
	for _, p := range set.Pools() {
		row := PoolRow{Name: p.Name, Priority: p.Priority, Nodes: count[p.Name], Paused: spec[p.Name].Paused, Reason: spec[p.Name].PausedReason, Error: p.Err}
		var next time.Time
		row.Window, next = p.Window(now)
		row.NextOpen = timePtr(next)
		out = append(out, row)
	}
	return out
}
