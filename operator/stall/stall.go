// Package stall says when a node has been too long in one stage of its reboot cycle, why, and what a
// person should look at. It is pure: the operator's controller writes the answer on the Node (the
// stalled annotation), as an Event, a metric and a notification; the status view prints the hints.
package stall

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// SlotPolicy says what a stalled node does to the budget.
type SlotPolicy string

const (
	// Hold keeps counting a stalled node against the budget (safe: a node that did not come back is
	// unavailable, and the next one should not go down because of it).
	Hold SlotPolicy = "hold"
	// Release stops counting a node against the budget once it stalled after its reboot was granted,
	// so the roll-out goes on without it. Before the grant a node is never released: it is cordoned
	// and partly drained, and it holds its slot until someone looks.
	Release SlotPolicy = "release"
)

// ParsePolicy reads --stall-policy.
func ParsePolicy(s string) (SlotPolicy, error) {
	switch p := SlotPolicy(s); p {
	case Hold, Release:
		return p, nil
	}
	return "", fmt.Errorf("stall policy %q: want %q or %q", s, Hold, Release)
}

// Why a node stalled: the value of update.slipway.dev/stalled and the reason label of
// slipway_operator_stalled_nodes.
const (
	HooksPending  = "hooks-pending"  // before- or after-reboot hook annotations not all true in time
	DrainFailing  = "drain-failing"  // no drain succeeded in time (see drain-error)
	RebootTimeout = "reboot-timeout" // granted, and the kubelet still reports the boot it was granted in
	AgentSilent   = "agent-silent"   // rebooted, but the agent has not spoken in the new boot
	NotReady      = "not-ready"      // rebooted, but the node is not Ready
	Paused        = "paused"         // reboot-paused holds a node in the middle of its cycle
	// Ungranted: the agent says it is rebooting (reboot-in-progress) though no reboot-ok was granted.
	// Reported at once: nothing Slipway did started it, so there is no stage to time, and the slot it
	// holds (it may be down) would otherwise be held unseen for good.
	Ungranted = "ungranted"
)

// Reasons lists every reason, for metrics that report zeros too.
var Reasons = []string{HooksPending, DrainFailing, RebootTimeout, AgentSilent, NotReady, Paused, Ungranted}

// Of says why the node is stalled ("" when it is not) and, when it is not yet, at what time it will be
// if nothing changes (zero: never, e.g. not in a cycle).
func Of(state protocol.State, f protocol.Facts, n *corev1.Node, now time.Time, timeout time.Duration) (string, time.Time) {
	if timeout <= 0 || !state.InCycle() {
		return "", time.Time{}
	}
	if state == protocol.Rebooting && !f.OK {
		return Ungranted, now
	}
	start := protocol.StageSince(state, n)
	if start.IsZero() {
		return "", time.Time{}
	}
	if !f.Paused && f.Ready && f.BootChanged && (state == protocol.Rebooted || state == protocol.AfterHooks && f.AfterHooksDone) {
		return "", time.Time{} // back and Ready: it finishes now
	}
	at := start.Add(timeout)
	if now.Before(at) {
		return "", at
	}
	switch {
	case f.Paused:
		return Paused, at
	case state == protocol.BeforeHooks:
		return HooksPending, at
	case state == protocol.Draining:
		return DrainFailing, at
	case state == protocol.Rebooting && f.BootVerified && !f.AgentCurrent:
		// The kubelet reports a new boot; the agent has not reset its flags in it.
		return AgentSilent, at
	case state == protocol.Rebooting, state == protocol.Rebooted && !f.BootChanged:
		return RebootTimeout, at
	case state == protocol.AfterHooks && !f.AfterHooksDone:
		return HooksPending, at
	default:
		return NotReady, at
	}
}

// PostGrant: the node was told it may reboot; it may be down now. A stall here may release the node's
// slot (Release) and counts against --max-failed-reboots -- except Ungranted, which no grant started:
// it keeps its slot and is no failed reboot of Slipway's.
func PostGrant(s protocol.State) bool {
	return s == protocol.Rebooting || s == protocol.Rebooted || s == protocol.AfterHooks
}

// Hint tells a person what to look at for a stall reason (n: the node, for its drain error).
func Hint(reason string, n *corev1.Node) string {
	switch reason {
	case HooksPending:
		return "hook annotations not all \"true\" yet; check the hooks' DaemonSets"
	case DrainFailing:
		if e := n.Annotations[protocol.DrainError]; e != "" {
			return "drain keeps failing: " + e
		}
		return "drain has not finished; check PodDisruptionBudgets and pods that do not terminate"
	case RebootTimeout:
		return "reboot-ok granted but the kubelet still reports the boot it was granted in; check the node's console and its update-agent (reboot-error annotation)"
	case AgentSilent:
		return "the node is in a new boot but its update-agent has not reported in it; check the agent pod (image pull, crash loop)"
	case NotReady:
		return "rebooted but not Ready; check the kubelet"
	case Paused:
		return "reboot-paused holds the node in the middle of its cycle; remove it to go on"
	case Ungranted:
		return "reboot-in-progress is true but no reboot-ok was granted: something else rebooted it (locksmithd, a person, an agent of another coordinator) or its agent is wrong; it keeps its budget slot until the agent resets reboot-in-progress"
	}
	return ""
}
