package admission

import (
	"strings"
	"time"
)

// Kind says what holds a waiting node back. It is the text before the first colon of the node's
// update.slipway.dev/blocked-by annotation, the reason label of slipway_operator_blocked_nodes, the
// kind of a `blocked` notification and the status view's grouping.
type Kind string

const (
	KindWindow Kind = "window" // outside the reboot windows, or in an exclusion
	KindPaused Kind = "paused" // the fleet or the node's group is paused
	KindOrder  Kind = "order"  // --control-plane-order keeps it back
	KindBudget Kind = "budget" // a budget pool it is in is full
	// KindSettling: a pool it is in is full only because nodes that finished their cycle are settling
	// (--settle-time, --settle-pdbs).
	KindSettling Kind = "settling"
	// The blockers' names (package blocker): each blocker's Name() is its kind.
	KindPodsOnNode    Kind = "pods-on-node"
	KindPodsInCluster Kind = "pods-in-cluster"
	KindAlerts        Kind = "prometheus-alerts"
	KindMinReadyNodes Kind = "min-ready-nodes"
	KindHealth        Kind = "health" // a --health-check does not hold
	// KindSteeringLabel: a --pre-reboot-node-labels entry would change or remove a label on the node
	// that Slipway did not set (operator/steer): it neither clobbers it nor steers without it.
	KindSteeringLabel Kind = "steering-label"
	// KindFailedVersion: the node asks for the OS version it once rebooted for and did not come back on.
	KindFailedVersion Kind = "failed-version"
	// KindCanary: the node asks for an OS version whose canaries have not yet proven it
	// (--canary-nodes, --canary-bake); KindVersionHalted: too many reboots for that version failed
	// (--max-failed-per-version).
	KindCanary        Kind = "canary"
	KindVersionHalted Kind = "version-halted"
	// KindVersion: the OS version it staged is one its policy does not let it reboot into (yet):
	// --deny-version, --allow-version, --version-min-age, a RebootPolicy's versions.
	KindVersion Kind = "version"
	// KindProof: the OS version it staged lacks the proof its policy requires of another cluster
	// (versions.requireProof: cycles finished there, proven there, soaked); KindProofSource: that
	// cluster's proof cannot be read (unreachable, refused, a bad answer): held, fail closed.
	KindProof       Kind = "proof"
	KindProofSource Kind = "proof-source"
	// KindUndrainable: its last drain failed under --drain-failure-policy=skip and --undrainable-retry
	// has not passed.
	KindUndrainable Kind = "undrainable"
	// KindAgentVersion: its agent speaks a node protocol this operator does not (an agent upgraded
	// before the operator): held rather than guessed at.
	KindAgentVersion Kind = "agent-version"
	// KindPolicy: its RebootPolicy is not clear: two of the same priority match it, or its spec did not
	// compile.
	KindPolicy Kind = "policy"
	// KindGone: the node vanished while its admission was decided (never written anywhere).
	KindGone Kind = "gone"
)

// Kinds lists every kind a controller reports, for metrics that report zeros too.
var Kinds = []Kind{KindPolicy, KindWindow, KindPaused, KindAgentVersion, KindFailedVersion, KindUndrainable, KindVersionHalted, KindVersion, KindProof, KindProofSource, KindOrder, KindCanary, KindBudget, KindSettling, KindPodsOnNode, KindPodsInCluster, KindAlerts, KindMinReadyNodes, KindHealth, KindSteeringLabel}

// QuietKinds are the plan working (budget, window, order, a version its policy holds back): a
// Normal `Waiting` Event and never a `blocked` notification. Every other kind is something a person may want to look at: a Warning
// `Blocked` Event, and a notification after --notify-blocked-after.
var QuietKinds = []Kind{KindBudget, KindSettling, KindCanary, KindWindow, KindOrder, KindVersion, KindProof}

// Quiet reports whether k is one of QuietKinds.
func (k Kind) Quiet() bool {
	for _, q := range QuietKinds {
		if k == q {
			return true
		}
	}
	return false
}

// KindOf is the kind of a blocked-by value ("<kind>: <reason>").
func KindOf(why string) Kind {
	k, _, _ := strings.Cut(why, ":")
	return Kind(strings.TrimSpace(k))
}

// Verdict is one gate's answer for one node: Kind "" lets it pass; otherwise it is held with Reason,
// and Retry > 0 says when only time can change the answer (0: a change of some object will, and the
// controller looks again then).
type Verdict struct {
	Kind   Kind
	Reason string
	Retry  time.Duration
}

// Pass lets the node through a gate.
var Pass = Verdict{}

// Held builds a verdict that holds the node.
func Held(k Kind, reason string, retry time.Duration) Verdict {
	return Verdict{Kind: k, Reason: reason, Retry: retry}
}

// Passes reports whether the gate let the node through.
func (v Verdict) Passes() bool { return v.Kind == "" }

// String is the blocked-by value: "<kind>: <reason>" ("" when it passes).
func (v Verdict) String() string {
	if v.Passes() {
		return ""
	}
	return string(v.Kind) + ": " + v.Reason
}
