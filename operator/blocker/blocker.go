// Package blocker holds the checks the update-operator runs before it admits a node into a reboot
// cycle: pods that must not be interrupted, Prometheus alerts that are firing, too few Ready nodes.
// Each check is one small type behind one small interface (kured's RebootBlocker, with a reason), in a
// file of its own. They fail closed: a check that cannot find out (API error, Prometheus unreachable,
// a panic) blocks, and says why in its reason. A cycle already in flight is never stopped by a blocker.
//
// The operator's controller owns the wiring: it calls the blockers, writes the reason on the waiting
// Node, emits the Event and counts slipway_operator_blocked_nodes{reason=Name()}. Name is therefore a
// small fixed vocabulary (the constants below) fit for a metric label, and reasons are short sentences
// fit for an annotation.
package blocker

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Blocker decides whether node may start a reboot cycle now.
type Blocker interface {
	// Name is the blocker's kind, one of the constants below; it is the metric's reason label.
	Name() string
	// Check reports whether node must wait, and why in a short sentence. It never returns an error:
	// a failure to find out blocks, with the failure as the reason.
	Check(ctx context.Context, node *corev1.Node) (blocked bool, reason string)
}

// FleetWide is implemented by blockers whose answer does not depend on the node: the controller may
// call Check once (node may then be nil) and apply the answer to every waiting node.
type FleetWide interface {
	FleetWide() bool
}

// Names of the blockers, used as the reason label of slipway_operator_blocked_nodes.
const (
	NamePodsOnNode    = "pods-on-node"
	NamePodsInCluster = "pods-in-cluster"
	NameAlerts        = "prometheus-alerts"
	NameMinReadyNodes = "min-ready-nodes"
)

const (
	maxNamesInReason   = 3   // pods or alerts named in a reason before "(+N more)"
	maxReasonLength    = 256 // a reason is an annotation value and an Event message: keep it short
	reasonEllipsisText = "..."
)

// IsFleetWide reports whether b's answer is the same for every node.
func IsFleetWide(b Blocker) bool {
	f, ok := b.(FleetWide)
	return ok && f.FleetWide()
}

// Result is one blocker's verdict against a node.
type Result struct {
	Name   string // the blocker's Name()
	Reason string
}

// String is "name: reason", the form meant for the Node annotation and the Event.
func (r Result) String() string { return r.Name + ": " + r.Reason }

// CheckAll runs every blocker against node and returns those that block, in the order given. A
// blocker that panics blocks too (fail closed); the panic is its reason.
func CheckAll(ctx context.Context, blockers []Blocker, node *corev1.Node) []Result {
	var out []Result
	for _, b := range blockers {
		if blocked, reason := safeCheck(ctx, b, node); blocked {
			out = append(out, Result{Name: b.Name(), Reason: reason})
		}
	}
	return out
}

// Split separates the blockers whose answer holds for the whole fleet from those asked per node.
func Split(blockers []Blocker) (fleetWide, perNode []Blocker) {
	for _, b := range blockers {
		if IsFleetWide(b) {
			fleetWide = append(fleetWide, b)
		} else {
			perNode = append(perNode, b)
		}
	}
	return fleetWide, perNode
}

func safeCheck(ctx context.Context, b Blocker, node *corev1.Node) (blocked bool, reason string) {
	defer func() {
		if p := recover(); p != nil {
			blocked, reason = true, shorten(fmt.Sprintf("check failed: panic: %v", p))
		}
	}()
	return b.Check(ctx, node)
}

// Func makes a Blocker of a function: for tests and for one-off checks.
type Func struct {
	N     string
	Fleet bool
	F     func(ctx context.Context, node *corev1.Node) (bool, string)
}

func (f Func) Name() string    { return f.N }
func (f Func) FleetWide() bool { return f.Fleet }
func (f Func) Check(ctx context.Context, node *corev1.Node) (bool, string) {
	return f.F(ctx, node)
}

// nameList renders names as "a, b, c (+2 more)".
func nameList(names []string) string {
	if len(names) <= maxNamesInReason {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(names[:maxNamesInReason], ", "), len(names)-maxNamesInReason)
}

// shorten cuts a reason to maxReasonLength bytes without splitting a UTF-8 sequence.
func shorten(s string) string {
	if len(s) <= maxReasonLength {
		return s
	}
	cut := maxReasonLength - len(reasonEllipsisText)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + reasonEllipsisText
}
