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
	Paused     bool // reboot-paused=true

	BeforeLabel  bool // before-reboot=true label
	AfterLabel   bool // after-reboot=true label
	DrainStarted bool // Slipway's drain-started annotation present

	Unschedulable   bool // spec.unschedulable
	SlipwayCordoned bool // Slipway's cordoned=true
	Ready           bool // NodeReady condition is True

	// BootChanged: the node reports a boot ID other than the one recorded when reboot-ok was granted.
	// When either side is unknown it is true: nothing to verify against (FLUO's own behaviour).
	BootChanged bool

	HasBeforeHooks, BeforeHooksDone bool
	HasAfterHooks, AfterHooksDone   bool

	// Set by the operator, not read off the Node.
	Admitted  bool // budget and reboot window let this node start a cycle now
	DrainDone bool // a drain of this node completed successfully since it entered Draining

	// Malformed lists keys whose values were neither "true" nor "false"; they read as false.
	Malformed []string
}

// Unavailable reports whether the node counts against the budget: it is in a cycle, NotReady, or
// cordoned (by Slipway or anyone else).
func (f Facts) Unavailable() bool { return Classify(f).InCycle() || !f.Ready || f.Unschedulable }

// Observe reads the Facts of a Node. It never fails: malformed values read as false and are listed.
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
	f.Paused = read(a, RebootPaused, "annotation")
	f.BeforeLabel = read(l, BeforeReboot, "label")
	f.AfterLabel = read(l, AfterReboot, "label")
	_, f.DrainStarted = a[DrainStarted]
	f.Unschedulable = n.Spec.Unschedulable
	f.SlipwayCordoned = IsTrue(a, Cordoned)
	f.Ready = NodeReady(n)

	recorded := a[RebootBootID]
	current := CurrentBootIDs(n)
	f.BootChanged = recorded == "" || len(current) == 0
	for _, id := range current {
		if id != recorded {
			f.BootChanged = true
		}
	}

	f.HasBeforeHooks, f.BeforeHooksDone = len(hooks.Before) > 0, allTrue(a, hooks.Before)
	f.HasAfterHooks, f.AfterHooksDone = len(hooks.After) > 0, allTrue(a, hooks.After)
	sort.Strings(bad)
	f.Malformed = bad
	return f
}

// CurrentBootIDs returns the boot IDs the node reports now: the kubelet's status.nodeInfo.bootID and
// the Slipway agent's boot-id annotation, whichever are set. During a reboot the kubelet's value can lag
// (the Node even stays Ready with the old boot ID for a while), so either one changing is proof.
func CurrentBootIDs(n *corev1.Node) []string {
	var ids []string
	if id := n.Status.NodeInfo.BootID; id != "" {
		ids = append(ids, id)
	}
	if id := n.Annotations[BootID]; id != "" {
		ids = append(ids, id)
	}
	return ids
}

// GrantBootID is the boot ID to record when reboot-ok is granted: the kubelet's, else the agent's.
func GrantBootID(n *corev1.Node) string {
	if id := n.Status.NodeInfo.BootID; id != "" {
		return id
	}
	return n.Annotations[BootID]
}

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
