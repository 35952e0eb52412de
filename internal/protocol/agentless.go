package protocol

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NoAgentAfter is how long a node must have been Ready without any agent's key before it counts as
// having no agent (its update-agent pod starts once the node is Ready).
const NoAgentAfter = 10 * time.Minute

// agentKeys are the keys only an agent (Slipway's or FLUO's) or the FleetLock server, which speaks for
// nodes without one, writes (Owners).
var agentKeys = func() []string {
	var out []string
	for k, w := range Owners {
		if w == WriterAgent || w == WriterFLUO || w == WriterFleetLock {
			out = append(out, k)
		}
	}
	return out
}()

// NoAgent: none of the agents' keys is on the node, as annotation or label, though it has been Ready
// for NoAgentAfter (since its Ready condition's last transition; unknown counts as long enough). Every
// agent writes reboot-needed (and more) on its first report, so such a node never asks to reboot. Left
// out: a node that is not Ready (that is what holds its agent back), and one enrolled in FleetLock,
// whose Zincati speaks only when it asks to reboot. f is Observe(n).
func NoAgent(n *corev1.Node, f Facts, now time.Time) bool {
	if !f.Ready || n.Labels[FleetLockEnrolled] == True {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() && now.Sub(c.LastTransitionTime.Time) < NoAgentAfter {
			return false
		}
	}
	for _, k := range agentKeys {
		if _, ok := n.Annotations[k]; ok {
			return false
		}
		if _, ok := n.Labels[k]; ok {
			return false
		}
	}
	return true
}
