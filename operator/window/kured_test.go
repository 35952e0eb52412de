package window

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// kured's own known answers (kured's pkg/timewindow tests): the same days, times and zones, written
// in the kured form, give kured's verdicts.
func TestKuredKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		window string
		cases  map[string]bool // "2006/01/02 15:04 MST" → open
	}{
		{"kured mon,tue,wed,thu,fri 9am-5pm America/Los_Angeles", map[string]bool{
			"2019/04/04 00:49 PDT": false, "2019/04/05 08:59 PDT": false, "2019/04/05 9:01 PDT": true,
			"2019/03/31 10:00 PDT": false, "2019/04/04 12:00 PDT": true, "2019/04/04 11:59 UTC": false,
		}},
		{"kured mon,we,fri 10:01-11:30am America/Los_Angeles", map[string]bool{
			"2019/04/05 10:30 PDT": true, "2019/04/06 10:30 PDT": false, "2019/04/07 10:30 PDT": false,
			"2019/04/08 10:30 PDT": true, "2019/04/09 10:30 PDT": false, "2019/04/10 10:30 PDT": true,
			"2019/04/11 10:30 PDT": false,
		}},
		{"kured mo,tu,we,th,fr 00:00-23:59:59 UTC", map[string]bool{
			"2019/04/18 00:00 UTC": true, "2019/04/18 23:59 UTC": true,
		}},
		// kured's wrap: the weekday is the instant's, never the day the window started on.
		{"kured mon,fri 22:00-05:00 Europe/Berlin", map[string]bool{
			"2026/11/23 00:30 CET": true,  // Monday early: open (Sunday is not named, kured opens anyway)
			"2026/11/23 04:59 CET": true,  // Monday
			"2026/11/23 05:00 CET": true,  // the end is inclusive to its second
			"2026/11/23 05:01 CET": false, // Monday, after the end
			"2026/11/23 21:59 CET": false, // Monday, before the start
			"2026/11/23 22:00 CET": true,  // Monday night
			"2026/11/24 03:00 CET": false, // Tuesday early: closed (Slipway's own "Mon 22:00-05:00" is open)
			"2026/11/27 23:00 CET": true,  // Friday night
			"2026/11/28 03:00 CET": false, // Saturday early: closed, the weekend stays quiet
			"2026/11/29 23:00 CET": false, // Sunday night
		}},
		{"kured 0,6 3pm-15:30:30", map[string]bool{ // days as numbers, Sunday 0; no zone: UTC
			"2026/11/29 15:00 UTC": true, "2026/11/28 15:30 UTC": true, "2026/11/27 15:10 UTC": false,
		}},
	} {
		r, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatalf("%s: %v", tc.window, err)
		}
		for at, want := range tc.cases {
			when, err := time.ParseInLocation("2006/01/02 15:04 MST", at, r.loc)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Contains(when); got != want {
				t.Errorf("%s at %s: open %v, kured says %v", tc.window, at, got, want)
			}
		}
	}
}

// The end is inclusive to the last nanosecond of its second, as kured's; not beyond.
func TestKuredEndSecond(t *testing.T) {
	r, err := ParseWindow("kured fri 22:00-05:00 UTC")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC) // a Friday
	for _, c := range []struct {
		at   time.Time
		open bool
	}{
		{end, true}, {end.Add(500 * time.Millisecond), true}, {end.Add(time.Second), false},
		{time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC), true}, {time.Date(2026, 11, 27, 21, 59, 59, 0, time.UTC), false},
	} {
		if got := r.Contains(c.at); got != c.open {
			t.Errorf("at %s: open %v, want %v", c.at.Format(time.RFC3339Nano), got, c.open)
		}
	}
}

func TestKuredRefused(t *testing.T) {
	for spec, want := range map[string]string{
		"kured":                            "no START-END",
		"kured mon":                        "no START-END",
		"kured funday 22:00-05:00":         `unknown day "funday"`,
		"kured 7 22:00-05:00":              "0 (Sunday) to 6",
		"kured mon 22:00":                  "want START-END",
		"kured mon 25:00-05:00":            "start",
		"kured mon 22:00-5:00:00pm":        "end",
		"kured mon 22:00-05:00 Mars/Olymp": "unknown",
		"kured mon 22:00-05:00 Local":      "UTC in kured's own image: write UTC",
		"kured mon 22:00-05:00 UTC extra":  "unexpected",
	} {
		_, err := ParseWindow(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", spec, err, want)
		}
	}
}

// NextOpen of a kured window is open, not before t, and no minute between t and it is open; a
// Schedule made of it agrees. Random days, times (seconds too) and zones with clock changes.
func TestKuredNextOpenProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	for i := 0; i < 60; i++ {
		days := []string{}
		for d := range 7 {
			if rng.IntN(3) == 0 {
				days = append(days, strings.ToLower(time.Weekday(d).String()[:2]))
			}
		}
		if len(days) == 0 {
			days = append(days, "sa")
		}
		clockOf := func() string {
			return fmt.Sprintf("%02d:%02d:%02d", rng.IntN(24), rng.IntN(60), rng.IntN(60))
		}
		zone := propertyZones[rng.IntN(len(propertyZones))]
		spec := fmt.Sprintf("kured %s %s-%s %s", strings.Join(days, ","), clockOf(), clockOf(), zone)
		r, err := ParseWindow(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		s := NewSchedule(nil, []*Rule{r}, nil)
		start, _ := time.Parse("2006-01-02 15:04", propertyStarts[rng.IntN(len(propertyStarts))].start)
		from := start.Add(time.Duration(rng.IntN(14*24*60)) * time.Minute)
		next := s.NextOpen(from)
		if next.IsZero() || next.Before(from) || !r.Contains(next) {
			t.Fatalf("%s from %s: next open %s (open there: %v)", spec, from, next, r.Contains(next))
		}
		for m := from; m.Before(next); m = m.Add(time.Minute) {
			if r.Contains(m) {
				t.Fatalf("%s from %s: open at %s, before its next opening %s", spec, from, m, next)
			}
		}
	}
}

// A kured window is kept as given and shown in kured's terms.
func TestKuredSpecAndString(t *testing.T) {
	r, err := ParseWindow("  kured  Monday,FRI  10pm-05:00  Europe/Berlin ")
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec() != "kured Monday,FRI 10pm-05:00 Europe/Berlin" || r.String() != "kured mon,fri 22:00-05:00 Europe/Berlin" {
		t.Errorf("spec %q, string %q", r.Spec(), r.String())
	}
}
