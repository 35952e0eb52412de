package status

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/slipway-dev/slipway/internal/fleet"
	"github.com/slipway-dev/slipway/operator/window"
)

// schedule rebuilds the operator's window.Schedule from the windows and exclusions it published and
// judges it at now. The operator publishes them as given (window.Schedule.Specs), so they parse as
// they did when it started; FLUO's window, which has no spec of its own, is published as its String
// and read back by parseFLUO.
func schedule(st fleet.Status, published bool, now time.Time) Schedule {
	s := Schedule{
		Windows:    append([]string{}, st.Windows...),
		Exclusions: append([]string{}, st.Exclusions...),
	}
	if !published {
		s.Error = "the operator has published no status"
		return s
	}
	sched, err := parseSchedule(st.Windows, st.Exclusions)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Known = true
	s.Open = sched.Open(now)
	if !s.Open {
		s.ClosedBy = sched.ClosedBy(now)
		s.NextOpen = timePtr(sched.NextOpen(now))
	}
	return s
}

func parseSchedule(windows, exclusions []string) (*window.Schedule, error) {
	var fluo *window.Window
	var rules []*window.Rule
	var excl []window.Exclusion
	for _, spec := range windows {
		if r, err := window.ParseWindow(spec); err == nil {
			rules = append(rules, r)
			continue
		} else if w, ferr := parseFLUO(spec); ferr == nil && fluo == nil {
			fluo = w
		} else {
			return nil, err
		}
	}
	for _, spec := range exclusions {
		e, err := window.ParseExclusion(spec)
		if err != nil {
			return nil, err
		}
		excl = append(excl, e)
	}
	return window.NewSchedule(fluo, rules, excl), nil
}

// fluoString matches window.Window's String: "Thu 14:00 for 1h30m0s (Europe/Berlin)", "daily 14:00
// for 1h0m0s (UTC)". TestFLUOWindowReadBack keeps the two in step.
var fluoString = regexp.MustCompile(`^(daily|Sun|Mon|Tue|Wed|Thu|Fri|Sat) (\d\d:\d\d) for (\S+) \((\S+)\)$`)

// parseFLUO reads FLUO's window back from its String.
func parseFLUO(s string) (*window.Window, error) {
	m := fluoString.FindStringSubmatch(s)
	if m == nil {
		return nil, errors.New("not FLUO's window")
	}
	loc, err := time.LoadLocation(m[4])
	if err != nil {
		return nil, fmt.Errorf("FLUO window %q: %w", s, err)
	}
	start := m[2]
	if m[1] != "daily" {
		start = m[1] + " " + start
	}
	return window.Parse(start, m[3], loc)
}
