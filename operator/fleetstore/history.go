package fleetstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/history"
)

// Ended adds a cycle that ended to the history; a fleet sync writes it within Config.HistoryEvery,
// and Flush when the controller stops (a leader that dies meanwhile loses those entries, never a
// failure: those are the fleet record's).
func (s *Store) Ended(e history.Cycle) {
	s.mu.Lock()
	s.hist.Add(e)
	s.hist.Bound()
	if s.histSince.IsZero() {
		s.histSince = s.cfg.Now()
	}
	s.mu.Unlock()
	s.cfg.OnSync(s.cfg.HistoryEvery)
}

// WriteHistory stores the cycles that ended since the last write, merged onto the ConfigMap as stored
// (conditional on its resourceVersion; a conflict reads it again), once the oldest of them has waited
// Config.HistoryEvery, or at once when force; else it returns how much longer they wait. A roll-out
// writes it every few minutes, not with every cycle. The stored record is read once per leadership
// (then this leader's own write is the newest); one it cannot read is left as it is, entries kept.
func (s *Store) WriteHistory(ctx context.Context, force bool) (wait time.Duration, err error) {
	s.mu.Lock()
	pending := len(s.hist.Cycles) > 0
	cm := s.histWritten
	due := s.histSince.Add(s.cfg.HistoryEvery)
	s.mu.Unlock()
	if !pending {
		return 0, nil
	}
	if now := s.cfg.Now(); !force && now.Before(due) {
		return due.Sub(now), nil
	}
	var written []history.Cycle
	out, err := s.storeConfigMap(ctx, history.ConfigMapName, cm, cm == nil, func(cm *corev1.ConfigMap) (map[string]string, error) {
		var stored history.Record
		if cm != nil {
			var err error
			if stored, err = history.Decode(cm.Data[history.Key]); err != nil {
				return nil, fmt.Errorf("ConfigMap %s/%s: %w; not overwriting it (mend or delete it: it holds only the history)", s.cfg.Namespace, history.ConfigMapName, err)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		written = slices.Clone(s.hist.Cycles)
		stored.Merge(s.hist)
		return map[string]string{history.Key: stored.Encode()}, nil
	})
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.histWritten = out
	// Those that ended meanwhile wait for the next write: the entries written leave by identity
	// (the pending list is sorted and bounded, so positions may have moved meanwhile).
	s.hist.Cycles = slices.DeleteFunc(s.hist.Cycles, func(p history.Cycle) bool {
		return slices.ContainsFunc(written, func(w history.Cycle) bool { return history.Same(p, w) })
	})
	s.histSince = time.Time{}
	if len(s.hist.Cycles) > 0 {
		s.histSince = s.cfg.Now()
	}
	s.mu.Unlock()
	return 0, nil
}
