package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/steer"
)

// step is one decided cycle step about to be carried out on n (the Node before its PATCH).
type step struct {
	n     *corev1.Node
	f     protocol.Facts
	from  protocol.State
	row   protocol.Row
	now   time.Time
	hooks protocol.Hooks
	// groupLabel is --group-label: an admission pins the node's budget group.
	groupLabel string
	// steer: what an admission and a cycle's end write to steer pods and traffic (steer.Config).
	steer steer.Config
	// failed: why this step's node counts against --max-failed-reboots ("" it does not); its
	// reboot-failed mark is written with the step.
	failed string
	// undrainable: why SkipUndrainable ends the cycle (the failed drain).
	undrainable string
	// pdbs: GrantReboot's settle-pdbs value (the PDBs of the pods the drain evicted, before it did;
	// "" none, --settle-pdbs off, or the drain's result lost to a restart).
	pdbs string
	// policyPin: the RebootPolicy an admission is under (protocol.AdmittedPolicy's value, policyPin).
	policyPin string
}

// admission: the step starts the node's cycle.
func (s step) admission() bool { return s.from == protocol.NeedsReboot && s.row.Next.InCycle() }

// since is how long ago the RFC 3339 time in annotation key was (ok false: none).
func (s step) since(key string) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339, s.n.Annotations[key])
	return s.now.Sub(t), err == nil
}

func (s step) uncordons() bool { return s.f.SlipwayCordoned || s.f.FLUOCordoned }

// effect is what carrying out one protocol.Action does: the PATCH, the Event, the notification and
// the metrics. The table below is the only place that says so; docs/concepts.md's "What each step does" is
// printed from it (TestREADMEEffectsTable).
type effect struct {
	Do protocol.Action
	// Writes says in words what the PATCH does; patch builds it.
	Writes string
	patch  func(s step) *nodes.Patch
	// Event is the reason of the Event recorded on the Node, Warning when Warning; message its text.
	Event   string
	Warning bool
	message func(s step) string
	// Notify is the --notify-url kind sent ("" none); OnAdmission: only when the step admits the node.
	Notify      string
	OnAdmission bool
	// Cycles is the result counted in slipway_operator_cycles_total ("" none); Observes names the
	// histograms observe feeds.
	Cycles   string
	Observes string
	observe  func(m *Metrics, s step)
	// EndsWait: the node's wait for admission ends (the need-to-grant time is measured).
	EndsWait bool
	// EndsDrains: the drainer forgets the node's attempts.
	EndsDrains bool
	// FreesSlot: the node stops counting against the budget.
	FreesSlot bool
}

