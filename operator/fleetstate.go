package operator

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/operator/admission"
)

// failedReboot counts a node against --max-failed-reboots once its reboot-failed annotation is
// written: it stalled after its grant, or came back on its old version -- its own evidence only (a
// fleet-wide blocker firing when it is back holds the fleet; it says nothing about this node). The
// fleet record keeps it whatever happens to the Node later. When the budget is
// spent the fleet pauses itself (failures-paused); a person resumes it with resume --failures.
func (c *Controller) failedReboot(n *corev1.Node, why string, at time.Time) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.failed.WithLabelValues(failureReason(why)).Inc()
	}
	f := markFailure(n, why, at)
	if f.Reason == FailOldVersion {
		f.Version = n.Annotations[protocol.RebootVersion] // what failed-version is set to with this mark
	}
	c.store.Learn(func(r *fleetrecord.Record) bool { return r.AddFailure(f) })
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	failed := c.store.BudgetFailures()
	c.log.Info("failed reboot counted", "node", n.Name, "uid", n.UID, "why", why, "failed", len(failed), "max", c.cfg.MaxFailedReboots)
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "RebootFailed", "counts against --max-failed-reboots (%d of %d): %s", len(failed), c.cfg.MaxFailedReboots, why)
}

// proved records that a cycle this operator ran for version ended well, the only canary proof. While
// any policy runs canaries it writes the fleet record before it returns (the caller then ends the
// cycle): a leader killed in between leaves a successor that knows the canary finished. Otherwise the
// proof only feeds the status view's counts, and a fleet sync writes it within Config.FleetLazyEvery.
func (c *Controller) proved(ctx context.Context, n *corev1.Node, version string, at time.Time) error {
	p := fleetrecord.Proof{Node: n.Name, UID: string(n.UID), Version: version, At: at, BootID: protocol.CurrentBootID(n)}
	c.store.Learn(func(r *fleetrecord.Record) bool { return r.AddProof(p) })
	if c.cfg.Namespace == "" || !c.policies.Canaries() {
		return nil
	}
	_, err := c.store.WriteRecord(ctx, true)
	return err
}

// refinished moves a proof written before its cycle's last PATCH to the moment that PATCH landed (the
// later finish wins, fleetrecord.AddProof); the next fleet sync stores it.
func (c *Controller) refinished(n *corev1.Node, version string, at time.Time) {
	p := fleetrecord.Proof{Node: n.Name, UID: string(n.UID), Version: version, At: at, BootID: protocol.CurrentBootID(n)}
	c.store.Learn(func(r *fleetrecord.Record) bool { return r.AddProof(p) })
}

// Failure reasons: the reason label of slipway_operator_failed_reboots_total, the first word of a
// reboot-failed mark's why, and the fleet record's Failure.Reason.
const (
	FailStalled    = fleetrecord.ReasonStalled
	FailBlocker    = fleetrecord.ReasonBlocker
	FailOldVersion = fleetrecord.ReasonOldVersion
)

// failureReason is the metric's reason for a reboot-failed why.
func failureReason(why string) string {
	switch {
	case strings.HasPrefix(why, FailStalled):
		return FailStalled
	case strings.HasPrefix(why, FailOldVersion):
		return FailOldVersion
	}
	return FailBlocker
}

// failureMark is the reboot-failed annotation's value for a failure at now.
func failureMark(now time.Time, why string) string {
	return truncate(now.UTC().Format(time.RFC3339)+" "+why, 512)
}

// markFailure is the fleet record's entry for a reboot-failed mark written at with why: the same
// whether this leader decided it or a later one reads it off the Node, so the two are one entry.
func markFailure(n *corev1.Node, why string, at time.Time) fleetrecord.Failure {
	return fleetrecord.Failure{Node: n.Name, UID: string(n.UID), Reason: failureReason(why), At: at, Why: why, Budget: true}
}

// nodeFailures are the failures a Node's marks record: its reboot-failed mark (with the version of
// its failed-version when it came back on the old one), and a stall after its grant for a version.
// Failures read off Nodes only ever add to the record: a mark removed or a Node deleted lifts nothing.
func nodeFailures(n *corev1.Node, e admission.Node) []fleetrecord.Failure {
	var out []fleetrecord.Failure
	if v, ok := n.Annotations[protocol.RebootFailed]; ok {
		mark, why, _ := strings.Cut(v, " ")
		at, err := time.Parse(time.RFC3339, mark)
		if err != nil {
			at = n.CreationTimestamp.Time // a mark nobody can date still counts (only the operator writes it)
		}
		if !at.IsZero() {
			f := markFailure(n, why, at)
			if f.Reason == FailOldVersion {
				f.Version = n.Annotations[protocol.FailedVersion]
			}
			out = append(out, f)
		}
	}
	if e.StalledVersion != "" && !e.StalledAt.IsZero() {
		out = append(out, fleetrecord.Failure{Node: n.Name, UID: string(n.UID), Reason: FailStalled, Version: e.StalledVersion, At: e.StalledAt, Why: "stalled after its grant for " + e.StalledVersion})
	}
	return out
}

// noteNodeFailures adds what n's marks record to the fleet's memory.
func (c *Controller) noteNodeFailures(n *corev1.Node, e admission.Node) {
	fs := nodeFailures(n, e)
	if len(fs) == 0 {
		return
	}
	c.store.Learn(func(r *fleetrecord.Record) bool {
		changed := false
		for _, f := range fs {
			changed = r.AddFailure(f) || changed
		}
		return changed
	})
}

// statusOf is what the published fleet Status says of the operator cfg wires: who leads and its
// version (fleetstore adds what it keeps). Its settings are not in it: they are the policies it
// publishes (fleetswitch.KeyPolicies).
func statusOf(cfg Config) fleetswitch.Status {
	return fleetswitch.Status{Leader: cfg.Identity, Version: version.String()}
}

// StartPausedReason is the pause reason --start-paused writes.
const StartPausedReason = "installed paused (--start-paused): check `kubectl slipway status`, then `kubectl slipway resume`"
