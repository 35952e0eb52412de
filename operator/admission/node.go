package admission

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/stall"
)

// Node is what admission reads of one node, derived once per change of it (Of).
type Node struct {
	Group string // budget group (protocol.BudgetGroup)
	// AdmittedGroup is the group a node in its cycle was admitted in, when that differs from Group
	// (HasAdmittedGroup): it counts against both until the cycle ends and while it settles after it
	// (SettleIn), so that relabelling it or asking in another group mid-cycle or mid-settle frees no
	// slot in the group it started in.
	AdmittedGroup    string
	HasAdmittedGroup bool
	// Policy: the RebootPolicy the node belongs to ("" the default policy): the one pinned at its
	// admission while it is in its cycle, else the matching one of the highest priority (the
	// controller's policy.PoolSet). PolicyTied names the policies that tie for it ("" none): it is held.
	Policy, PolicyTied string
	// ControlPlane: labelled so now, or admitted as one in the cycle it is in.
	ControlPlane bool
	Counts       bool // against the budget (Counts)
	State        protocol.State
	Paused       bool
	// Settling says why a node that finished its cycle still holds its slot in every pool it is in
	// ("" it does not): --settle-time has not passed, or PodDisruptionBudgets its drain consumed have
	// not recovered (--settle-pdbs). Set by the controller (it depends on the clock and on PDBs).
	Settling string
	// AskedVersion is the OS version the node says its reboot is for (protocol.AskedVersion; "" none),
	// or, in a cycle past its grant, the version the grant pinned (reboot-version);
	// FailedVersion the version it once rebooted for and did not come back on (failed-version).
	AskedVersion, FailedVersion string
	// For canaries and per-version halts: Version is the OS version it runs (its version label),
	// FinishedAt when its last cycle finished (last-reboot-time; zero none), FailedAt when its
	// failed-version was recorded, StalledVersion the version it stalled rebooting for after its grant
	// ("" none) and StalledAt when the stall was seen (stalled-at; its grant's time when none).
	Version                         string
	FinishedAt, FailedAt, StalledAt time.Time
	StalledVersion                  string
	// UndrainableAt: when its last cycle was ended because its drain failed under
	// --drain-failure-policy=skip (zero: not so).
	UndrainableAt time.Time
	// AgentProtocol: the node protocol its agent speaks (protocol.AgentProtocolOf).
	AgentProtocol string
	// UID of the Node: the fleet record knows machines by it.
	UID string
	// WaitingSince: when a leader first held it waiting (waiting-since; zero none). A new leader's
	// index starts the node's wait there, so the queue keeps its order across a leader change (and
	// is the order the status view shows).
	WaitingSince time.Time
}

// Occupies reports whether the node takes a slot in its pools: it counts (Counts) or is settling.
func (e Node) Occupies() bool { return e.Counts || e.Settling != "" }