// effects is the table: one row per action that writes the Node (None, Wait and Drain write nothing
// here; a drain's failures are recorded by drain.go).
var effects = []effect{
	{
		Do:     protocol.MarkBeforeReboot,
		Writes: "label before-reboot=true; clear the before-reboot hook annotations, blocked-by; cycle-started=now; admitted-group (and admitted-control-plane) pin the pools it counts against until the cycle ends and while it settles after it; clear waiting-since; " + steerAdmissionWrites,
		patch:  func(s step) *nodes.Patch { return markBeforeReboot(s) },
		Event:  "BeforeRebootHooks",
		message: func(s step) string {
			return fmt.Sprintf("reboot admitted; waiting for before-reboot annotations %v", s.hooks.Before)
		},
		Notify: notify.KindCycleStarted, OnAdmission: true,
	},
	{
		Do:     protocol.StartDrain,
		Writes: "cordon (cordoned=true, unless already unschedulable); drain-started=now; clear settle-pdbs (the last cycle's), drain-error, blocked-by, label before-reboot and its hook annotations; cycle-started=now, admitted-group, admitted-control-plane, the steering labels and clear waiting-since when admitted straight into the drain",
		patch:  startDrain,
		Event:  "Draining",
		message: func(s step) string {
			if s.n.Spec.Unschedulable {
				return "already cordoned by someone else (will stay cordoned); evicting pods before reboot"
			}
			return "cordoned; evicting pods before reboot"
		},
		Notify: notify.KindCycleStarted, OnAdmission: true,
	},
	{
		Do:     protocol.GrantReboot,
		Writes: "reboot-ok=true; reboot-boot-id=the current boot ID; reboot-ok-time=now; reboot-version=its new-version (when that is another version than it runs); settle-pdbs=the PDBs of the pods the drain evicted and the disruptions each allowed before it did (--settle-pdbs, when any allowed one, unless an older operator wrote it when this drain started); clear drain-started, drain-error",
		patch:  grantReboot,
		Event:  "RebootGranted",
		message: func(s step) string {
			return fmt.Sprintf("drained; reboot-ok granted at boot ID %q", protocol.GrantBootID(s.n))
		},
		Observes: "slipway_operator_drain_seconds, slipway_operator_need_to_grant_seconds",
		observe: func(m *Metrics, s step) {
			if d, ok := s.since(protocol.DrainStarted); ok {
				m.drainSeconds.Observe(d.Seconds())
			}
		},
		Notify:   notify.KindRebootGranted,
		EndsWait: true, EndsDrains: true,
	},
	{
		Do:     protocol.MarkAfterReboot,
		Writes: "label after-reboot=true; clear the after-reboot hook annotations",
		patch:  markAfterReboot,
		Event:  "AfterRebootHooks",
		message: func(s step) string {
			return fmt.Sprintf("rebooted (boot ID changed); waiting for after-reboot annotations %v", s.hooks.After)
		},
	},
	{
		Do:     protocol.Finish,
		Writes: "end the cycle (below); last-reboot-time=now; drop undrainable",
		patch: func(s step) *nodes.Patch {
			p := endCycle(s)
			p.SetAnnotation(s.n, protocol.LastRebootTime, s.now.UTC().Format(time.RFC3339))
			p.DeleteAnnotation(s.n, protocol.Undrainable)
			return p
		},
		Event: "RebootCompleted",
		message: func(s step) string {
			msg := "reboot verified (boot ID changed, node Ready); cycle finished"
			if s.uncordons() {
				msg += ", uncordoned"
			}
			return msg
		},
		Notify: notify.KindCycleFinished,
		Cycles: "finished", Observes: "slipway_operator_grant_to_back_seconds",
		observe: func(m *Metrics, s step) {
			if d, ok := s.since(protocol.RebootOKTime); ok {
				m.grantToBack.Observe(d.Seconds())
			}
		},
		EndsDrains: true, FreesSlot: true,
	},
	{
		Do:     protocol.FailOldVersion,
		Writes: "end the cycle (below); failed-version=reboot-version; reboot-failed=now old-version: ...",
		patch: func(s step) *nodes.Patch {
			p := endCycle(s)
			p.SetAnnotation(s.n, protocol.FailedVersion, s.n.Annotations[protocol.RebootVersion])
			p.SetAnnotation(s.n, protocol.RebootFailed, failureMark(s.now, s.failed))
			return p
		},
		Event:   "RebootOldVersion",
		Warning: true,
		message: func(s step) string {
			return s.failed + "; not admitted for that version again until a person removes " + protocol.FailedVersion
		},
		Notify: notify.KindCycleAborted,
		Cycles: "failed", Observes: "slipway_operator_failed_reboots_total{reason=old-version}",
		EndsDrains: true, FreesSlot: true,
	},
	{
		Do:     protocol.SkipUndrainable,
		Writes: "end the cycle (below); undrainable=now and the drain's error",
		patch: func(s step) *nodes.Patch {
			p := endCycle(s)
			p.SetAnnotation(s.n, protocol.Undrainable, truncate(s.now.UTC().Format(time.RFC3339)+" "+s.undrainable, 512))
			return p
		},
		Event:   "Undrainable",
		Warning: true,
		message: func(s step) string {
			return "drain failed, cycle ended without a reboot (--drain-failure-policy=skip); retried after the other waiting nodes, not before --undrainable-retry: " + s.undrainable
		},
		Notify: notify.KindCycleAborted,
		Cycles: "undrainable", EndsWait: true, EndsDrains: true, FreesSlot: true,
	},
	{
		Do:      protocol.Abort,
		Writes:  "end the cycle (below)",
		patch:   endCycle,
		Event:   "CycleAborted",
		Warning: true,
		message: func(s step) string { return "cycle ended without a verified reboot: " + s.row.When },
		Notify:  notify.KindCycleAborted,
		Cycles:  "aborted", EndsWait: true, EndsDrains: true, FreesSlot: true,
	},
}

// endCycleWrites is what ending a cycle writes (Finish and Abort).
const endCycleWrites = "reboot-ok=false (if present); drop labels before-reboot, after-reboot and every hook annotation; uncordon if Slipway (or a replaced FLUO agent: agent-made-unschedulable=false) cordoned; drop cordoned, drain-started, drain-error, reboot-boot-id, reboot-ok-time, reboot-version, cycle-started, stalled, stalled-at, blocked-by (admitted-group and admitted-control-plane stay: while the node settles they hold the pools it was admitted in); drop the exclude-from-external-load-balancers label and the --prefer-no-schedule-taint taint if Slipway added them (lb-excluded, prefer-no-schedule-taint); the --post-reboot-node-labels, on labels Slipway set (steering-labels) or absent ones only (a SteeringLabelsKept Warning names any other)"

// steerAdmissionWrites is what steer.Config.Admit writes.
const steerAdmissionWrites = "label node.kubernetes.io/exclude-from-external-load-balancers=true and lb-excluded=true unless the node has that label (--exclude-from-load-balancers); the --pre-reboot-node-labels, recorded in steering-labels (a label Slipway did not set holds the admission, blocked-by steering-label)"

