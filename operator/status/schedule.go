package status

import (
	"time"

	"github.com/slipway-dev/slipway/operator/window"
)

// schedule judges the operator's schedule (its policy's windows, FLUO's window and exclusions) at now.
func schedule(set settings, now time.Time) Schedule {
	s := Schedule{Windows: []string{}, Exclusions: []string{}}
	if set.pol == nil {
		s.Error = set.why
		return s
	}
	s.Windows = append(s.Windows, set.pol.Spec.Windows...)
	s.Exclusions = append(s.Exclusions, set.pol.Spec.Exclusions...)
	s.Known = true
	sched, ok := set.pol.Schedule.(*window.Schedule)
	if !ok { // no window: always open
		s.Open = true
		return s
	}
	if w := sched.FLUO(); w != nil {
		s.Windows = append([]string{w.String()}, s.Windows...)
	}
	s.Open = sched.Open(now)
	if !s.Open {
		s.ClosedBy = sched.ClosedBy(now)
		s.NextOpen = timePtr(sched.NextOpen(now))
	}
	return s
}
