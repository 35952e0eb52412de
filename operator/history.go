package operator

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/fleetstore"
)

// Defaults of Config.HistoryEvery and Config.FleetLazyEvery (package fleetstore).
const (
	DefaultHistoryEvery   = fleetstore.DefaultHistoryEvery
	DefaultFleetLazyEvery = fleetstore.DefaultLazyEvery
)

// cycleMark is what a cycle's end cannot read off its Node any more: when the node asked and when its
// drain started (both cleared before the cycle ends), noted when it is granted its reboot, with the
// cycle it belongs to (its cycle-started value: a mark left by a cycle that ended unseen is not
// another cycle's).
type cycleMark struct {
	cycle          string
	asked, drained time.Time
}

// markGranted notes, as n is granted its reboot, when it asked (the admission index's wait start;
// zero unknown) and when its drain started, for the history entry its cycle's end writes.
func (c *Controller) markGranted(n *corev1.Node, asked time.Time) {
	drained, _ := time.Parse(time.RFC3339, n.Annotations[protocol.DrainStarted])
	c.cycleMarks.Store(n.Name, cycleMark{cycle: n.Annotations[protocol.CycleStarted], asked: asked, drained: drained})
}

// ended adds the cycle of n that ended now with result (history.Finished, ...) and why to the
// history (fleetstore.Store.Ended).
func (c *Controller) ended(n *corev1.Node, result, why string, now time.Time) {
	a := n.Annotations
	e := history.Cycle{Node: n.Name, UID: string(n.UID), Result: result, Why: truncate(why, 256), Ended: now.UTC()}
	e.Version = a[protocol.RebootVersion]
	if e.Version == "" {
		e.Version = protocol.AskedVersion(n)
	}
	e.Policy, _, _ = strings.Cut(a[protocol.AdmittedPolicy], "/")
	e.Admitted, _ = time.Parse(time.RFC3339, a[protocol.CycleStarted])
	e.Granted, _ = time.Parse(time.RFC3339, a[protocol.RebootOKTime])
	if m, ok := c.cycleMarks.LoadAndDelete(n.Name); ok && m.(cycleMark).cycle == a[protocol.CycleStarted] {
		e.Asked, e.Drained = m.(cycleMark).asked.UTC(), m.(cycleMark).drained
	}
	c.store.Ended(e)
}
