package window

import (
	"reflect"
	"testing"
	"time"
)

func schedule(t *testing.T, fluo *Window, windows []string, exclusions []string) *Schedule {
	t.Helper()
	var rs []*Rule
	for _, w := range windows {
		rs = append(rs, mustWindow(t, w))
	}
	var es []Exclusion
	for _, e := range exclusions {
		es = append(es, mustExclusion(t, e))
	}
	return NewSchedule(fluo, rs, es)
}

type probe struct {
	at   string // UTC, "Mon 2006-01-02 15:04"
	open bool
	next string // "" for the zero time
}

func checkProbes(t *testing.T, s *Schedule, probes []probe) {
	t.Helper()
	for _, p := range probes {
		now := at(p.at)
		if got := s.Open(now); got != p.open {
			t.Errorf("%s at %s UTC: open=%v, want %v", s, p.at, got, p.open)
		}
		got := s.NextOpen(now)
		if p.next == "" {
			if !got.IsZero() {
				t.Errorf("%s at %s UTC: next open %s, want none", s, p.at, got.UTC().Format("Mon 2006-01-02 15:04"))
			}
			continue
		}
		if !got.Equal(at(p.next)) {
			t.Errorf("%s at %s UTC: next open %s, want %s", s, p.at, got.UTC().Format("Mon 2006-01-02 15:04"), p.next)
		}
		if p.open != (p.next == p.at) {
			t.Fatalf("bad probe %+v: open iff next == at", p)
		}
	}
}

func TestNilAndEmptySchedule(t *testing.T) {
	now := at("Thu 2026-11-19 14:00")
	for _, s := range []*Schedule{nil, NewSchedule(nil, nil, nil), NewSchedule(nil, []*Rule{nil}, nil)} {
		if !s.Open(now) || !s.NextOpen(now).Equal(now) || s.ClosedBy(now) != "" {
			t.Errorf("%#v: want always open", s)
		}
		if s.String() != "always open" {
			t.Errorf("String() = %q", s.String())
		}
		if w, e := s.Specs(); w != nil || e != nil {
			t.Errorf("Specs() = %q, %q", w, e)
		}
	}
	// NextOpen returns t itself, location included, when open.
	tokyo := now.In(time.FixedZone("JST", 9*3600))
	if got := (*Schedule)(nil).NextOpen(tokyo); got != tokyo {
		t.Error("nil Schedule: NextOpen must return t unchanged")
	}
	if got := NewSchedule(nil, []*Rule{mustWindow(t, "14:00-15:00")}, nil).NextOpen(tokyo); got != tokyo {
		t.Error("open Schedule: NextOpen must return t unchanged")
	}
}

// TestSeveralWindows: open when any window is open. 2026-11-20 is a Friday; Berlin is UTC+1.
func TestSeveralWindows(t *testing.T) {
	s := schedule(t, nil, []string{"Mon-Fri 22:00-05:00 Europe/Berlin", "Sat,Sun 10:00-14:00 Europe/Berlin"}, nil)
	checkProbes(t, s, []probe{
		{"Fri 2026-11-20 20:59", false, "Fri 2026-11-20 21:00"},
		{"Fri 2026-11-20 21:00", true, "Fri 2026-11-20 21:00"},
		{"Sat 2026-11-21 03:59", true, "Sat 2026-11-21 03:59"},
		{"Sat 2026-11-21 04:00", false, "Sat 2026-11-21 09:00"},
		{"Sat 2026-11-21 12:59", true, "Sat 2026-11-21 12:59"},
		{"Sat 2026-11-21 13:00", false, "Sun 2026-11-22 09:00"},
		{"Sun 2026-11-22 13:00", false, "Mon 2026-11-23 21:00"},
		{"Mon 2026-11-23 02:00", false, "Mon 2026-11-23 21:00"},
	})
	// Overlapping windows merge: 09:00-12:00 and 11:00-13:00 make 09:00-13:00.
	s = schedule(t, nil, []string{"09:00-12:00", "11:00-13:00", "Wed 20:00-21:00"}, nil)
	checkProbes(t, s, []probe{
		{"Wed 2026-11-18 08:59", false, "Wed 2026-11-18 09:00"},
		{"Wed 2026-11-18 11:30", true, "Wed 2026-11-18 11:30"},
		{"Wed 2026-11-18 12:30", true, "Wed 2026-11-18 12:30"},
		{"Wed 2026-11-18 13:00", false, "Wed 2026-11-18 20:00"},
		{"Wed 2026-11-18 21:00", false, "Thu 2026-11-19 09:00"},
	})
}

