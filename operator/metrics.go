package operator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/stall"
)

// FleetView is what the metrics read at scrape time: the Nodes as the controller sees them, the
// pause switch, the budgets as admission counts them. The Controller is one.
type FleetView interface {
	Nodes() []*corev1.Node
	Switch() fleetswitch.Switch
	Pools() []admission.BudgetPool
	// Remembered is what the fleet record holds now: the halted OS versions and the nodes whose
	// failures count against --max-failed-reboots.
	Remembered() (halted []string, failed int)
	// PolicyOf is the RebootPolicy a node is in ("" the flags'): the one its cycle is pinned to
	// (inCycle), else the one it matches now.
	PolicyOf(n *corev1.Node, inCycle bool) string
	// VersionProofs is what this cluster proved of each OS version (admission.ProofOf), published as
	// slipway_version_* for other clusters' gates.
	VersionProofs(now time.Time) []admission.Proof
}

// Metrics are the operator's Prometheus metrics. Node counts per state are computed from the
// informer cache at scrape time, so they can never drift from what the controller sees.
type Metrics struct {
	actions      *prometheus.CounterVec
	drainFails   prometheus.Counter
	IsLeader     prometheus.Gauge
	needToGrant  prometheus.Histogram
	grantToBack  prometheus.Histogram
	drainSeconds prometheus.Histogram
	cycles       *prometheus.CounterVec
	stalls       *prometheus.CounterVec
	failed       *prometheus.CounterVec
	selfPauses   prometheus.Counter
	// settleTimeouts: nodes whose PDBs were not back within --settle-timeout.
	settleTimeouts prometheus.Counter
	// overrides: break-glass changes of Slipway's keys (update.slipway.dev/override) reported.
	overrides    prometheus.Counter
	paused       *prometheus.Desc
	nodesByState *prometheus.Desc
	stalled      *prometheus.Desc
	blocked      *prometheus.Desc
	limitDesc    *prometheus.Desc
	usedDesc     *prometheus.Desc
	longestWait  *prometheus.Desc
	halted       *prometheus.Desc
	failedNow    *prometheus.Desc
	// Per node: nodeInfo (one series each), inCycle (one per node in its cycle); and the fleet's
	// nodes without an agent and nodes per OS version.
	nodeInfo     *prometheus.Desc
	inCycle      *prometheus.Desc
	noAgent      *prometheus.Desc
	versionNodes *prometheus.Desc
	// The per-version proof another cluster reads (docs/versions.md, "promote").
	proofCycles, proofHalted, proofSince, proofFirst *prometheus.Desc
	// now is the scrape's clock (time.Now; tests set it).
	now  func() time.Time
	view FleetView
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_actions_total", Help: "Cycle actions carried out, by action.",
		}, []string{"action"}),
		drainFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_drain_failures_total", Help: "Drain attempts that failed or timed out.",
		}),
		limitDesc: prometheus.NewDesc("slipway_operator_budget_limit", "Nodes of the fleet allowed to be unavailable at once (--max-unavailable).", nil, nil),
		usedDesc:  prometheus.NewDesc("slipway_operator_budget_unavailable", "Nodes counting against the fleet's budget, as admission counts them.", nil, nil),
		halted: prometheus.NewDesc("slipway_operator_version_halted",
			"1 for each OS version the fleet record holds halted (--max-failed-per-version) until kubectl slipway resume --version; one series per halted version.", []string{"version"}, nil),
		failedNow: prometheus.NewDesc("slipway_operator_remembered_failed_reboots",
			"Nodes whose failed reboots count against --max-failed-reboots now, from the fleet record (until kubectl slipway resume --failures).", nil, nil),
		longestWait: prometheus.NewDesc("slipway_operator_longest_wait_seconds",
			"How long the node that has waited longest for its turn has been waiting (its update.slipway.dev/waiting-since); 0 when none waits. Read from the Nodes: a leader change does not restart it.", nil, nil),
		nodeInfo: prometheus.NewDesc("slipway_operator_node_info",
			"1 per Node (one series each: 5,000 nodes are 5,000 series): its OS version (the agent's os-release label), cycle state, what holds it (the kind in update.slipway.dev/blocked-by, \"\" nothing), why it is stalled (\"\" it is not) and its RebootPolicy (\"\" the flags').",
			[]string{"node", "os_version", "state", "blocked_by", "stalled", "policy"}, nil),
		inCycle: prometheus.NewDesc("slipway_operator_node_in_cycle",
			"1 for each node in its reboot cycle (admitted: hooks, drain, reboot, back and not yet finished); no series for the others. For inhibiting node alerts during a planned reboot (deploy/monitoring/alertmanager-inhibit.yaml).",
			[]string{"node"}, nil),
		noAgent: prometheus.NewDesc("slipway_operator_nodes_without_agent",
			"Nodes Ready for 10 minutes without any key an update-agent (Slipway's or FLUO's) or the FleetLock server writes: they never ask to reboot.", nil, nil),
		versionNodes: prometheus.NewDesc("slipway_operator_version_nodes",
			"Nodes per OS version, a roll-out's progress: phase on (running it, out of their cycle), asking (waiting to reboot for it), in_cycle (in their cycle for it).",
			[]string{"version", "phase"}, nil),
		proofCycles: prometheus.NewDesc("slipway_version_cycles",
			"Per OS version, what this cluster proved: result finished (cycles Slipway ran for it that ended on it, the fleet record's proofs) and failed (failures recorded for it since a person last resumed it). Only the leader publishes.",
			[]string{"version", "result"}, nil),
		proofHalted: prometheus.NewDesc("slipway_version_halted",
			"Per OS version: 1 while it may not be rebooted into here (a person's halt, or --max-failed-per-version reached), else 0.",
			[]string{"version"}, nil),
		proofSince: prometheus.NewDesc("slipway_version_proven_since_seconds",
			"Per OS version proven here (max(--canary-nodes, 1) cycles finished on it, the canary bake after them passed, no failure since its last resume, no halt): Unix time it became proven. No series while it is not.",
			[]string{"version"}, nil),
		proofFirst: prometheus.NewDesc("slipway_version_first_rebooted_seconds",
			"Per OS version: Unix time the first cycle Slipway ran for it ended on it (the fleet record's oldest proof still kept). No series before one did.",
			[]string{"version"}, nil),
		now: time.Now,
		IsLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slipway_operator_is_leader", Help: "1 while this instance holds the leader lease.",
		}),
		needToGrant: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slipway_operator_need_to_grant_seconds",
			Help:    "From the operator first seeing a node need a reboot to reboot-ok: waiting for admission, hooks and the drain.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10 ms .. ~12 days
		}),
		grantToBack: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slipway_operator_grant_to_back_seconds",
			Help:    "From reboot-ok to the cycle finishing: the reboot, the node coming back Ready, after-reboot hooks.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 s .. ~4.5 h
		}),
		drainSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slipway_operator_drain_seconds",
			Help:    "From cordon (drain started) to the drain succeeding, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.1, 3, 12), // 100 ms .. ~5 h
		}),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_cycles_total", Help: "Cycles ended, by result: finished (verified reboot), failed (back on the old OS version), undrainable (--drain-failure-policy=skip), aborted, or replaced (the Node was deleted in its cycle).",
		}, []string{"result"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_stalls_total", Help: "Times a node was reported stalled, by reason.",
		}, []string{"reason"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_failed_reboots_total", Help: "Failed reboots, by reason: stalled after the grant, back on the old OS version (both marked on their Node, reboot-failed), replaced (the Node deleted after its grant, before its cycle finished: a failure of the version its grant pinned, in the fleet record) (blocker: only from releases that also failed a node back while a fleet-wide blocker fired).",
		}, []string{"reason"}),
		settleTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_settle_timeouts_total", Help: "Finished nodes whose PodDisruptionBudgets were not back within --settle-timeout.",
		}),
		overrides: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_overrides_total", Help: "Break-glass changes of Slipway's keys on a Node by a person (update.slipway.dev/override, each also an Override Warning Event).",
		}),
		selfPauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_self_pauses_total", Help: "Times the operator paused the fleet because --max-failed-reboots was reached.",
		}),
		paused: prometheus.NewDesc("slipway_operator_fleet_paused",
			"1 while the fleet switch (ConfigMap slipway-fleet) pauses the whole fleet (a person's pause, or the failure budget's: failures-paused); one series per paused group with group set.", []string{"group"}, nil),
		nodesByState: prometheus.NewDesc("slipway_operator_nodes", "Nodes by cycle state.", []string{"state"}, nil),
		stalled: prometheus.NewDesc("slipway_operator_stalled_nodes",
			"Nodes longer than --reboot-timeout in one stage of their cycle, by reason (the update.slipway.dev/stalled annotation).", []string{"reason"}, nil),
		blocked: prometheus.NewDesc("slipway_operator_blocked_nodes",
			"Nodes waiting to start a cycle, by what holds them (the kind in update.slipway.dev/blocked-by: budget, window, paused, order, or a blocker's name).", []string{"reason"}, nil),
	}
	reg.MustRegister(m.actions, m.drainFails, m.IsLeader, m.needToGrant, m.grantToBack,
		m.drainSeconds, m.cycles, m.stalls, m.failed, m.selfPauses, m.settleTimeouts, m.overrides, m)
	for _, r := range []string{"finished", "aborted"} {
		m.cycles.WithLabelValues(r)
	}
	for _, r := range stall.Reasons {
		m.stalls.WithLabelValues(r)
	}
	return m
}

