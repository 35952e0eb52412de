package status

import (
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/operator/window"
)

// schedule rebuilds the operator's window.Schedule from the windows, exclusions and FLUO window it
// published and judges it at now. The operator publishes them as given (window.Schedule.Specs,
// window.Window.Spec), so they parse as they did when it started.
func schedule(st fleetswitch.Status, published bool, now time.Time) Schedule {
	s := Schedule{
		Windows:    append([]string{}, st.Windows...),
		Exclusions: append([]string{}, st.Exclusions...),
	}
	if !published {
		s.Error = "the operator has published no status"
		return s
	}
	sched, err := parseSchedule(st)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	if w := sched.FLUO(); w != nil {
		s.Windows = append([]string{w.String()}, s.Windows...)
	}
	s.Known = true
	s.Open = sched.Open(now)
	if !s.Open {
		s.ClosedBy = sched.ClosedBy(now)
		s.NextOpen = timePtr(sched.NextOpen(now))
	}
	return s
}

func parseSchedule(st fleetswitch.Status) (*window.Schedule, error) {
	var fluo *window.Window
	if w := st.FLUOWindow; w != nil {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("FLUO window time zone %q: %w", w.TimeZone, err)
		}
		if fluo, err = window.Parse(w.Start, w.Length, loc); err != nil {
			return nil, err
		}
	}
	var rules []*window.Rule
	for _, spec := range st.Windows {
		r, err := window.ParseWindow(spec)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	var excl []window.Exclusion
	for _, spec := range st.Exclusions {
		e, err := window.ParseExclusion(spec)
		if err != nil {
			return nil, err
		}
		excl = append(excl, e)
	}
	return window.NewSchedule(fluo, rules, excl), nil
}
