package operator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// StallPolicy says what a stalled node does to the budget.
type StallPolicy string

const (
	// StallHold keeps counting a stalled node against the budget (safe: a node that did not come back
	// is unavailable, and the next one should not go down because of it).
	StallHold StallPolicy = "hold"
	// StallRelease stops counting a node against the budget once it stalled after its reboot was
	// granted, so the roll-out goes on without it. Before the grant a node is never released: it is
	// cordoned and partly drained, and it holds its slot until someone looks.
	StallRelease StallPolicy = "release"
)

// ParseStallPolicy reads --stall-policy.
func ParseStallPolicy(s string) (StallPolicy, error) {
	switch p := StallPolicy(s); p {
	case StallHold, StallRelease:
		return p, nil
	}
	return "", fmt.Errorf("stall policy %q: want %q or %q", s, StallHold, StallRelease)
}

// Why a node stalled: the value of update.slipway.dev/stalled and the reason label of
// slipway_operator_stalled_nodes.
const (
	StallHooksPending  = "hooks-pending"  // before- or after-reboot hook annotations not all true in time
	StallDrainFailing  = "drain-failing"  // no drain succeeded in time (see drain-error)
	StallRebootTimeout = "reboot-timeout" // granted, and the kubelet still reports the boot it was granted in
	StallAgentSilent   = "agent-silent"   // rebooted, but the agent has not spoken in the new boot
	StallNotReady      = "not-ready"      // rebooted, but the node is not Ready
	StallPaused        = "paused"         // reboot-paused holds a node in the middle of its cycle
)

// StallReasons lists every reason, for metrics that report zeros too.
var StallReasons = []string{StallHooksPending, StallDrainFailing, StallRebootTimeout, StallAgentSilent, StallNotReady, StallPaused}

// stageStart is protocol.StageSince, under the name the controller calls it by.
func stageStart(state protocol.State, n *corev1.Node) time.Time { return protocol.StageSince(state, n) }

// stallOf says why the node is stalled ("" when it is not) and, when it is not yet, at what time it
// will be if nothing changes (zero: never, e.g. not in a cycle).
func stallOf(state protocol.State, f protocol.Facts, n *corev1.Node, now time.Time, timeout time.Duration) (string, time.Time) {
	if timeout <= 0 || !state.InCycle() {
		return "", time.Time{}
	}
	start := stageStart(state, n)
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
		return StallPaused, at
	case state == protocol.BeforeHooks:
		return StallHooksPending, at
	case state == protocol.Draining:
		return StallDrainFailing, at
	case state == protocol.Rebooting && f.BootVerified && !f.AgentCurrent:
		// The kubelet reports a new boot; the agent has not reset its flags in it.
		return StallAgentSilent, at
	case state == protocol.Rebooting, state == protocol.Rebooted && !f.BootChanged:
		return StallRebootTimeout, at
	case state == protocol.AfterHooks && !f.AfterHooksDone:
		return StallHooksPending, at
	default:
		return StallNotReady, at
	}
}

// postGrant: the node was told it may reboot; it may be down now.
func postGrant(s protocol.State) bool {
	return s == protocol.Rebooting || s == protocol.Rebooted || s == protocol.AfterHooks
}
