package protocol

import corev1 "k8s.io/api/core/v1"

// The node's side of the cycle: what the one who reboots the machine does next. Slipway's agent
// plays it for Flatcar nodes, the FleetLock server for Zincati nodes; both read this table, so "what
// does the node side do next" has one answer, and both write the same keys for the same step.

// NodeFacts is what the node side knows when it decides.
type NodeFacts struct {
	// Needed: this machine needs a reboot (update_engine, /run/reboot-required, a reboot-needed=true
	// someone else wrote, or Zincati asking through FleetLock).
	Needed bool
	// OK: reboot-ok=true.
	OK bool
	// GrantedThisBoot: the grant names the boot the machine is in now (see GrantedThisBoot). A
	// reboot-ok recorded for an earlier boot is a leftover of a finished reboot: never a second one.
	GrantedThisBoot bool
	// Paused: reboot-paused is set to anything but "false" (IsPaused).
	Paused bool
}

// NodeState is where the node side is.
type NodeState string

const (
	NodeIdle       NodeState = "idle"        // nothing needed
	NodeHeld       NodeState = "held"        // needed, but an admin paused the node
	NodeAsking     NodeState = "asking"      // needed; waiting for reboot-ok
	NodeStaleGrant NodeState = "stale-grant" // reboot-ok is left over from an earlier boot; waiting for the operator to clear it
	NodeRebooting  NodeState = "rebooting"   // granted in this boot: reboot
)

// NodeAction is what the node side does.
type NodeAction string

const (
	// NodeReport: say no reboot is needed (reboot-needed=false).
	NodeReport NodeAction = "report"
	// NodeAsk: say a reboot is needed (reboot-needed=true) and wait.
	NodeAsk NodeAction = "ask"
	// NodeReboot: reboot-in-progress=true, then reboot (the agent calls logind; FleetLock answers 200).
	NodeReboot NodeAction = "reboot"
)

// NodeRow is one line of the node-side table.
type NodeRow struct {
	When string
	If   func(NodeFacts) bool
	Do   NodeAction
	Is   NodeState
}

// NodeTable is the node side of the cycle; the first row whose condition holds decides.
var NodeTable = []NodeRow{
	{"no reboot needed", func(f NodeFacts) bool { return !f.Needed }, NodeReport, NodeIdle},
	{"reboot-paused set", func(f NodeFacts) bool { return f.Paused }, NodeAsk, NodeHeld},
	{"no reboot-ok", func(f NodeFacts) bool { return !f.OK }, NodeAsk, NodeAsking},
	{"reboot-ok granted in an earlier boot", func(f NodeFacts) bool { return !f.GrantedThisBoot }, NodeAsk, NodeStaleGrant},
	{"reboot-ok granted in this boot", func(NodeFacts) bool { return true }, NodeReboot, NodeRebooting},
}

// NodeDecide returns the row of the node-side table that applies.
func NodeDecide(f NodeFacts) NodeRow {
	for _, r := range NodeTable {
		if r.If(f) {
			return r
		}
	}
	return NodeTable[len(NodeTable)-1] // unreachable: the last row always applies
}

// Effect is one key the node side writes: an annotation, or an annotation and the label of the same
// name (reboot-needed is both, as in FLUO).
type Effect struct {
	Key   string
	Value string
	Label bool // also set the label
}

// NodeEffects says what each node-side action writes. Resetting after a reboot (the agent's first
// start in a new boot, Zincati's steady-state) is NodeReport plus NodeBack.
var NodeEffects = map[NodeAction][]Effect{
	NodeReport: {{RebootNeeded, False, true}},
	NodeAsk:    {{RebootNeeded, True, true}},
	NodeReboot: {{RebootNeeded, True, true}, {RebootInProgress, True, false}},
}

// NodeBack is what the node side writes when the machine is up and not rebooting: reboot-in-progress
// goes back to false, which (with the boot ID) tells the operator the node came back.
var NodeBack = []Effect{{RebootInProgress, False, false}}

// NodeWrites is everything the node side's keys say in its state: rebooting (NodeReboot), else asking
// (NodeAsk) or not (NodeReport), the last two with NodeBack, since the machine is up. A new slice.
func NodeWrites(inProgress, needed bool) []Effect {
	switch {
	case inProgress:
		return append([]Effect(nil), NodeEffects[NodeReboot]...)
	case needed:
		return append(append([]Effect(nil), NodeEffects[NodeAsk]...), NodeBack...)
	}
	return append(append([]Effect(nil), NodeEffects[NodeReport]...), NodeBack...)
}

// GrantedThisBoot reports whether n's reboot-ok was granted in the boot bootID. The operator records
// the boot it granted in (reboot-boot-id). Without a record (FLUO's operator writes none) the caller's
// fallback decides: the agent accepts a grant only after it saw reboot-ok not true in this boot, or
// if it had already started rebooting in this boot.
func GrantedThisBoot(n *corev1.Node, bootID string, fallback bool) bool {
	if rec, ok := n.Annotations[RebootBootID]; ok && rec != "" {
		return bootID != "" && rec == bootID
	}
	return fallback
}