// TestFLUOWindowIsOneMoreWindow: FLUO's window joins the others; alone it behaves as before.
func TestFLUOWindowIsOneMoreWindow(t *testing.T) {
	fluo, err := Parse("Thu 14:00", "1h30m", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	alone := NewSchedule(fluo, nil, nil)
	for _, m := range []string{"Wed 2026-11-18 14:30", "Thu 2026-11-19 13:59", "Thu 2026-11-19 14:00", "Thu 2026-11-19 15:29", "Thu 2026-11-19 15:30"} {
		now := at(m)
		if alone.Open(now) != fluo.Contains(now) || !alone.NextOpen(now).Equal(fluo.NextOpen(now)) {
			t.Errorf("FLUO window alone at %s: schedule %v/%s, window %v/%s", m, alone.Open(now), alone.NextOpen(now), fluo.Contains(now), fluo.NextOpen(now))
		}
	}
	s := schedule(t, fluo, []string{"Sat 10:00-11:00"}, []string{"2026-11-26"})
	checkProbes(t, s, []probe{
		{"Thu 2026-11-19 14:00", true, "Thu 2026-11-19 14:00"},
		{"Thu 2026-11-19 15:30", false, "Sat 2026-11-21 10:00"},
		{"Sat 2026-11-21 11:00", false, "Sat 2026-11-28 10:00"}, // Thursday 26th is excluded
		{"Fri 2026-11-27 00:00", false, "Sat 2026-11-28 10:00"},
	})
	if got := s.String(); got != "windows [Thu 14:00 for 1h30m0s (UTC) | Sat 10:00-11:00 UTC], exclusions [2026-11-26 UTC]" {
		t.Errorf("String() = %q", got)
	}
	// Published: the windows and exclusions as given, FLUO's window as its own fields.
	w, e := s.Specs()
	if !reflect.DeepEqual(w, []string{"Sat 10:00-11:00"}) || !reflect.DeepEqual(e, []string{"2026-11-26"}) || s.FLUO() != fluo {
		t.Errorf("Specs() = %q, %q; FLUO() = %v", w, e, s.FLUO())
	}
}

// What Spec publishes, Parse reads back as the same window.
func TestWindowSpecRoundTrip(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ start, length string }{{"14:00", "1h"}, {"Thu 14:00", "1h30m"}, {"sun 00:05", "30m"}, {"23:59", "23h"}} {
		w, err := Parse(c.start, c.length, berlin)
		if err != nil {
			t.Fatal(err)
		}
		start, length, zone := w.Spec()
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(start, length, loc)
		if err != nil || back.String() != w.String() {
			t.Errorf("%q/%q: Spec %q %q %q read back as %v (%v)", c.start, c.length, start, length, zone, back, err)
		}
	}
	if start, length, zone := (*Window)(nil).Spec(); start+length+zone != "" {
		t.Error("a nil window has no spec")
	}
}

