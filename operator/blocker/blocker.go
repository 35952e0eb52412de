// Package blocker holds the checks the update-operator runs before it admits a node into a reboot
// cycle: pods that must not be interrupted, Prometheus alerts that are firing, too few Ready nodes.
// Each check is one small type implementing admission.Blocker (kured's RebootBlocker, with a reason),
// in a file of its own. They fail closed: a check that cannot find out (API error, Prometheus unreachable,
// a panic) blocks, and says why in its reason. A cycle already in flight is never stopped by a blocker.
//
// The operator's controller owns the wiring: it calls the blockers, writes the reason on the waiting
// Node, emits the Event and counts slipway_operator_blocked_nodes{reason=Name()}. Name is therefore a
// small fixed vocabulary (the constants below) fit for a metric label, and reasons are short sentences
// fit for an annotation.
package blocker

import (
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/operator/admission"
)

// Names of the blockers: their kinds in admission's one vocabulary (the reason label of
// slipway_operator_blocked_nodes, the kind in blocked-by).
const (
	NamePodsOnNode    = string(admission.KindPodsOnNode)
	NamePodsInCluster = string(admission.KindPodsInCluster)
	NameAlerts        = string(admission.KindAlerts)
	NameMinReadyNodes = string(admission.KindMinReadyNodes)
)

const (
	maxNamesInReason   = 3   // pods or alerts named in a reason before "(+N more)"
	maxReasonLength    = 256 // a reason is an annotation value and an Event message: keep it short
	reasonEllipsisText = "..."
)

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