// Observe sets what the scrape-time metrics read (New calls it with the Controller).
func (m *Metrics) Observe(v FleetView) { m.view = v }

// Describe implements prometheus.Collector for the per-state node counts.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.nodesByState
	ch <- m.stalled
	ch <- m.blocked
	ch <- m.paused
	ch <- m.limitDesc
	ch <- m.usedDesc
	ch <- m.longestWait
	ch <- m.halted
	ch <- m.failedNow
	ch <- m.nodeInfo
	ch <- m.inCycle
	ch <- m.noAgent
	ch <- m.versionNodes
	ch <- m.proofCycles
	ch <- m.proofHalted
	ch <- m.proofSince
	ch <- m.proofFirst
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counts := map[protocol.State]int{}
	for _, s := range []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining, protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks} {
		counts[s] = 0
	}
	blocked := map[string]int{}
	for _, k := range admission.Kinds {
		blocked[string(k)] = 0
	}
	stalled := map[string]int{}
	for _, r := range stall.Reasons {
		stalled[r] = 0
	}
	longest := 0.0
	if m.view != nil {
		now := m.now()
		noAgent := 0
		type phase struct{ version, phase string }
		versions := map[phase]int{}
		for _, n := range m.view.Nodes() {
			f := protocol.Observe(n, protocol.Hooks{}) // hooks do not change the state
			state := protocol.Classify(f)
			counts[state]++
			version := n.Labels[protocol.Version]
			switch {
			case state.InCycle():
				ch <- prometheus.MustNewConstMetric(m.inCycle, prometheus.GaugeValue, 1, n.Name)
				if v := n.Annotations[protocol.RebootVersion]; v != "" {
					version = v // granted for it
				} else if v := protocol.AskedVersion(n); v != "" {
					version = v
				}
				versions[phase{version, "in_cycle"}]++
			case state == protocol.NeedsReboot && protocol.AskedVersion(n) != "":
				versions[phase{protocol.AskedVersion(n), "asking"}]++
				versions[phase{version, "on"}]++
			default:
				versions[phase{version, "on"}]++
			}
			if protocol.NoAgent(n, f, now) {
				noAgent++
			}
			ch <- prometheus.MustNewConstMetric(m.nodeInfo, prometheus.GaugeValue, 1, n.Name, n.Labels[protocol.Version], string(state),
				string(admission.KindOf(n.Annotations[protocol.BlockedBy])), f.Stalled, m.view.PolicyOf(n, state.InCycle()))
			if t, err := time.Parse(time.RFC3339, n.Annotations[protocol.WaitingSince]); err == nil && state == protocol.NeedsReboot {
				longest = max(longest, now.Sub(t).Seconds())
			}
			if f.Stalled != "" {
				stalled[f.Stalled]++
			}
			if why, ok := n.Annotations[protocol.BlockedBy]; ok {
				blocked[string(admission.KindOf(why))]++
			}
		}
		for _, p := range m.view.Pools() {
			if p.Kind == admission.PoolFleet {
				ch <- prometheus.MustNewConstMetric(m.limitDesc, prometheus.GaugeValue, float64(p.Limit))
				ch <- prometheus.MustNewConstMetric(m.usedDesc, prometheus.GaugeValue, float64(p.Used))
			}
		}
		sw := m.view.Switch()
		v := 0.0
		if sw.Paused || sw.FailuresPaused {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.paused, prometheus.GaugeValue, v, "")
		for _, g := range sw.PausedGroups() {
			ch <- prometheus.MustNewConstMetric(m.paused, prometheus.GaugeValue, 1, g)
		}
		halted, failed := m.view.Remembered()
		for _, ver := range halted {
			ch <- prometheus.MustNewConstMetric(m.halted, prometheus.GaugeValue, 1, ver)
		}
		ch <- prometheus.MustNewConstMetric(m.failedNow, prometheus.GaugeValue, float64(failed))
		ch <- prometheus.MustNewConstMetric(m.noAgent, prometheus.GaugeValue, float64(noAgent))
		for p, v := range versions {
			if p.version != "" {
				ch <- prometheus.MustNewConstMetric(m.versionNodes, prometheus.GaugeValue, float64(v), p.version, p.phase)
			}
		}
		for _, p := range m.view.VersionProofs(now) {
			ch <- prometheus.MustNewConstMetric(m.proofCycles, prometheus.GaugeValue, float64(p.Finished), p.Version, "finished")
			ch <- prometheus.MustNewConstMetric(m.proofCycles, prometheus.GaugeValue, float64(p.Failed), p.Version, "failed")
			halted := 0.0
			if p.Halted {
				halted = 1
			}
			ch <- prometheus.MustNewConstMetric(m.proofHalted, prometheus.GaugeValue, halted, p.Version)
			if !p.ProvenSince.IsZero() {
				ch <- prometheus.MustNewConstMetric(m.proofSince, prometheus.GaugeValue, float64(p.ProvenSince.Unix()), p.Version)
			}
			if !p.FirstFinished.IsZero() {
				ch <- prometheus.MustNewConstMetric(m.proofFirst, prometheus.GaugeValue, float64(p.FirstFinished.Unix()), p.Version)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(m.longestWait, prometheus.GaugeValue, longest)
	for r, v := range blocked {
		ch <- prometheus.MustNewConstMetric(m.blocked, prometheus.GaugeValue, float64(v), r)
	}
	for r, v := range stalled {
		ch <- prometheus.MustNewConstMetric(m.stalled, prometheus.GaugeValue, float64(v), r)
	}
	for s, v := range counts {
		ch <- prometheus.MustNewConstMetric(m.nodesByState, prometheus.GaugeValue, float64(v), string(s))
	}
}
