package referee

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The keys the canary check reads (re-declared, as above).
const (
	KeyNewVersion = "flatcar-linux-update.v1.flatcar-linux.net/new-version" // annotation: what update_engine staged
	KeyVersion    = "flatcar-linux-update.v1.flatcar-linux.net/version"     // label: what the node runs
	// KeyRebootVersion: the version the operator granted the node's reboot for (update.slipway.dev).
	KeyRebootVersion = "update.slipway.dev/reboot-version"
)

// Canary is the kind of violation: more nodes in a cycle for a new OS version than its canaries
// before they proved it. Halt: a cycle for a version started while a failure of it was not resumed.
const (
	Canary = "canary"
	Halt   = "halt"
)

// Halted says that version v is held from now on until Resumed(v): a failure of it is recorded and a
// person has not resumed it (the scenario deleted the failed Node, which must lift nothing). A node
// starting a cycle for v meanwhile is a violation.
func (c *Checker) Halted(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.halted == nil {
		c.halted = map[string]bool{}
	}
	c.halted[v] = true
}

// Resumed ends Halted(v): call it before the person's resume is written.
func (c *Checker) Resumed(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.halted, v)
}

// canaryCheck is the state of the canary invariant (Checker.Canaries).
type canaryCheck struct {
	n    int
	bake time.Duration
	// known: versions a node ran when the checker first saw it (nothing to prove).
	known map[string]bool
	// finished: when the checker saw nodes come out of a cycle on the version they rebooted for
	// (zero: in a relist, moment unknown).
	finished map[string][]time.Time
	reported map[string]bool
}

// slack covers the operator's whole-second timestamps (its last-reboot-time, from which it counts
// the bake, is up to a second early) and scheduling jitter between two watch events.
const canarySlack = 1500 * time.Millisecond

// Canaries arms the canary invariant of --canary-nodes=n --canary-bake=bake: for an OS version no
// node ran when the checker first saw it, at most n nodes take it — are in a cycle for it
// (unavailable, having staged it) or came out of one running it — until n nodes came out of cycles
// running it and bake passed since the nth did. (A cycle that ended on the old version gives its
// place back: the operator may send another canary.) The
// checker's own view decides: a cycle is "for" the version the node's new-version named when it was
// first seen unavailable, and it finished when the node was seen available again with its version
// label equal to it. A machine the scenario lost (NeverBack) is not counted: a person released its
// version after looking. Finishes seen only in a relist are taken as proven at once (lenient: the
// checker must never report what did not happen).
func (c *Checker) Canaries(n int, bake time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canary = &canaryCheck{n: n, bake: bake, known: map[string]bool{}, finished: map[string][]time.Time{}, reported: map[string]bool{}}
}

// observeCanary follows one node's cycle version and judges the version it is in a cycle for.
func (c *Checker) observeCanary(s *nodeState, n *corev1.Node, prev *corev1.Node, fromWatch bool) {
	k := c.canary
	running := n.Labels[KeyVersion]
	busy := len(Unavailable(n)) > 0
	if prev == nil && !busy && running != "" {
		k.known[running] = true
	}
	switch {
	case !busy && s.cycleFor == "" && prev != nil && running != "" && prev.Labels[KeyVersion] != running:
		// Now on another version, yet never seen in a cycle for it: the whole cycle fell into a watch
		// gap (an API server restart; simulated cycles take under a second). It finished, moment unknown.
		k.finished[running] = append(k.finished[running], time.Time{})
	case busy && s.cycleFor == "":
		v := n.Annotations[KeyNewVersion]
		if rv := n.Annotations[KeyRebootVersion]; !fromWatch && rv != "" && n.Annotations[KeyRebootOK] == "true" {
			// First seen in a relist, past its grant: the start fell into the watch gap, and the node may
			// have staged its next version since it rebooted (its cycle not finished yet). The cycle is
			// for the version its reboot was granted for.
			v = rv
		}
		if v != "" && v != "0.0.0" && v != running {
			s.cycleFor = v
			if c.halted[v] && fromWatch {
				c.violate(Halt, n.Name, "a cycle for %s started while its failure was not resumed (the failed Node was deleted: that must lift nothing)", v)
			}
		}
	case !busy && s.cycleFor != "":
		if running == s.cycleFor {
			at := c.now()
			if !fromWatch {
				at = time.Time{}
			}
			k.finished[running] = append(k.finished[running], at)
		}
		s.cycleFor = ""
	}
	v := s.cycleFor
	if v == "" || k.known[v] || k.reported[v] || c.proven(v) {
		return
	}
	var in []string
	for name, o := range c.nodes {
		if o.cycleFor == v && !o.neverBack {
			in = append(in, name)
		}
	}
	if len(in)+len(k.finished[v]) <= k.n {
		return
	}
	sort.Strings(in)
	k.reported[v] = true
	c.violate(Canary, "", "%d nodes in a cycle for %s and %d finished on it before %d canaries proved it (bake %s): %s",
		len(in), v, len(k.finished[v]), k.n, k.bake, strings.Join(in, " "))
}

// proven: n nodes finished on v and the bake passed since the nth (less the slack).
func (c *Checker) proven(v string) bool {
	k := c.canary
	f := k.finished[v]
	if len(f) < k.n {
		return false
	}
	nth := f[k.n-1]
	return nth.IsZero() || !c.now().Before(nth.Add(k.bake-canarySlack))
}
