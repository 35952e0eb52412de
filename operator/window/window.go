package window

// This file holds FLUO's window (--reboot-window-start, --reboot-window-length); see doc.go for the
// package as a whole.

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a daily or weekly repeating span of time, evaluated in Location.
type Window struct {
	weekday  time.Weekday
	weekly   bool
	hour     int
	minute   int
	length   time.Duration
	Location *time.Location
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Parse reads a start and a length. Both empty means "no window" (nil, nil): always open. One without
// the other is an error, as are lengths that are not positive or not shorter than the period (a window
// as long as its period would always be open: say so by giving none).
func Parse(start, length string, loc *time.Location) (*Window, error) {
	start, length = strings.TrimSpace(start), strings.TrimSpace(length)
	if start == "" && length == "" {
		return nil, nil
	}
	if start == "" || length == "" {
		return nil, fmt.Errorf("reboot window needs both a start and a length (got start %q, length %q)", start, length)
	}
	if loc == nil {
		loc = time.UTC
	}
	w := &Window{Location: loc}
	fields := strings.Fields(start)
	clock := fields[0]
	switch len(fields) {
	case 1:
	case 2:
		d, ok := weekdays[strings.ToLower(fields[0])]
		if !ok {
			return nil, fmt.Errorf("reboot window start %q: unknown day %q (want Sun, Mon, Tue, Wed, Thu, Fri or Sat)", start, fields[0])
		}
		w.weekday, w.weekly, clock = d, true, fields[1]
	default:
		return nil, fmt.Errorf("reboot window start %q: want \"HH:MM\" or \"Day HH:MM\"", start)
	}
	h, m, ok := strings.Cut(clock, ":")
	var err1, err2 error
	if ok {
		w.hour, err1 = strconv.Atoi(h)
		w.minute, err2 = strconv.Atoi(m)
	}
	if !ok || err1 != nil || err2 != nil || w.hour < 0 || w.hour > 23 || w.minute < 0 || w.minute > 59 {
		return nil, fmt.Errorf("reboot window start %q: time must be HH:MM with hours 0-23 and minutes 0-59", start)
	}
	d, err := time.ParseDuration(length)
	if err != nil {
		return nil, fmt.Errorf("reboot window length %q: %w", length, err)
	}
	if d <= 0 {
		return nil, fmt.Errorf("reboot window length %q must be positive", length)
	}
	if d >= w.period() {
		return nil, fmt.Errorf("reboot window length %q must be shorter than its period (%s)", length, w.period())
	}
	w.length = d
	return w, nil
}

func (w *Window) period() time.Duration {
	if w.weekly {
		return 7 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// lastStart is the latest window start at or before t.
func (w *Window) lastStart(t time.Time) time.Time {
	t = t.In(w.Location)
	s := time.Date(t.Year(), t.Month(), t.Day(), w.hour, w.minute, 0, 0, w.Location)
	if w.weekly {
		s = s.AddDate(0, 0, -((int(t.Weekday()) - int(w.weekday) + 7) % 7))
	}
	if s.After(t) {
		if w.weekly {
			s = s.AddDate(0, 0, -7)
		} else {
			s = s.AddDate(0, 0, -1)
		}
	}
	return s
}

// Contains reports whether t is inside a window (start inclusive, end exclusive). A nil Window is
// always open.
func (w *Window) Contains(t time.Time) bool {
	if w == nil {
		return true
	}
	return t.Before(w.lastStart(t).Add(w.length))
}

// NextOpen returns t if the window is open at t, else the next start after t.
func (w *Window) NextOpen(t time.Time) time.Time {
	if w.Contains(t) {
		return t
	}
	s := w.lastStart(t)
	if w.weekly {
		return s.AddDate(0, 0, 7)
	}
	return s.AddDate(0, 0, 1)
}

// String describes the window for logs.
func (w *Window) String() string {
	if w == nil {
		return "always"
	}
	day := "daily"
	if w.weekly {
		day = w.weekday.String()[:3]
	}
	return fmt.Sprintf("%s %02d:%02d for %s (%s)", day, w.hour, w.minute, w.length, w.Location)
}

// Spec is the window as Parse takes it (start, length, zone name), for publishing: Parse(Spec()) gives
// the same window (TestWindowSpecRoundTrip).
func (w *Window) Spec() (start, length, zone string) {
	if w == nil {
		return "", "", ""
	}
	start = fmt.Sprintf("%02d:%02d", w.hour, w.minute)
	if w.weekly {
		start = w.weekday.String()[:3] + " " + start
	}
	return start, w.length.String(), w.Location.String()
}
