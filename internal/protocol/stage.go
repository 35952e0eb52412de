package protocol

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// StageSince is when the node entered the stage of its cycle it is in, as the Node itself records it:
// admission (cycle-started) for the before-reboot hooks, drain-started for the drain, the grant
// (reboot-ok-time) for everything after it. Zero when the state is not in a cycle or the Node does not
// say (FLUO's operator writes none of these; a malformed time reads as unknown). The operator's stall
// timer and the status view both read it, so "stalled after 30 min" and "draining since 31m" agree.
func StageSince(state State, n *corev1.Node) time.Time {
	key := ""
	switch state {
	case BeforeHooks:
		key = CycleStarted
	case Draining:
		key = DrainStarted
	case Rebooting, Rebooted, AfterHooks:
		key = RebootOKTime
	default:
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, n.Annotations[key])
	if err != nil {
		return time.Time{}
	}
	return t
}
