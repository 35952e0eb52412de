package operator

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/budget"
)

// policyNodes is what the RebootPolicy runtime (package policies) needs of the node controller.
type policyNodes struct{ c *Controller }

// Reindex indexes every node again under the pools now in force.
func (p policyNodes) Reindex() map[string]bool {
	inUse := map[string]bool{}
	for _, n := range p.c.Nodes() {
		p.c.reindex(n.Name)
		inUse[n.Annotations[protocol.AdmittedPolicy]] = true
	}
	return inUse
}

func (p policyNodes) SetRules(byName map[string]*admission.Rules, limits map[string]budget.Max) {
	p.c.admitter.SetPolicies(byName, limits)
}

func (p policyNodes) Waiting() { p.c.lookAtWaiting() }

// All puts every node in the queue (a pool's update settings changed).
func (p policyNodes) All() {
	for _, n := range p.c.Nodes() {
		p.c.queue.Add(n.Name)
	}
}

func (p policyNodes) Memory() admission.Memory { return p.c.store.View() }

// PolicyOf is the RebootPolicy n is in ("" the flags'): the one its cycle is pinned to (inCycle: the
// caller has classified it), else the one it matches now (FleetView; a tie or no match is the flags').
// The admission index has it for every node it holds (reindexed on every policy change): the metrics
// ask for every node on every scrape, and matching 5,000 nodes against 50 selectors each time kept an
// idle operator at 8% of a core.
func (c *Controller) PolicyOf(n *corev1.Node, inCycle bool) string {
	if c.policies.Pools() == nil {
		return ""
	}
	if p, ok := c.index.Policy(n.Name); ok {
		return p
	}
	name, tied := c.policies.Of(n, inCycle)
	if tied != "" {
		return ""
	}
	return name
}