// TestExclusionsWin: an exclusion closes the schedule even inside a window; NextOpen skips to the
// first window start after it, or to its end when that falls inside a window.
func TestExclusionsWin(t *testing.T) {
	s := schedule(t, nil,
		[]string{"Mon-Fri 22:00-05:00 America/New_York"},
		[]string{"2026-11-25/2026-11-29 America/New_York", "2026-12-01T02:00/2026-12-01T08:00 America/New_York"})
	// New York is UTC-5: 22:00 there is 03:00 UTC the next day.
	checkProbes(t, s, []probe{
		// Tuesday 24th's window runs until Wednesday 05:00, but the exclusion starts Wednesday 00:00.
		{"Wed 2026-11-25 04:59", true, "Wed 2026-11-25 04:59"},
		{"Wed 2026-11-25 05:00", false, "Tue 2026-12-01 03:00"}, // Monday 30th 22:00; then 02:00 excluded
		{"Sat 2026-11-28 12:00", false, "Tue 2026-12-01 03:00"},
		{"Tue 2026-12-01 06:59", true, "Tue 2026-12-01 06:59"},
		// The second exclusion starts at 02:00 inside Monday's window and ends after it: Tuesday 22:00.
		{"Tue 2026-12-01 07:00", false, "Wed 2026-12-02 03:00"},
	})
	if got := s.ClosedBy(at("Sat 2026-11-28 12:00")); got != "reboot exclusion 2026-11-25/2026-11-29 America/New_York" {
		t.Errorf("ClosedBy in an exclusion = %q", got)
	}
	if got := s.ClosedBy(at("Tue 2026-12-01 20:00")); got != "outside the reboot windows" {
		t.Errorf("ClosedBy outside the windows = %q", got)
	}
	if got := s.ClosedBy(at("Tue 2026-12-01 06:00")); got != "" {
		t.Errorf("ClosedBy when open = %q", got)
	}

	// An exclusion ending inside a window: NextOpen is its end.
	s = schedule(t, nil, []string{"08:00-18:00"}, []string{"2026-11-20T00:00/2026-11-20T12:30"})
	checkProbes(t, s, []probe{
		{"Fri 2026-11-20 09:00", false, "Fri 2026-11-20 12:30"},
		{"Fri 2026-11-20 12:30", true, "Fri 2026-11-20 12:30"},
	})

	// No windows: open except during exclusions. Overlapping and back-to-back exclusions chain.
	s = schedule(t, nil, nil, []string{"2026-12-24/2026-12-26", "2026-12-26T00:00/2026-12-27T06:00", "2026-12-27T03:00/2026-12-27T09:15"})
	checkProbes(t, s, []probe{
		{"Wed 2026-12-23 23:59", true, "Wed 2026-12-23 23:59"},
		{"Thu 2026-12-24 00:00", false, "Sun 2026-12-27 09:15"},
		{"Sun 2026-12-27 09:15", true, "Sun 2026-12-27 09:15"},
	})
	if got := s.String(); got != "windows [always], exclusions [2026-12-24/2026-12-26 UTC | 2026-12-26T00:00/2026-12-27T06:00 UTC | 2026-12-27T03:00/2026-12-27T09:15 UTC]" {
		t.Errorf("String() = %q", got)
	}

	// Windows that all fall inside exclusions, or an exclusion longer than Horizon: no next opening.
	s = schedule(t, nil, []string{"Sat 10:00-11:00"}, []string{"2026-11-21", "2026-11-28/2027-12-31"})
	checkProbes(t, s, []probe{
		{"Sat 2026-11-21 10:00", false, ""},
		{"Sat 2027-12-25 10:00", false, "Sat 2028-01-01 10:00"},
	})
	s = schedule(t, nil, nil, []string{"2026-01-01/2027-02-05"}) // 401 days
	checkProbes(t, s, []probe{{"Thu 2026-01-01 00:00", false, ""}})
	s = schedule(t, nil, nil, []string{"2026-01-01/2027-02-04"}) // 400 days
	checkProbes(t, s, []probe{{"Thu 2026-01-01 00:00", false, "Fri 2027-02-05 00:00"}})
}

func TestScheduleStringAndSpecs(t *testing.T) {
	s := schedule(t, nil, []string{" mon-fri  22:00-05:00 Europe/Berlin", "Sat,Sun 0:00-0:00"}, []string{"2026-11-27/2026-12-01  America/New_York"})
	if got := s.String(); got != "windows [Mon-Fri 22:00-05:00 Europe/Berlin | Sat,Sun 00:00-24:00 UTC], exclusions [2026-11-27/2026-12-01 America/New_York]" {
		t.Errorf("String() = %q", got)
	}
	w, e := s.Specs()
	if !reflect.DeepEqual(w, []string{"mon-fri 22:00-05:00 Europe/Berlin", "Sat,Sun 0:00-0:00"}) || !reflect.DeepEqual(e, []string{"2026-11-27/2026-12-01 America/New_York"}) {
		t.Errorf("Specs() = %q, %q", w, e)
	}
	if e != nil {
		e[0] = "changed"
		if _, e2 := s.Specs(); e2[0] == "changed" {
			t.Error("Specs must return fresh slices")
		}
	}
}

// TestNextOpenKeepsLocation: a later instant is given in t's location; t itself is returned unchanged.
func TestNextOpenKeepsLocation(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s := schedule(t, nil, []string{"10:00-11:00 America/New_York"}, nil)
	now := at("Wed 2026-11-18 12:00").In(berlin)
	next := s.NextOpen(now)
	if next.Location() != berlin || !next.Equal(at("Wed 2026-11-18 15:00")) {
		t.Errorf("NextOpen = %s, want 2026-11-18 16:00 in Europe/Berlin", next)
	}
}
