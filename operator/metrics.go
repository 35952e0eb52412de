package operator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slipway-dev/slipway/internal/fleet"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// Metrics are the operator's Prometheus metrics. Node counts per state are computed from the
// informer cache at scrape time, so they can never drift from what the controller sees.
type Metrics struct {
	actions      *prometheus.CounterVec
	drainFails   prometheus.Counter
	limit        prometheus.Gauge
	unavailable  prometheus.Gauge
	IsLeader     prometheus.Gauge
	needToGrant  prometheus.Histogram
	grantToBack  prometheus.Histogram
	drainSeconds prometheus.Histogram
	cycles       *prometheus.CounterVec
	stalls       *prometheus.CounterVec
	failed       prometheus.Counter
	selfPauses   prometheus.Counter
	paused       *prometheus.Desc
	nodesByState *prometheus.Desc
	stalled      *prometheus.Desc
	blocked      *prometheus.Desc
	c            *Controller
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
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slipway_operator_budget_limit", Help: "Nodes allowed to be unavailable at once (last computed).",
		}),
		unavailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slipway_operator_budget_unavailable", Help: "Nodes counting against the budget (last computed).",
		}),
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
			Name: "slipway_operator_cycles_total", Help: "Cycles ended, by result: finished (verified reboot) or aborted.",
		}, []string{"result"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_stalls_total", Help: "Times a node was reported stalled, by reason.",
		}, []string{"reason"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_failed_reboots_total", Help: "Nodes counted against --max-failed-reboots.",
		}),
		selfPauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slipway_operator_self_pauses_total", Help: "Times the operator paused the fleet because --max-failed-reboots was reached.",
		}),
		paused: prometheus.NewDesc("slipway_operator_fleet_paused",
			"1 while the fleet switch (ConfigMap slipway-fleet) pauses the whole fleet; one series per paused group with group set.", []string{"group"}, nil),
		nodesByState: prometheus.NewDesc("slipway_operator_nodes", "Nodes by cycle state.", []string{"state"}, nil),
		stalled: prometheus.NewDesc("slipway_operator_stalled_nodes",
			"Nodes longer than --reboot-timeout in one stage of their cycle, by reason (the update.slipway.dev/stalled annotation).", []string{"reason"}, nil),
		blocked: prometheus.NewDesc("slipway_operator_blocked_nodes",
			"Nodes waiting to start a cycle, by what holds them (the kind in update.slipway.dev/blocked-by: budget, window, paused, order, or a blocker's name).", []string{"reason"}, nil),
	}
	reg.MustRegister(m.actions, m.drainFails, m.limit, m.unavailable, m.IsLeader, m.needToGrant, m.grantToBack,
		m.drainSeconds, m.cycles, m.stalls, m.failed, m.selfPauses, m)
	for _, r := range []string{"finished", "aborted"} {
		m.cycles.WithLabelValues(r)
	}
	for _, r := range StallReasons {
		m.stalls.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) watch(c *Controller) { m.c = c }

func (m *Metrics) acted(r protocol.Row) { m.actions.WithLabelValues(string(r.Do)).Inc() }

func (m *Metrics) drainFailed() { m.drainFails.Inc() }

func (m *Metrics) stallCounted(reason string) { m.stalls.WithLabelValues(reason).Inc() }

func (m *Metrics) failedReboot() { m.failed.Inc() }

func (m *Metrics) selfPaused() { m.selfPauses.Inc() }

func (m *Metrics) budget(limit, unavailable int) {
	m.limit.Set(float64(limit))
	m.unavailable.Set(float64(unavailable))
}

// Describe implements prometheus.Collector for the per-state node counts.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.nodesByState
	ch <- m.stalled
	ch <- m.blocked
	ch <- m.paused
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counts := map[protocol.State]int{}
	for _, s := range []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining, protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks} {
		counts[s] = 0
	}
	blocked := map[string]int{BlockedBudget: 0, BlockedWindow: 0, BlockedPaused: 0, BlockedOrder: 0}
	stalled := map[string]int{}
	for _, r := range StallReasons {
		stalled[r] = 0
	}
	if m.c != nil {
		for _, n := range m.c.allNodes() {
			f := protocol.Observe(n, m.c.cfg.Hooks)
			counts[protocol.Classify(f)]++
			if f.Stalled != "" {
				stalled[f.Stalled]++
			}
			if why, ok := n.Annotations[protocol.BlockedBy]; ok {
				blocked[blockedKind(why)]++
			}
		}
	}
	if m.c != nil {
		sw := fleet.Read(m.c.fleetConfigMap())
		v := 0.0
		if sw.Paused {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.paused, prometheus.GaugeValue, v, "")
		for _, g := range sw.PausedGroups() {
			ch <- prometheus.MustNewConstMetric(m.paused, prometheus.GaugeValue, 1, g)
		}
	}
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
