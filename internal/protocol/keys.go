// Package protocol is the contract between the update-agent, the update-operator and the humans and
// hooks around them: the Node annotation and label keys (FLUO's, unchanged, plus Slipway's own), who
// may write each of them, and the node cycle as one table.
//
// FLUO compatibility is the reason the FLUO keys and their "true"/"false" values are kept byte for byte:
// a cluster can swap FLUO's operator for Slipway's while FLUO's agents keep running, and FLUO's README
// test (annotate reboot-needed=true by hand) works unchanged.
package protocol

// Values of every boolean key. Anything else is malformed and reads as absent.
const (
	True  = "true"
	False = "false"
)

// FLUOPrefix is the prefix of every key FLUO defined.
const FLUOPrefix = "flatcar-linux-update.v1.flatcar-linux.net/"

// FLUO keys. The comment of each says who writes it.
const (
	// RebootNeeded (annotation and label) — agent: update_engine said UPDATE_STATUS_UPDATED_NEED_REBOOT
	// (or /run/reboot-required exists). Reset to false by the agent when it starts after a reboot.
	RebootNeeded = FLUOPrefix + "reboot-needed"
	// RebootInProgress (annotation) — agent: it is about to call logind's Reboot.
	RebootInProgress = FLUOPrefix + "reboot-in-progress"
	// RebootOK (annotation) — operator: the node may reboot now; false again when the cycle ends.
	RebootOK = FLUOPrefix + "reboot-ok"
	// RebootPaused (annotation) — admin: the operator and the agent leave this node where it is.
	// Anything but absent or "false" counts as paused (fail closed: "True" or "yes" must not let a
	// node an admin meant to hold reboot).
	RebootPaused = FLUOPrefix + "reboot-paused"
	// Status, LastCheckedTime, NewVersion (annotations) — agent: update_engine's GetStatus fields.
	Status          = FLUOPrefix + "status"
	LastCheckedTime = FLUOPrefix + "last-checked-time"
	NewVersion      = FLUOPrefix + "new-version"
	// AgentMadeUnschedulable (annotation) — FLUO's agent: it cordoned the node itself and uncordons it
	// when it starts after the reboot. Slipway's agent never cordons; when a FLUO agent was replaced
	// mid-cycle, the operator uncordons such a node at the end of its cycle and sets this to "false".
	AgentMadeUnschedulable = FLUOPrefix + "agent-made-unschedulable"
	// BeforeReboot, AfterReboot (labels) — operator: the node waits for the configured hook
	// annotations, each of which a hook (e.g. a DaemonSet selecting this label) sets to "true".
	BeforeReboot = FLUOPrefix + "before-reboot"
	AfterReboot  = FLUOPrefix + "after-reboot"
	// ID, Version, Group (labels) — agent: from /etc/os-release and update.conf.
	ID      = FLUOPrefix + "id"
	Version = FLUOPrefix + "version"
	Group   = FLUOPrefix + "group"
	// AgentVersion (annotation) — agent: the agent's own version.
	AgentVersion = FLUOPrefix + "agent-version"
)

// SlipwayPrefix is the prefix of every key only Slipway uses. Nothing in the operator may depend on
// the agent-written ones being present: FLUO's agent does not write them.
const SlipwayPrefix = "update.slipway.dev/"

