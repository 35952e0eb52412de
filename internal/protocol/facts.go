package protocol

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Hooks are the before- and after-reboot annotation names an operator was configured with. A node
// waiting in a hook state moves on only when every one of them is "true".
type Hooks struct {
	Before []string
	After  []string
}

// Facts is everything the cycle table may look at for one node: read off the Node alone (so any
// operator instance, after any restart, derives the same state) plus the operator's admission and
// drain outcome.
type Facts struct {
	Needed     bool // reboot-needed=true
	InProgress bool // reboot-in-progress=true
	OK         bool // reboot-ok=true
	Paused     bool // reboot-paused present and not "false" (fail closed, see IsPaused)

	BeforeLabel  bool // before-reboot=true label
	AfterLabel   bool // after-reboot=true label
	DrainStarted bool // Slipway's drain-started annotation present

	Unschedulable   bool // spec.unschedulable
	SlipwayCordoned bool // Slipway's cordoned=true
	FLUOCordoned    bool // FLUO's agent-made-unschedulable=true: FLUO's agent cordoned it
	Ready           bool // NodeReady condition is True

	// BootChanged: the node's boot ID (the kubelet's, else the agent's, see CurrentBootID) differs from
	// the one recorded when reboot-ok was granted. When either side is unknown it is true: there is
	// nothing to verify against (FLUO's own behaviour). BootVerified is the strict form: both known
	// and different.
	BootChanged  bool
	BootVerified bool
	// AgentBootChanged: the agent's boot-id annotation differs from the recorded one while the kubelet
	// still reports the old boot. Not proof (the kubelet is), but a reason to wait rather than abort.
	AgentBootChanged bool
	// AgentCurrent: Slipway's agent has written in the boot the node reports now, so its reboot-needed
	// is about this boot, not a leftover of the last one.
	AgentCurrent bool

	HasBeforeHooks, BeforeHooksDone bool
	HasAfterHooks, AfterHooksDone   bool

	// OldVersion: the node was granted its reboot for a new OS version (reboot-version) and its version
	// label says another one (the update rolled back, or the agent is not back on the new version).
	OldVersion bool

	// Stalled is the operator's stalled annotation ("" when not stalled).
	Stalled string

	// Set by the operator, not read off the Node.
	Admitted  bool // budget and reboot window let this node start a cycle now
	DrainDone bool // a drain of this node completed successfully since it entered Draining
	// Undrainable: the drain failed and --drain-failure-policy=skip ends the cycle instead of retrying.
	Undrainable bool
	// VolumesAttached: VolumeAttachments still name the node after its drain (--wait-for-volume-detach);
	// rebooting now would outrun the CSI detach (Multi-Attach errors where the pods went).
	VolumesAttached bool
	// DrainDelayed: less than kured's --drain-delay has passed since the drain started (no eviction yet);
	// RebootDelayed: less than --reboot-delay has passed since the drain finished.
	DrainDelayed, RebootDelayed bool

	// Malformed lists keys whose values were neither "true" nor "false"; they read as false, except
	// reboot-paused, which reads as paused.
	Malformed []string
}

// Unavailable reports whether the node counts against the budget: it is in a cycle, NotReady, or
// cordoned (by Slipway or anyone else).
func (f Facts) Unavailable() bool { return Classify(f).InCycle() || !f.Ready || f.Unschedulable }

// Observe reads the Facts of a Node. It never fails: malformed values read as false (reboot-paused:
// as paused) and are listed.
func Observe(n *corev1.Node, hooks Hooks) Facts {
	a, l := n.Annotations, n.Labels
	var f Facts
	var bad []string
	read := func(m map[string]string, key, kind string) bool {
		v, _, valid := ParseBool(m, key)
		if !valid {
			bad = append(bad, fmt.Sprintf("%s %s=%q", kind, key, m[key]))
		}
		return v
	}
	f.Needed = read(a, RebootNeeded, "annotation")
	f.InProgress = read(a, RebootInProgress, "annotation")
	f.OK = read(a, RebootOK, "annotation")
	read(a, RebootPaused, "annotation")
	f.Paused = IsPaused(a)
	f.FLUOCordoned = read(a, AgentMadeUnschedulable, "annotation")
	f.BeforeLabel = read(l, BeforeReboot, "label")
	f.AfterLabel = read(l, AfterReboot, "label")
	_, f.DrainStarted = a[DrainStarted]
	f.Unschedulable = n.Spec.Unschedulable
	f.SlipwayCordoned = IsTrue(a, Cordoned)
	f.Ready = NodeReady(n)
	f.Stalled = a[Stalled]
	if want := a[RebootVersion]; want != "" {
		f.OldVersion = NormalVersion(l[Version]) != NormalVersion(want)
	}

	recorded, current, agent := a[RebootBootID], CurrentBootID(n), a[BootID]
	f.BootVerified = recorded != "" && current != "" && current != recorded
	f.BootChanged = recorded == "" || current == "" || f.BootVerified
	f.AgentBootChanged = recorded != "" && agent != "" && agent != recorded
	f.AgentCurrent = agent != "" && agent == current

	f.HasBeforeHooks, f.BeforeHooksDone = len(hooks.Before) > 0, allTrue(a, hooks.Before)
	f.HasAfterHooks, f.AfterHooksDone = len(hooks.After) > 0, allTrue(a, hooks.After)
	sort.Strings(bad)
	f.Malformed = bad
	return f
}

// CurrentBootID is the boot the node is in, as far as the API server can prove: the kubelet's
// status.nodeInfo.bootID, which only the node's own kubelet may write (NodeRestriction). Only when the
// kubelet reports none is the agent's boot-id annotation used. During a reboot the kubelet's value
// lags (the Node even stays Ready with the old boot ID for a while); the cycle waits for it.
func CurrentBootID(n *corev1.Node) string {
	if id := n.Status.NodeInfo.BootID; id != "" {
		return id
	}
	return n.Annotations[BootID]
}

// AskedVersion is the OS version a node says its reboot is for: its new-version, when that is a
// version other than the one it runs ("" when it says none: FLUO's agent without one, update_engine's
// "0.0.0" placeholder, a hand-set reboot-needed), in its normal form (NormalVersion): what
// reboot-version, failed-version and the fleet record keep.
func AskedVersion(n *corev1.Node) string {
	v := NormalVersion(n.Annotations[NewVersion])
	if v == "" || v == "0.0.0" || v == NormalVersion(n.Labels[Version]) {
		return ""
	}
	return v
}

// GrantBootID is the boot ID to record when reboot-ok is granted: the one the node is in now. The
// grant is valid for that boot only (see NodeFacts.GrantedThisBoot).
func GrantBootID(n *corev1.Node) string { return CurrentBootID(n) }

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func allTrue(m map[string]string, keys []string) bool {
	for _, k := range keys {
		if m[k] != True {
			return false
		}
	}
	return true
}
