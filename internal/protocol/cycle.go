package protocol

// State is where a node is in the reboot cycle, derived from its Node object alone (Classify).
type State string

const (
	Idle         State = "idle"          // nothing to do
	NeedsReboot  State = "needs-reboot"  // agent asked; waiting for budget and window
	BeforeHooks  State = "before-reboot" // before-reboot label set; waiting for the hook annotations
	Draining     State = "draining"      // cordoned, pods being evicted
	Rebooting    State = "rebooting"     // reboot-ok granted; waiting for the agent to come back
	Rebooted     State = "rebooted"      // agent is back after reboot-ok; verify the boot ID
	AfterHooks   State = "after-reboot"  // after-reboot label set; waiting for hooks and Ready
	pausedMarker State = ""              // not a state: Row.From for rows that match any state
)

// InCycle reports whether a node in this state counts against the budget by itself.
func (s State) InCycle() bool {
	switch s {
	case BeforeHooks, Draining, Rebooting, Rebooted, AfterHooks:
		return true
	}
	return false
}

// Classify derives a node's state from its Facts. Order matters: the later phases of a cycle win over
// leftovers of earlier ones, so a half-written transition (e.g. an operator killed between two writes)
// is picked up where it stopped.
func Classify(f Facts) State {
	switch {
	case f.AfterLabel:
		return AfterHooks
	// Back from the reboot: the agent reset its flags, or the node is verifiably in a new boot and
	// its agent has spoken in it (its reboot-needed=true is then a new update, not this cycle's).
	case f.OK && !f.InProgress && (!f.Needed || f.BootVerified && f.AgentCurrent):
		return Rebooted
	case f.OK || f.InProgress:
		return Rebooting
	case f.BeforeLabel:
		return BeforeHooks
	case f.DrainStarted:
		return Draining
	case f.Needed:
		return NeedsReboot
	}
	return Idle
}

// Action is what the operator does to a node. Every action is one PATCH of the Node (Drain also
// evicts pods) and is safe to repeat.
type Action string

const (
	// None: nothing to do until the node or the world changes.
	None Action = "none"
	// Wait: nothing to do now, but check again later (hooks, Ready, budget, window, agent).
	Wait Action = "wait"
	// MarkBeforeReboot: set the before-reboot label and clear the before-hook annotations.
	MarkBeforeReboot Action = "mark-before-reboot"
	// StartDrain: cordon (recording that Slipway did it, unless already cordoned), set drain-started,
	// drop the before-reboot label and its hook annotations.
	StartDrain Action = "start-drain"
	// Drain: evict the node's pods through the Eviction API; on failure record drain-error, emit an
	// Event and retry with backoff (or grant anyway under --drain-failure-policy=force).
	Drain Action = "drain"
	// GrantReboot: reboot-ok=true, record the boot ID seen now, drop the drain markers.
	GrantReboot Action = "grant-reboot"
	// FailOldVersion: end the cycle as failed: the node came back on another OS version than it
	// rebooted for (failed-version and reboot-failed record it; it counts against --max-failed-reboots).
	FailOldVersion Action = "fail-old-version"
	// SkipUndrainable: end the cycle without a reboot because the drain failed under
	// --drain-failure-policy=skip (same cleanup as Abort, undrainable recorded); the node waits at the
	// back of the queue.
	SkipUndrainable Action = "skip-undrainable"
	// MarkAfterReboot: set the after-reboot label and clear the after-hook annotations.
	MarkAfterReboot Action = "mark-after-reboot"
	// Finish: reboot-ok=false, drop the after-reboot label, hook annotations and Slipway's cycle
	// markers, uncordon if Slipway cordoned.
	Finish Action = "finish"
	// Abort: end the cycle without a verified reboot (the node no longer needs one, or its agent reset
	// its flags in the same boot): same cleanup as Finish, reported as a warning.
	Abort Action = "abort"
)

// Row is one line of the cycle table: in state From, when When holds, do Do; the node is then in Next.
type Row struct {
	From State
	When string // name of the condition, as printed in docs/concepts.md
	If   func(Facts) bool
	Do   Action
	Next State
}

func always(Facts) bool { return true }