// Slipway keys (annotations).
const (
	// BootID — agent: /proc/sys/kernel/random/boot_id of the boot the agent runs in. Proof of a reboot is
	// the kubelet's status.nodeInfo.bootID (the NodeRestriction admission plugin lets only the node's
	// own kubelet write it); this annotation is a fallback for nodes whose kubelet reports none, and
	// tells the operator whether the agent has spoken in the boot the kubelet reports.
	BootID = SlipwayPrefix + "boot-id"
	// RebootError — agent: why the last logind Reboot call failed; removed when one succeeds.
	RebootError = SlipwayPrefix + "reboot-error"
	// AgentProtocol — agent: the version of this node protocol its agent speaks (AgentProtocolCurrent).
	// Absent: FLUO's (FLUO's agent, and Slipway's before it announced one). The operator admits a node
	// only when it speaks one of AgentProtocols, so an agent newer than the operator (an upgrade done
	// in the wrong order) is held with blocked-by agent-version rather than guessed at.
	AgentProtocol = SlipwayPrefix + "agent-protocol"

	// Cordoned — operator: "true" when Slipway cordoned the node, so it uncordons only what it cordoned.
	Cordoned = SlipwayPrefix + "cordoned"
	// DrainStarted — operator: RFC 3339 time the drain began; marks the draining state.
	DrainStarted = SlipwayPrefix + "drain-started"
	// DrainError — operator: why the last drain attempt failed; removed when the drain succeeds.
	DrainError = SlipwayPrefix + "drain-error"
	// RebootBootID — operator: the boot ID seen when reboot-ok was granted. The reboot counts as done
	// only when the node reports a different one.
	RebootBootID = SlipwayPrefix + "reboot-boot-id"
	// RebootVersion — operator: the OS version the node said it would come back on (its new-version)
	// when reboot-ok was granted. The cycle succeeds only if the node's version label says that version
	// after the reboot; otherwise it fails as old-version (a rolled-back update).
	RebootVersion = SlipwayPrefix + "reboot-version"
	// FailedVersion — operator: the version a node rebooted for and did not come back on. The node is
	// not admitted again while it asks for that version, until a person removes this annotation.
	FailedVersion = SlipwayPrefix + "failed-version"
	// RebootOKTime — operator: RFC 3339 time reboot-ok was granted.
	RebootOKTime = SlipwayPrefix + "reboot-ok-time"
	// LastRebootTime — operator: RFC 3339 time the last cycle finished after a verified reboot.
	LastRebootTime = SlipwayPrefix + "last-reboot-time"
	// AdmittedBy — operator: "<leader identity>/<lease transitions>" of the leader that admitted the
	// node into its cycle, and CycleStarted the RFC 3339 time it did. Every admission is fenced by a
	// fresh read of the leader Lease; these say which leadership term made it.
	AdmittedBy   = SlipwayPrefix + "admitted-by"
	CycleStarted = SlipwayPrefix + "cycle-started"
	// AdmittedGroup — operator: the budget group the node was admitted in, and AdmittedControlPlane
	// "true" when it was admitted as a control-plane node. Until its cycle ends, and while it settles
	// after it (--settle-time, --settle-pdbs), the node counts against these pools whatever its labels
	// or FleetLock group say meanwhile (and against its current ones too): relabelling or asking in
	// another group mid-cycle or mid-settle frees no slot. The cycle's end leaves them; the next
	// admission writes them anew.
	AdmittedGroup        = SlipwayPrefix + "admitted-group"
	AdmittedControlPlane = SlipwayPrefix + "admitted-control-plane"
	// AdmittedPolicy — operator: the RebootPolicy the node was admitted under,
	// "<name>/<generation>/<first 8 characters of its uid>" ("" the flags' policy). Until its cycle ends the node belongs to that policy and counts against
	// its budget, whatever its labels or the policies say meanwhile.
	AdmittedPolicy = SlipwayPrefix + "admitted-policy"
	// RebootFailed — operator: "<RFC 3339 time> <why>" when the node's reboot counted against
	// --max-failed-reboots (stalled after its grant, or back on its old version: its own evidence only). The fleet record (ConfigMap slipway-fleet-record) keeps the failure too, and
	// counts from there: removing this mark, or deleting the Node, lifts nothing; kubectl slipway resume
	// --failures starts a new count.
	RebootFailed = SlipwayPrefix + "reboot-failed"
	// Stalled — operator: why the node has been in one stage of its cycle longer than --reboot-timeout
	// (a StallReason); removed when the node moves on. A Warning Event and the metric
	// slipway_operator_stalled_nodes{reason} say the same.
	Stalled = SlipwayPrefix + "stalled"
	// StalledAt — operator: RFC 3339 time the operator saw the stall (written and removed with
	// stalled). A canary's stall counts against its version from then, not from its grant: one seen
	// after a resume --version is not taken for one before it.
	StalledAt = SlipwayPrefix + "stalled-at"

	// SettlePDBs — operator: the PodDisruptionBudgets the pods its drain evicted fell under, with the
	// disruptions each allowed before the first eviction, "<namespace>/<name>=<n>,..." (sorted; those
	// allowing none left out; at most 64); written with reboot-ok, cleared when the next drain starts
	// (an operator before this one wrote it when the drain started). After the cycle the node settles (holds its budget slots) until each allows
	// a disruption again (--settle-pdbs), at most --settle-timeout after it finished.
	SettlePDBs = SlipwayPrefix + "settle-pdbs"

	// Undrainable — operator: "<RFC 3339 time> <why>" when the node's drain failed under
	// --drain-failure-policy=skip: its cycle was aborted (uncordoned if Slipway cordoned it) and it is
	// not admitted again before --undrainable-retry has passed. Removed when a cycle finishes.
	Undrainable = SlipwayPrefix + "undrainable"

	// PreferNoScheduleTaint — operator: the key of the PreferNoSchedule taint Slipway put on the node
	// while it waited for its turn (--prefer-no-schedule-taint); the taint is removed with this
	// annotation when the cycle ends or the node stops waiting. A taint someone else set is never
	// marked, so never removed.
	PreferNoScheduleTaint = SlipwayPrefix + "prefer-no-schedule-taint"

	// LBExcluded — operator: "true" when Slipway added ExcludeFromLBs for the cycle
	// (--exclude-from-load-balancers); the label is removed with it when the cycle ends. A label that
	// was there before the cycle is left alone.
	LBExcluded = SlipwayPrefix + "lb-excluded"

	// SteeringLabels — operator: the --pre-reboot-node-labels and --post-reboot-node-labels it set on
	// the node, "<key>=<value>,..." (sorted). Only a label listed here with the value it still carries
	// is Slipway's to change or remove; one that was there before, or that someone changed since, is
	// left as it is (a pre-reboot label that would change it holds the node, blocked-by
	// steering-label).
	SteeringLabels = SlipwayPrefix + "steering-labels"

	// Override — set by a person in the group slipway:break-glass in the same write that changes any
	// of the operator's keys by hand, "<their username>: <why>" (the admission policy slipway-node-keys
	// refuses such a write without it, or with another username); the operator reports it as an
	// `Override` Warning Event and slipway_operator_overrides_total, then removes it. The operator's
	// key: nobody else may set it.
	Override = SlipwayPrefix + "override"

	// ExcludeFromLBs is Kubernetes' well-known label: the service controller takes a node that has it
	// (any value) out of external load balancers' backends.
	ExcludeFromLBs = "node.kubernetes.io/exclude-from-external-load-balancers"

	// WaitingSince — operator: RFC 3339 time when the node was first held waiting for its turn (written
	// with its first blocked-by); removed when it is admitted or stops asking. What
	// slipway_operator_longest_wait_seconds and kubectl slipway status read, so a leader change does not
	// restart the count.
	WaitingSince = SlipwayPrefix + "waiting-since"
	// PausedBy — admin, through `kubectl slipway pause --nodes`: "<who> <RFC 3339 time>[: <reason>]",
	// written with reboot-paused=true. `resume --nodes all` lifts only the pauses that carry it, so a
	// node paused by hand for its own reasons stays paused.
	PausedBy = SlipwayPrefix + "paused-by"

	// PoolGroup, PoolServer — operator: the update channel (GROUP) and update server (SERVER) the
	// node's RebootPolicy declares (spec.update; --update-group, --update-server for the flags' pool),
	// checked before they are written; absent when its pool declares none. The agent writes them into
	// /etc/flatcar/update.conf when that file is Slipway's to edit (see UpdateConfError) and asks
	// update_engine to check for an update, so the channel changes without a reboot. An absent key
	// leaves that line of the file as it is.
	PoolGroup  = SlipwayPrefix + "pool-group"
	PoolServer = SlipwayPrefix + "pool-server"
	// Server — agent: the SERVER update_engine follows (update.conf's, /etc over /usr); the channel is
	// FLUO's group label.
	Server = SlipwayPrefix + "server"
	// UpdateConfError — agent: why it did not write pool-group / pool-server into update.conf (the
	// file is the user's own: it has no line "# managed-by: slipway"; a value it refuses; a write or
	// update_engine call that failed); removed once the file says what the pool declares.
	UpdateConfError = SlipwayPrefix + "update-conf-error"

	// BlockedBy — operator: why a waiting node is not admitted yet, "<kind>: <detail>" (budget, window,
	// paused, order, or a blocker's name); removed when it is admitted. Written when the reason changes.
	BlockedBy = SlipwayPrefix + "blocked-by"

	// FleetLockGroup — FleetLock server: the group Zincati asked in; the node's budget group unless
	// it carries the operator's --group-label.
	FleetLockGroup = SlipwayPrefix + "fleetlock-group"

	// FleetLockID — FleetLock server: the Zincati id of a node without an agent whose reboots
	// FleetLock requests drive. For such nodes the FleetLock server writes what the agent would:
	// reboot-needed when Zincati asks (pre-reboot), reboot-in-progress when it is let go, and both back
	// to false when Zincati reports steady state.
	FleetLockID = SlipwayPrefix + "fleetlock-id"
	// FleetLockEnrolled (label) — admin (or the kubelet's --node-labels): "true" lets the FleetLock
	// server act for this node. Without it a FleetLock request changes nothing, so no client on the
	// network can start the cycle of a node that never opted in.
	FleetLockEnrolled = SlipwayPrefix + "fleetlock"
)

