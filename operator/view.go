package operator

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/policy"
)

// view is what one sync reads of its node, gathered once (look) and read by the steps after it: the
// Node, its facts and state, the one policy it runs under, and its cycle's drain result. One
// resolution of the policy and one read of the drain per sync: the steps cannot disagree on them.
type view struct {
	n     *corev1.Node // the newest view of the node; the steps' own writes replace it
	f     protocol.Facts
	state protocol.State
	// pol: the policy the node runs under in this state (policies.Runtime.For: the pinned one in
	// its cycle, its pool's or the flags' out of it).
	pol *policy.Policy
	// drain: the drain attempt of the node's current cycle (drained: there is one).
	drain   drainResult
	drained bool
}

// look gathers a sync's view of node n in state with facts f.
func (c *Controller) look(n *corev1.Node, f protocol.Facts, state protocol.State) view {
	v := view{n: n, f: f, state: state, pol: c.policies.For(n, state.InCycle())}
	v.drain, v.drained = c.drains.result(n.Name, n.Annotations[protocol.DrainStarted])
	return v
}