// Table is the node cycle. For a node, the first row whose From matches its state (or is the
// any-state marker) and whose condition holds decides the action. docs/concepts.md prints this table.
var Table = []Row{
	{pausedMarker, "reboot-paused set (any value but false)", func(f Facts) bool { return f.Paused }, None, pausedMarker},

	{Idle, "always", always, None, Idle},

	{NeedsReboot, "not admitted (budget full or outside the reboot window)", func(f Facts) bool { return !f.Admitted }, Wait, NeedsReboot},
	{NeedsReboot, "admitted, before-reboot hooks configured", func(f Facts) bool { return f.HasBeforeHooks }, MarkBeforeReboot, BeforeHooks},
	{NeedsReboot, "admitted, no before-reboot hooks", always, StartDrain, Draining},

	{BeforeHooks, "reboot-needed no longer true", func(f Facts) bool { return !f.Needed }, Abort, Idle},
	{BeforeHooks, "all before-reboot annotations true", func(f Facts) bool { return f.BeforeHooksDone }, StartDrain, Draining},
	{BeforeHooks, "hooks pending", always, Wait, BeforeHooks},

	{Draining, "reboot-needed no longer true", func(f Facts) bool { return !f.Needed }, Abort, Idle},
	{Draining, "drain failed, --drain-failure-policy=skip", func(f Facts) bool { return f.Undrainable && !f.DrainDone }, SkipUndrainable, Idle},
	{Draining, "drain succeeded, VolumeAttachments still name the node", func(f Facts) bool { return f.DrainDone && f.VolumesAttached }, Wait, Draining},
	{Draining, "drain succeeded less than --reboot-delay ago", func(f Facts) bool { return f.DrainDone && f.RebootDelayed }, Wait, Draining},
	{Draining, "drain succeeded", func(f Facts) bool { return f.DrainDone }, GrantReboot, Rebooting},
	{Draining, "drain started less than --drain-delay ago (cordoned, nothing evicted yet)", func(f Facts) bool { return f.DrainDelayed }, Wait, Draining},
	{Draining, "drain not yet done", always, Drain, Draining},

	{Rebooting, "agent not back in a new boot yet", always, Wait, Rebooting},

	{Rebooted, "boot ID unchanged, agent reports the same boot (no reboot happened)", func(f Facts) bool { return !f.BootChanged && !f.AgentBootChanged }, Abort, Idle},
	{Rebooted, "agent reports a new boot, the kubelet not yet", func(f Facts) bool { return !f.BootChanged }, Wait, Rebooted},
	{Rebooted, "back on another OS version than it rebooted for, node Ready", func(f Facts) bool { return f.OldVersion && f.Ready }, FailOldVersion, Idle},
	{Rebooted, "back on another OS version than it rebooted for, not Ready yet", func(f Facts) bool { return f.OldVersion }, Wait, Rebooted},
	{Rebooted, "after-reboot hooks configured", func(f Facts) bool { return f.HasAfterHooks }, MarkAfterReboot, AfterHooks},
	{Rebooted, "node Ready", func(f Facts) bool { return f.Ready }, Finish, Idle},
	{Rebooted, "node not Ready yet", always, Wait, Rebooted},

	{AfterHooks, "all after-reboot annotations true and node Ready", func(f Facts) bool { return f.AfterHooksDone && f.Ready }, Finish, Idle},
	{AfterHooks, "hooks pending or node not Ready", always, Wait, AfterHooks},
}

// Decide returns the state of a node with these facts and the table row that applies to it.
func Decide(f Facts) (State, Row) {
	s := Classify(f)
	for _, r := range Table {
		if (r.From == s || r.From == pausedMarker) && r.If(f) {
			if r.Next == pausedMarker {
				r.Next = s
			}
			return s, r
		}
	}
	// Unreachable: every state ends in an "always" row. Doing nothing is the safe answer.
	return s, Row{From: s, When: "no row", If: always, Do: None, Next: s}
}

// FromName is the From of a row as docs/concepts.md prints it ("any" for rows that apply in every state).
func (r Row) FromName() string {
	if r.From == pausedMarker {
		return "any"
	}
	return string(r.From)
}