// effectOf is the table's row for a.
func effectOf(a protocol.Action) effect {
	for _, e := range effects {
		if e.Do == a {
			return e
		}
	}
	panic("operator: no effect for action " + string(a)) // TestEveryWritingActionHasAnEffect
}

// record carries out what the step does besides its PATCH, which has landed.
func (c *Controller) record(ctx context.Context, e effect, s step) {
	typ := corev1.EventTypeNormal
	if e.Warning {
		typ = corev1.EventTypeWarning
	}
	c.cfg.Recorder.Event(s.n, typ, e.Event, e.message(s))
	if e.FreesSlot || s.admission() {
		if kept := s.steer.Kept(s.n, s.admission()); len(kept) > 0 {
			c.cfg.Recorder.Eventf(s.n, corev1.EventTypeWarning, "SteeringLabelsKept", "labels Slipway did not set are left as they are (--pre-reboot-node-labels, --post-reboot-node-labels change only what Slipway set, update.slipway.dev/steering-labels): %s", strings.Join(kept, ", "))
		}
	}
	m := c.cfg.Metrics
	if m != nil {
		m.actions.WithLabelValues(string(e.Do)).Inc()
		if e.Cycles != "" {
			m.cycles.WithLabelValues(e.Cycles).Inc()
		}
		if e.observe != nil {
			e.observe(m, s)
		}
	}
	if e.EndsWait {
		t, ok := c.index.EndWait(s.n.Name)
		if ok && m != nil && e.Do == protocol.GrantReboot {
			m.needToGrant.Observe(s.now.Sub(t).Seconds())
		}
		if e.Do == protocol.GrantReboot {
			c.markGranted(s.n, t)
		}
	}
	if e.Cycles != "" {
		why := ""
		switch e.Do {
		case protocol.Abort:
			why = s.row.When
		case protocol.FailOldVersion:
			why = s.failed
		case protocol.SkipUndrainable:
			why = s.undrainable
		}
		c.ended(s.n, e.Cycles, why, s.now)
	}
	if e.EndsDrains {
		c.drains.forget(s.n.Name)
	}
	if s.failed != "" {
		c.failedReboot(s.n, s.failed, s.now)
	}
	if e.Do == protocol.Finish {
		if d, ok := s.since(protocol.CycleStarted); ok {
			c.store.NoteCycle(d) // published for the status view's ETAs
		}
	}
	if e.Notify != "" && (!e.OnAdmission || s.admission()) {
		ev := notify.Event{Kind: e.Notify, Node: s.n.Name, Time: s.now}
		switch e.Do {
		case protocol.Finish:
			if d, ok := s.since(protocol.CycleStarted); ok {
				ev.Took = d
			}
			if s.uncordons() {
				ev.Detail = "uncordoned"
			}
		case protocol.Abort:
			ev.Reason = s.row.When
		case protocol.FailOldVersion:
			ev.Reason = s.failed
		case protocol.SkipUndrainable:
			ev.Reason = "undrainable: " + s.undrainable
		}
		c.cfg.Notify.Notify(ev)
	}
}

// The PATCHes.

func clearHooks(p *nodes.Patch, n *corev1.Node, keys []string) {
	for _, k := range keys {
		p.DeleteAnnotation(n, k)
	}
}

func markBeforeReboot(s step) *nodes.Patch {
	p := &nodes.Patch{}
	clearHooks(p, s.n, s.hooks.Before)
	p.SetLabel(s.n, protocol.BeforeReboot, protocol.True)
	p.SetAnnotation(s.n, protocol.CycleStarted, s.now.UTC().Format(time.RFC3339))
	p.DeleteAnnotation(s.n, protocol.BlockedBy)
	onAdmission(p, s)
	return p
}

// onAdmission records the pools an admission takes the node into (until its cycle ends it counts
// against them whatever its labels or FleetLock group say meanwhile, admission.Of) and steers
// traffic and pods away (steer.Config.Admit).
func onAdmission(p *nodes.Patch, s step) {
	if !s.admission() {
		return
	}
	p.SetAnnotation(s.n, protocol.AdmittedGroup, protocol.BudgetGroup(s.n, s.groupLabel))
	p.SetAnnotation(s.n, protocol.AdmittedPolicy, s.policyPin)
	p.DeleteAnnotation(s.n, protocol.WaitingSince)
	if protocol.IsControlPlane(s.n) {
		p.SetAnnotation(s.n, protocol.AdmittedControlPlane, protocol.True)
	} else {
		p.DeleteAnnotation(s.n, protocol.AdmittedControlPlane)
	}
	s.steer.Admit(p, s.n)
}

