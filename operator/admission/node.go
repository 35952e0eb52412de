package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/stall"
)

// Node is what admission reads of one node, derived once per change of it (Of).
type Node struct {
	Group        string // budget group (protocol.BudgetGroup)
	ControlPlane bool
	Counts       bool // against the budget (Counts)
	State        protocol.State
	Paused       bool
}

// Of derives a node's entry: groupLabel is --group-label, policy --stall-policy.
func Of(n *corev1.Node, groupLabel string, policy stall.Policy) Node {
	f := protocol.Observe(n, protocol.Hooks{}) // hooks change what happens next, not the state
	return Node{Group: protocol.BudgetGroup(n, groupLabel), ControlPlane: protocol.IsControlPlane(n),
		Counts: Counts(f, policy), State: protocol.Classify(f), Paused: f.Paused}
}

// Counts is the one place that decides whether a node counts against the budget: it is in a cycle,
// NotReady or cordoned by anyone -- unless it stalled after its grant and the stall policy releases it.
func Counts(f protocol.Facts, policy stall.Policy) bool {
	if policy == stall.Release && f.Stalled != "" && stall.PostGrant(protocol.Classify(f)) {
		return false
	}
	return f.Unavailable()
}

// Busy: waiting to start (not paused) or in its cycle, for --control-plane-order.
func (e Node) Busy() bool {
	return e.State == protocol.NeedsReboot && !e.Paused || e.State.InCycle()
}

// Waiting: asking to start a cycle.
func (e Node) Waiting() bool { return e.State == protocol.NeedsReboot }

// Pool keys. A key names one budget: the fleet's (FleetPool), one group's (GroupPool), the control
// plane's (ControlPlanePool). PoolKeys is the one place that says which a node is in.
const (
	FleetPool        = budget.Global // every node (--max-unavailable)
	ControlPlanePool = "control-plane"
	groupPoolPrefix  = "group/"
)

// GroupPool is the key of group g's pool.
func GroupPool(g string) string { return groupPoolPrefix + g }

// PoolKeys are the pools a node is in: the fleet's, its group's, and the control plane's if it is one.
func (e Node) PoolKeys() []string {
	if e.ControlPlane {
		return []string{FleetPool, GroupPool(e.Group), ControlPlanePool}
	}
	return []string{FleetPool, GroupPool(e.Group)}
}
