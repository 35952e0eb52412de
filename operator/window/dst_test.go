package window

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// openSpans scans [from, to) minute by minute and lists the spans during which s is open, in UTC, as
// "2006-01-02 15:04/2006-01-02 15:04".
func openSpans(s *Schedule, from, to time.Time) []string {
	var spans []string
	var start time.Time
	open := false
	for t := from; ; t = t.Add(time.Minute) {
		now := t.Before(to) && s.Open(t)
		if now && !open {
			start = t
		}
		if !now && open {
			spans = append(spans, start.Format("2006-01-02 15:04")+"/"+t.Format("2006-01-02 15:04"))
		}
		open = now
		if !t.Before(to) {
			return spans
		}
	}
}

// TestDST: windows across the daylight-saving changes of 2026, as spans of real time (UTC). Each
// occurrence runs from the first instant the zone's clock shows its start to the last instant it shows
// a time before its end: a repeated hour is covered twice over, a skipped one never happens.
//
//	Europe/Berlin     29 Mar 01:00 UTC: 02:00 CET -> 03:00 CEST;  25 Oct 01:00 UTC: 03:00 CEST -> 02:00 CET
//	America/New_York   8 Mar 07:00 UTC: 02:00 EST -> 03:00 EDT;    1 Nov 06:00 UTC: 02:00 EDT -> 01:00 EST
//	America/Santiago   5 Apr 03:00 UTC: Sat 24:00 -03 -> 23:00 -04;    6 Sep 04:00 UTC: Sun 00:00 -04 -> 01:00 -03
func TestDST(t *testing.T) {
	for _, c := range []struct {
		window   string
		from, to string // scan range, UTC
		spans    []string
	}{
		// Berlin, spring forward. 02:00-03:00 does not exist on the 29th: no window that day, one
		// either side (02:00 CET on the 28th, 02:00 CEST on the 30th).
		{"02:00-03:00 Europe/Berlin", "2026-03-28 00:00", "2026-03-31 00:00",
			[]string{"2026-03-28 01:00/2026-03-28 02:00", "2026-03-30 00:00/2026-03-30 01:00"}},
		// Weekly on that Sunday only: the next one is a week later.
		{"Sun 02:00-03:00 Europe/Berlin", "2026-03-27 00:00", "2026-04-06 00:00",
			[]string{"2026-04-05 00:00/2026-04-05 01:00"}},
		// Ending in the gap: ends at the jump. Starting in the gap: starts at the jump.
		{"01:30-02:30 Europe/Berlin", "2026-03-29 00:00", "2026-03-29 06:00", []string{"2026-03-29 00:30/2026-03-29 01:00"}},
		{"02:30-04:00 Europe/Berlin", "2026-03-29 00:00", "2026-03-29 06:00", []string{"2026-03-29 01:00/2026-03-29 02:00"}},
		// Crossing the gap overnight: Sat 23:00 CET to Sun 04:00 CEST is four real hours.
		{"Sat 23:00-04:00 Europe/Berlin", "2026-03-28 12:00", "2026-03-29 12:00", []string{"2026-03-28 22:00/2026-03-29 02:00"}},
		// Berlin, fall back. Crossing the repeated hour: open for all of it, both passes (01:00 CEST to
		// 04:00 CET is four real hours).
		{"01:00-04:00 Europe/Berlin", "2026-10-24 20:00", "2026-10-25 06:00", []string{"2026-10-24 23:00/2026-10-25 03:00"}},
		{"Sat 22:00-03:00 Europe/Berlin", "2026-10-24 12:00", "2026-10-25 12:00", []string{"2026-10-24 20:00/2026-10-25 02:00"}},
		// The repeated hour itself: 02:00 CEST to 03:00 CET, two real hours.
		{"02:00-03:00 Europe/Berlin", "2026-10-24 20:00", "2026-10-25 06:00", []string{"2026-10-25 00:00/2026-10-25 02:00"}},
		// Ending inside the repeated hour: until its second showing (02:30 CET).
		{"00:00-02:30 Europe/Berlin", "2026-10-24 20:00", "2026-10-25 06:00", []string{"2026-10-24 22:00/2026-10-25 01:30"}},
		// Inside the repeated hour: one span from the first 02:30 to the second 02:45.
		{"02:30-02:45 Europe/Berlin", "2026-10-24 20:00", "2026-10-25 06:00", []string{"2026-10-25 00:30/2026-10-25 01:45"}},
		// New York, spring forward: same story with negative offsets.
		{"02:00-03:00 America/New_York", "2026-03-07 00:00", "2026-03-10 00:00",
			[]string{"2026-03-07 07:00/2026-03-07 08:00", "2026-03-09 06:00/2026-03-09 07:00"}},
		{"02:30-04:00 America/New_York", "2026-03-08 00:00", "2026-03-08 12:00", []string{"2026-03-08 07:00/2026-03-08 08:00"}},
		{"Sat 22:00-05:00 America/New_York", "2026-03-07 12:00", "2026-03-08 18:00", []string{"2026-03-08 03:00/2026-03-08 09:00"}},
		// New York, fall back: 01:00-02:00 is repeated.
		{"00:30-02:00 America/New_York", "2026-11-01 00:00", "2026-11-01 12:00", []string{"2026-11-01 04:30/2026-11-01 07:00"}},
		{"01:00-02:00 America/New_York", "2026-11-01 00:00", "2026-11-01 12:00", []string{"2026-11-01 05:00/2026-11-01 07:00"}},
		{"Sat 23:00-01:30 America/New_York", "2026-10-31 12:00", "2026-11-01 12:00", []string{"2026-11-01 03:00/2026-11-01 06:30"}},
		// Santiago changes at midnight. Clocks going back from Saturday 24:00 to 23:00: Saturday's last
		// hour is two real hours; Sunday's first hour starts at the only midnight the clock shows.
		{"Sat 23:00-00:00 America/Santiago", "2026-04-04 12:00", "2026-04-05 12:00", []string{"2026-04-05 02:00/2026-04-05 04:00"}},
		{"Sun 00:00-01:00 America/Santiago", "2026-04-04 12:00", "2026-04-05 12:00", []string{"2026-04-05 04:00/2026-04-05 05:00"}},
		// Clocks going forward from Sunday 00:00 to 01:00: Sunday's first hour never happens.
		{"Sun 00:00-01:00 America/Santiago", "2026-09-05 12:00", "2026-09-06 12:00", nil},
		{"Sat 22:00-02:00 America/Santiago", "2026-09-05 12:00", "2026-09-06 12:00", []string{"2026-09-06 02:00/2026-09-06 05:00"}},
	} {
		s := NewSchedule(nil, []*Rule{mustWindow(t, c.window)}, nil)
		from, to := utc(c.from), utc(c.to)
		if got := openSpans(s, from, to); !reflect.DeepEqual(got, c.spans) {
			t.Errorf("%q over %s..%s UTC:\n got %q\nwant %q", c.window, c.from, c.to, got, c.spans)
		}
		// NextOpen from the scan start lands on the first span.
		if len(c.spans) > 0 {
			first := utc(strings.Split(c.spans[0], "/")[0])
			if got := s.NextOpen(from); !got.Equal(first) && !(first.Equal(from) && got.Equal(from)) {
				t.Errorf("%q: NextOpen(%s UTC) = %s, want %s", c.window, c.from, got.UTC().Format("2006-01-02 15:04"), first.Format("2006-01-02 15:04"))
			}
		}
	}
}

