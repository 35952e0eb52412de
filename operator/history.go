package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// DefaultHistoryEvery is Config.HistoryEvery's default: a roll-out writes its history every few
// minutes rather than with each cycle (one more request per cycle otherwise).
const DefaultHistoryEvery = 5 * time.Minute

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
// history; a fleet sync writes it within Config.HistoryEvery, and Run when the controller stops (a
// leader that dies meanwhile loses those entries, never a failure: those are the fleet record's).
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
	c.fleet.mu.Lock()
	c.fleet.hist.Add(e)
	c.fleet.hist.Bound()
	if c.fleet.histSince.IsZero() {
		c.fleet.histSince = c.cfg.Now()
	}
	c.fleet.mu.Unlock()
	c.queue.AddAfter(fleetKey, c.cfg.HistoryEvery)
}

// writeHistory stores the cycles that ended since the last write, merged onto the ConfigMap as stored
// (conditional on its resourceVersion; a conflict reads it again), once the oldest of them has waited
// Config.HistoryEvery, or at once when force; else it returns how much longer they wait. A roll-out
// writes it every few minutes, not with every cycle. The stored record is read once per leadership
// (then this leader's own write is the newest); one it cannot read is left as it is, entries kept.
func (c *Controller) writeHistory(ctx context.Context, force bool) (wait time.Duration, err error) {
	c.fleet.mu.Lock()
	pending := len(c.fleet.hist.Cycles) > 0
	cm := c.fleet.histWritten
	due := c.fleet.histSince.Add(c.cfg.HistoryEvery)
	c.fleet.mu.Unlock()
	if !pending {
		return 0, nil
	}
	if now := c.cfg.Now(); !force && now.Before(due) {
		return due.Sub(now), nil
	}
	var written []history.Cycle
	out, err := c.storeConfigMap(ctx, history.ConfigMapName, history.Key, cm, cm == nil, func(cm *corev1.ConfigMap) (string, bool, error) {
		var stored history.Record
		if cm != nil {
			var err error
			if stored, err = history.Decode(cm.Data[history.Key]); err != nil {
				return "", false, fmt.Errorf("ConfigMap %s/%s: %w; not overwriting it (mend or delete it: it holds only the history)", c.cfg.Namespace, history.ConfigMapName, err)
			}
		}
		c.fleet.mu.Lock()
		defer c.fleet.mu.Unlock()
		written = slices.Clone(c.fleet.hist.Cycles)
		stored.Merge(c.fleet.hist)
		return stored.Encode(), true, nil
	})
	if err != nil {
		return 0, err
	}
	c.fleet.mu.Lock()
	c.fleet.histWritten = out
	// Those that ended meanwhile wait for the next write: the entries written leave by identity
	// (the pending list is sorted and bounded, so positions may have moved meanwhile).
	c.fleet.hist.Cycles = slices.DeleteFunc(c.fleet.hist.Cycles, func(p history.Cycle) bool {
		return slices.ContainsFunc(written, func(w history.Cycle) bool { return history.Same(p, w) })
	})
	c.fleet.histSince = time.Time{}
	if len(c.fleet.hist.Cycles) > 0 {
		c.fleet.histSince = c.cfg.Now()
	}
	c.fleet.mu.Unlock()
	return 0, nil
}