// Writer names who may write a key.
type Writer string

const (
	WriterAgent    Writer = "agent"
	WriterOperator Writer = "operator"
	WriterAdmin    Writer = "admin"
	WriterFLUO     Writer = "fluo-agent"
	WriterHook     Writer = "hook"
	// WriterFleetLock is the FleetLock server (update-agent fleetlock), acting as the agent of agentless
	// nodes.
	WriterFleetLock Writer = "fleetlock"
)

// OnNode reports whether w writes from the node itself (its agent, FLUO's agent, the FleetLock server
// acting for it): a node could set such a key on itself, so it must not choose a node's budget group or
// reboot policy.
func (w Writer) OnNode() bool {
	return w == WriterAgent || w == WriterFLUO || w == WriterFleetLock
}

// Owners says, for every key above, who may write it: the one place a reader finds "who writes what".
// Hook annotations are configured at run time and are not listed.
var Owners = map[string]Writer{
	RebootNeeded:           WriterAgent,
	RebootInProgress:       WriterAgent,
	Status:                 WriterAgent,
	LastCheckedTime:        WriterAgent,
	NewVersion:             WriterAgent,
	ID:                     WriterAgent,
	Version:                WriterAgent,
	Group:                  WriterAgent,
	AgentVersion:           WriterAgent,
	BootID:                 WriterAgent,
	RebootError:            WriterAgent,
	AgentProtocol:          WriterAgent,
	Server:                 WriterAgent,
	UpdateConfError:        WriterAgent,
	PoolGroup:              WriterOperator,
	PoolServer:             WriterOperator,
	RebootOK:               WriterOperator,
	BeforeReboot:           WriterOperator,
	AfterReboot:            WriterOperator,
	Cordoned:               WriterOperator,
	DrainStarted:           WriterOperator,
	DrainError:             WriterOperator,
	RebootBootID:           WriterOperator,
	RebootOKTime:           WriterOperator,
	RebootVersion:          WriterOperator,
	FailedVersion:          WriterOperator,
	LastRebootTime:         WriterOperator,
	AdmittedBy:             WriterOperator,
	CycleStarted:           WriterOperator,
	AdmittedGroup:          WriterOperator,
	AdmittedControlPlane:   WriterOperator,
	AdmittedPolicy:         WriterOperator,
	RebootFailed:           WriterOperator,
	Stalled:                WriterOperator,
	StalledAt:              WriterOperator,
	BlockedBy:              WriterOperator,
	SettlePDBs:             WriterOperator,
	Undrainable:            WriterOperator,
	PreferNoScheduleTaint:  WriterOperator,
	LBExcluded:             WriterOperator,
	SteeringLabels:         WriterOperator,
	Override:               WriterOperator,
	WaitingSince:           WriterOperator,
	FleetLockGroup:         WriterFleetLock,
	FleetLockID:            WriterFleetLock,
	FleetLockEnrolled:      WriterAdmin,
	RebootPaused:           WriterAdmin,
	PausedBy:               WriterAdmin,
	AgentMadeUnschedulable: WriterFLUO,
}

// ParseBool reads a boolean key. present is false when the key is absent; valid is false when it is
// present with a value other than "true" or "false" (which then reads as false).
func ParseBool(m map[string]string, key string) (value, present, valid bool) {
	v, ok := m[key]
	if !ok {
		return false, false, true
	}
	switch v {
	case True:
		return true, true, true
	case False:
		return false, true, true
	}
	return false, true, false
}

// IsPaused reports whether reboot-paused holds the node: present with any value but "false". It fails
// closed, unlike the other keys: a typo must hold a node an admin meant to hold, not release it.
func IsPaused(m map[string]string) bool {
	v, ok := m[RebootPaused]
	return ok && v != False
}

// IsTrue reports whether key is exactly "true".
func IsTrue(m map[string]string, key string) bool { return m[key] == True }