// TestDSTExclusions: whole days are 23 or 25 hours long on the change days; times inside a repeated
// or skipped hour take the longer span.
func TestDSTExclusions(t *testing.T) {
	for _, c := range []struct{ spec, start, end string }{
		{"2026-03-29 Europe/Berlin", "2026-03-28 23:00", "2026-03-29 22:00"},
		{"2026-10-25 Europe/Berlin", "2026-10-24 22:00", "2026-10-25 23:00"},
		{"2026-03-29T01:00/2026-03-29T02:30 Europe/Berlin", "2026-03-29 00:00", "2026-03-29 01:00"},
		{"2026-03-29T02:30/2026-03-29T04:00 Europe/Berlin", "2026-03-29 01:00", "2026-03-29 02:00"},
		{"2026-10-25T02:30/2026-10-25T02:45 Europe/Berlin", "2026-10-25 00:30", "2026-10-25 01:45"},
		{"2026-03-08 America/New_York", "2026-03-08 05:00", "2026-03-09 04:00"},
		{"2026-11-01 America/New_York", "2026-11-01 04:00", "2026-11-02 05:00"},
		{"2026-11-01T01:00/2026-11-01T02:00 America/New_York", "2026-11-01 05:00", "2026-11-01 07:00"},
		// Santiago's 6 September starts at 01:00: the freeze starts when the clock jumps there.
		{"2026-09-06 America/Santiago", "2026-09-06 04:00", "2026-09-07 03:00"},
		{"2026-04-05 America/Santiago", "2026-04-05 04:00", "2026-04-06 04:00"},
	} {
		e := mustExclusion(t, c.spec)
		if !e.Start().Equal(utc(c.start)) || !e.End().Equal(utc(c.end)) {
			t.Errorf("%q: [%s, %s) UTC, want [%s, %s)", c.spec, e.Start().UTC().Format("2006-01-02 15:04"), e.End().UTC().Format("2006-01-02 15:04"), c.start, c.end)
		}
	}
	// An exclusion over the repeated hour closes a window for both passes.
	s := schedule(t, nil, []string{"Sun 00:00-06:00 Europe/Berlin"}, []string{"2026-10-25T02:00/2026-10-25T03:00 Europe/Berlin"})
	want := []string{"2026-10-24 22:00/2026-10-25 00:00", "2026-10-25 02:00/2026-10-25 05:00"}
	if got := openSpans(s, utc("2026-10-24 12:00"), utc("2026-10-25 12:00")); !reflect.DeepEqual(got, want) {
		t.Errorf("window minus exclusion over the repeated hour: %q, want %q", got, want)
	}
}
