package window

import (
	"strings"
	"time"
)

// Horizon is how far [Schedule.NextOpen] looks ahead.
const Horizon = 400 * 24 * time.Hour

// Schedule combines FLUO's window, any number of windows and any number of exclusions: it is open when
// at least one window is open (or there is none at all) and no exclusion covers the instant. A nil
// *Schedule is always open. A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	fluo       *Window
	windows    []*Rule
	exclusions []Exclusion
}

// NewSchedule builds a schedule. fluo may be nil (no FLUO window); nil entries in windows are ignored.
// It counts FLUO's window as one more window.
func NewSchedule(fluo *Window, windows []*Rule, exclusions []Exclusion) *Schedule {
	s := &Schedule{fluo: fluo}
	for _, r := range windows {
		if r != nil {
			s.windows = append(s.windows, r)
		}
	}
	s.exclusions = append([]Exclusion(nil), exclusions...)
	return s
}

// hasWindows reports whether any window restricts the schedule.
func (s *Schedule) hasWindows() bool { return s.fluo != nil || len(s.windows) > 0 }

// inWindow reports whether a window is open at t (true when there is none).
func (s *Schedule) inWindow(t time.Time) bool {
	if !s.hasWindows() {
		return true
	}
	if s.fluo != nil && s.fluo.Contains(t) {
		return true
	}
	for _, r := range s.windows {
		if r.Contains(t) {
			return true
		}
	}
	return false
}

// excludedBy returns the exclusion covering t, if any.
func (s *Schedule) excludedBy(t time.Time) (Exclusion, bool) {
	for _, e := range s.exclusions {
		if e.Contains(t) {
			return e, true
		}
	}
	return Exclusion{}, false
}

// Open reports whether a new cycle may start at t.
func (s *Schedule) Open(t time.Time) bool {
	if s == nil {
		return true
	}
	_, excluded := s.excludedBy(t)
	return !excluded && s.inWindow(t)
}

// ClosedBy says why the schedule is closed at t, for a waiting node's reason: "" when it is open,
// "outside the reboot windows", or "reboot exclusion <exclusion>" when an exclusion covers t (an
// exclusion is named even if the windows are closed too, as it is the longer wait to explain).
func (s *Schedule) ClosedBy(t time.Time) string {
	if s == nil {
		return ""
	}
	if e, ok := s.excludedBy(t); ok {
		return "reboot exclusion " + e.String()
	}
	if !s.inWindow(t) {
		return "outside the reboot windows"
	}
	return ""
}

// nextWindow is the earliest instant at or after t at which a window is open (t when there is none).
func (s *Schedule) nextWindow(t time.Time) time.Time {
	if !s.hasWindows() {
		return t
	}
	var next time.Time
	consider := func(c time.Time) {
		if !c.IsZero() && (next.IsZero() || c.Before(next)) {
			next = c
		}
	}
	if s.fluo != nil {
		consider(s.fluo.NextOpen(t))
	}
	for _, r := range s.windows {
		consider(r.NextOpen(t))
	}
	return next
}

// NextOpen returns the earliest instant at or after t at which the schedule is open: t itself when it
// is open at t, else the start of a window or the end of an exclusion. It looks at most Horizon (400
// days) ahead and returns the zero time when the schedule stays closed that long. A nil Schedule
// returns t.
func (s *Schedule) NextOpen(t time.Time) time.Time {
	if s == nil {
		return t
	}
	limit := t.Add(Horizon)
	cur := t
	// Each round either ends in an open instant or moves past the end of an exclusion for good, so
	// there are at most len(exclusions)+1 rounds.
	for {
		cur = s.nextWindow(cur)
		if cur.IsZero() || cur.After(limit) {
			return time.Time{}
		}
		e, excluded := s.excludedBy(cur)
		if !excluded {
			if cur.Equal(t) {
				return t
			}
			return cur.In(t.Location())
		}
		cur = e.end
	}
}

// String describes the schedule for logs, e.g.
// `windows [Mon-Fri 22:00-05:00 Europe/Berlin | Sat,Sun 00:00-24:00 UTC], exclusions [2026-12-24/2026-12-26 UTC]`.
func (s *Schedule) String() string {
	if s == nil || (!s.hasWindows() && len(s.exclusions) == 0) {
		return "always open"
	}
	var b strings.Builder
	b.WriteString("windows [")
	if !s.hasWindows() {
		b.WriteString("always")
	}
	sep := ""
	if s.fluo != nil {
		b.WriteString(s.fluo.String())
		sep = " | "
	}
	for _, r := range s.windows {
		b.WriteString(sep + r.String())
		sep = " | "
	}
	b.WriteString("]")
	if len(s.exclusions) > 0 {
		b.WriteString(", exclusions [")
		for i, e := range s.exclusions {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(e.String())
		}
		b.WriteString("]")
	}
	return b.String()
}

// Specs returns the windows and exclusions as they were given (blanks collapsed), for publishing;
// FLUO's window, which has a form of its own, is FLUO. Both are nil when there are none.
func (s *Schedule) Specs() (windows, exclusions []string) {
	if s == nil {
		return nil, nil
	}
	for _, r := range s.windows {
		windows = append(windows, r.Spec())
	}
	for _, e := range s.exclusions {
		exclusions = append(exclusions, e.Spec())
	}
	return windows, exclusions
}

// FLUO is FLUO's window in the schedule (nil: none).
func (s *Schedule) FLUO() *Window {
	if s == nil {
		return nil
	}
	return s.fluo
}