func startDrain(s step) *nodes.Patch {
	p := &nodes.Patch{}
	n, now := s.n, s.now.UTC().Format(time.RFC3339)
	if s.f.Needed && !s.f.BeforeLabel {
		p.SetAnnotation(n, protocol.CycleStarted, now) // admitted straight into the drain
	}
	onAdmission(p, s)
	p.DeleteAnnotation(n, protocol.BlockedBy)
	if !n.Spec.Unschedulable {
		p.SetUnschedulable(n, true)
		p.SetAnnotation(n, protocol.Cordoned, protocol.True)
	}
	p.SetAnnotation(n, protocol.DrainStarted, now)
	p.DeleteAnnotation(n, protocol.SettlePDBs) // the last cycle's; the grant writes this one's
	p.DeleteAnnotation(n, protocol.DrainError)
	p.DeleteLabel(n, protocol.BeforeReboot)
	clearHooks(p, n, s.hooks.Before)
	return p
}

func grantReboot(s step) *nodes.Patch {
	p := &nodes.Patch{}
	p.SetAnnotation(s.n, protocol.RebootOK, protocol.True)
	if id := protocol.GrantBootID(s.n); id != "" {
		p.SetAnnotation(s.n, protocol.RebootBootID, id)
	}
	p.SetAnnotation(s.n, protocol.RebootOKTime, s.now.UTC().Format(time.RFC3339))
	if v := protocol.AskedVersion(s.n); v != "" {
		p.SetAnnotation(s.n, protocol.RebootVersion, v) // the version it must come back on
	} else {
		p.DeleteAnnotation(s.n, protocol.RebootVersion)
	}
	if _, written := s.n.Annotations[protocol.SettlePDBs]; s.pdbs != "" && !written {
		// Never over a value already there: an operator before this one wrote it when this drain
		// started, from every pod (this one may have read what a restarted drain left).
		p.SetAnnotation(s.n, protocol.SettlePDBs, s.pdbs)
	}
	p.DeleteAnnotation(s.n, protocol.DrainStarted)
	p.DeleteAnnotation(s.n, protocol.DrainError)
	return p
}

func markAfterReboot(s step) *nodes.Patch {
	p := &nodes.Patch{}
	clearHooks(p, s.n, s.hooks.After)
	p.SetLabel(s.n, protocol.AfterReboot, protocol.True)
	return p
}

func endCycle(s step) *nodes.Patch {
	p := &nodes.Patch{}
	n := s.n
	if _, ok := n.Annotations[protocol.RebootOK]; ok {
		p.SetAnnotation(n, protocol.RebootOK, protocol.False)
	}
	p.DeleteLabel(n, protocol.BeforeReboot)
	p.DeleteLabel(n, protocol.AfterReboot)
	clearHooks(p, n, s.hooks.Before)
	clearHooks(p, n, s.hooks.After)
	if s.uncordons() {
		// What Slipway cordoned, and what a replaced FLUO agent cordoned and can no longer uncordon.
		p.SetUnschedulable(n, false)
	}
	if s.f.FLUOCordoned {
		p.SetAnnotation(n, protocol.AgentMadeUnschedulable, protocol.False)
	}
	for _, k := range []string{protocol.Cordoned, protocol.DrainStarted, protocol.DrainError, protocol.RebootBootID, protocol.RebootOKTime, protocol.RebootVersion, protocol.CycleStarted, protocol.AdmittedBy, protocol.AdmittedPolicy, protocol.Stalled, protocol.StalledAt, protocol.BlockedBy} {
		// admitted-group and admitted-control-plane stay: a node settling after its cycle holds the slots
		// of the pools it was admitted in (admission.Node.SettleIn); the next admission writes them anew.
		p.DeleteAnnotation(n, k)
	}
	s.steer.End(p, n)
	return p
}

// EffectsTable is the effects table as docs/concepts.md prints it.
func EffectsTable() string {
	var b strings.Builder
	b.WriteString("| action | writes | Event | notification | metrics |\n|---|---|---|---|---|\n")
	for _, e := range effects {
		ev := e.Event
		if e.Warning {
			ev += " (Warning)"
		}
		nt := e.Notify
		if nt == "" {
			nt = "none"
		}
		if e.OnAdmission {
			nt += " (when it admits)"
		}
		ms := []string{"slipway_operator_actions_total{action=" + string(e.Do) + "}"}
		if e.Cycles != "" {
			ms = append(ms, "slipway_operator_cycles_total{result="+e.Cycles+"}")
		}
		if e.Observes != "" {
			ms = append(ms, e.Observes)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", e.Do, e.Writes, ev, nt, strings.Join(ms, ", "))
	}
	fmt.Fprintf(&b, "\nEnding a cycle: %s.\n", endCycleWrites)
	return b.String()
}