// Of derives a node's entry: groupLabel is --group-label, policy --stall-policy.
func Of(n *corev1.Node, groupLabel string, policy stall.SlotPolicy) Node {
	f := protocol.Observe(n, protocol.Hooks{}) // hooks change what happens next, not the state
	e := Node{Group: protocol.BudgetGroup(n, groupLabel), ControlPlane: protocol.IsControlPlane(n),
		Counts: Counts(f, policy), State: protocol.Classify(f), Paused: f.Paused,
		AskedVersion: protocol.AskedVersion(n), FailedVersion: n.Annotations[protocol.FailedVersion],
		Version: n.Labels[protocol.Version], FinishedAt: timeOf(n.Annotations[protocol.LastRebootTime]),
		WaitingSince: timeOf(n.Annotations[protocol.WaitingSince]), AgentProtocol: protocol.AgentProtocolOf(n.Annotations),
		UID: string(n.UID)}
	if v, ok := n.Annotations[protocol.Undrainable]; ok {
		mark, _, _ := strings.Cut(v, " ")
		e.UndrainableAt = timeOf(mark) // unreadable: zero, retried at once (only the operator writes it)
	}
	if e.FailedVersion != "" {
		mark, _, _ := strings.Cut(n.Annotations[protocol.RebootFailed], " ")
		e.FailedAt = timeOf(mark)
	}
	if v := n.Annotations[protocol.RebootVersion]; v != "" && f.Stalled != "" && f.Stalled != stall.Ungranted && stall.PostGrant(e.State) {
		// Dated when the operator saw it (an older operator wrote no stalled-at: its grant then).
		e.StalledVersion, e.StalledAt = v, timeOf(n.Annotations[protocol.StalledAt])
		if e.StalledAt.IsZero() {
			e.StalledAt = timeOf(n.Annotations[protocol.RebootOKTime])
		}
	}
	if e.State.InCycle() {
		// Once granted, its cycle is for the version pinned then (reboot-version, the operator's own
		// key), whatever it asks for now: a node back on V whose update_engine already staged V+1
		// (the cycle not finished: the operator was down or cut off) is still V's canary in flight,
		// not V+1's, or a second canary of V would be admitted beside it.
		if v := n.Annotations[protocol.RebootVersion]; v != "" {
			e.AskedVersion = v
		}
		// The pools it was admitted in hold it until its cycle ends (the operator's own keys: the
		// agent's policy lets no agent write them). A pin left on a node out of its cycle means nothing,
		// unless it settles (SettleIn).
		e.pinAdmitted(n)
	}
	return e
}

// pinAdmitted counts e against the pools n was admitted in (admitted-group, admitted-control-plane)
// besides its own.
func (e *Node) pinAdmitted(n *corev1.Node) {
	if g, ok := n.Annotations[protocol.AdmittedGroup]; ok && g != e.Group {
		e.AdmittedGroup, e.HasAdmittedGroup = g, true
	}
	if n.Annotations[protocol.AdmittedControlPlane] == protocol.True {
		e.ControlPlane = true
	}
}

// SettleIn pins a node settling after its cycle (e.Settling set) to the pools it was admitted in, as
// its cycle was: the settle slot is the slot of the cycle that just ended, so relabelling the node
// into another group just after it finished frees no slot of the group it rebooted in before the
// settle ends. The cycle's end keeps those pins for this; the next admission writes them anew.
func (e *Node) SettleIn(n *corev1.Node) {
	if e.Settling != "" && !e.State.InCycle() {
		e.pinAdmitted(n)
	}
}

// timeOf reads an RFC 3339 annotation value (zero when absent or unreadable).
func timeOf(v string) time.Time {
	t, _ := time.Parse(time.RFC3339, v)
	return t
}

// Groups are the budget groups that hold the node: its group and, mid-cycle, the one it was
// admitted in if that differs. A pause of either holds it.
func (e Node) Groups() []string {
	if e.HasAdmittedGroup {
		return []string{e.Group, e.AdmittedGroup}
	}
	return []string{e.Group}
}

// Counts is the one place that decides whether a node counts against the budget: it is in a cycle,
// NotReady or cordoned by anyone -- unless it stalled after its grant and the stall policy releases it.
func Counts(f protocol.Facts, policy stall.SlotPolicy) bool {
	if policy == stall.Release && f.Stalled != "" && f.Stalled != stall.Ungranted && stall.PostGrant(protocol.Classify(f)) {
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
	policyPoolPrefix = "policy/"
)

// GroupPool is the key of group g's pool.
func GroupPool(g string) string { return groupPoolPrefix + g }

// PolicyPool is the pool key of RebootPolicy name's own budget.
func PolicyPool(name string) string { return policyPoolPrefix + name }

// PoolKeys are the pools a node is in: the fleet's, its group's (and, mid-cycle, the group it was
// admitted in), and the control plane's if it is one.
func (e Node) PoolKeys() []string {
	keys := []string{FleetPool, GroupPool(e.Group)}
	if e.HasAdmittedGroup {
		keys = append(keys, GroupPool(e.AdmittedGroup))
	}
	if e.ControlPlane {
		keys = append(keys, ControlPlanePool)
	}
	if e.Policy != "" {
		keys = append(keys, PolicyPool(e.Policy))
	}
	return keys
}
