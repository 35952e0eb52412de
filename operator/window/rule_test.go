package window

import (
	"testing"
	"time"
)

// utc parses "2006-01-02 15:04" as UTC.
func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustWindow(t *testing.T, spec string) *Rule {
	t.Helper()
	r, err := ParseWindow(spec)
	if err != nil {
		t.Fatalf("ParseWindow(%q): %v", spec, err)
	}
	return r
}

func mustExclusion(t *testing.T, spec string) Exclusion {
	t.Helper()
	e, err := ParseExclusion(spec)
	if err != nil {
		t.Fatalf("ParseExclusion(%q): %v", spec, err)
	}
	return e
}

func TestParseWindowForms(t *testing.T) {
	for _, c := range []struct{ spec, canonical, asGiven string }{
		{"Mon-Fri 22:00-05:00 Europe/Berlin", "Mon-Fri 22:00-05:00 Europe/Berlin", ""},
		{"sat,SUN 0:00-24:00", "Sat,Sun 00:00-24:00 UTC", ""},
		{"Mon,Wed-Fri 13:00-15:00 Asia/Tokyo", "Mon,Wed-Fri 13:00-15:00 Asia/Tokyo", ""},
		{"Fri-Mon 23:00-01:00", "Fri-Mon 23:00-01:00 UTC", ""},
		{"02:00-04:00 America/New_York", "daily 02:00-04:00 America/New_York", ""},
		{"* 00:00-00:00", "daily 00:00-24:00 UTC", ""},
		{"Daily 10:00-11:00 UTC", "daily 10:00-11:00 UTC", ""},
		{"Mon-Sun 01:00-02:00", "daily 01:00-02:00 UTC", ""},
		{"Sat-Fri 01:00-02:00", "daily 01:00-02:00 UTC", ""},
		{"monday,tu,Wednesday 10:00-11:00", "Mon-Wed 10:00-11:00 UTC", ""},
		{"Sun,Sat 10:00-10:00", "Sat,Sun 10:00-10:00 UTC", ""},
		{"Sun-Tue,Thu 10:00-11:00", "Thu,Sun-Tue 10:00-11:00 UTC", ""},
		{"Mon,Mon,Tue 10:00-11:00", "Mon,Tue 10:00-11:00 UTC", ""},
		{"Sun 23:59-00:01", "Sun 23:59-00:01 UTC", ""},
		{"  Mon-Fri \t 22:00-05:00  ", "Mon-Fri 22:00-05:00 UTC", "Mon-Fri 22:00-05:00"},
		// Days of the month: the nth weekday, the last weekday, a date; mixed with weekdays.
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "3rd-Tue 22:00-02:00 Europe/Berlin", ""},
		{"LAST-friday 20:00-23:00", "last-Fri 20:00-23:00 UTC", ""},
		{"16 02:00-04:00", "16 02:00-04:00 UTC", ""},
		{"1,15,1 02:00-04:00", "1,15 02:00-04:00 UTC", ""},
		{"Sat,Sun,1st-Mon 02:00-04:00", "Sat,Sun,1st-Mon 02:00-04:00 UTC", ""},
		{"2nd-Wed,4th-Wed,5th-Wed 02:00-04:00", "2nd-Wed,4th-Wed,5th-Wed 02:00-04:00 UTC", ""},
		{"Mon-Sun,16 02:00-04:00", "daily 02:00-04:00 UTC", ""},
	} {
		r := mustWindow(t, c.spec)
		if got := r.String(); got != c.canonical {
			t.Errorf("ParseWindow(%q).String() = %q, want %q", c.spec, got, c.canonical)
		}
		want := c.asGiven
		if want == "" {
			want = c.spec
		}
		if got := r.Spec(); got != want {
			t.Errorf("ParseWindow(%q).Spec() = %q, want %q", c.spec, got, want)
		}
	}
}

// TestWindowKnownAnswers checks Contains and NextOpen of single windows. 2026-11-20 is a Friday.
func TestWindowKnownAnswers(t *testing.T) {
	cases := []struct {
		spec string
		at   string // UTC, "Mon 2006-01-02 15:04"
		open bool
		next string
	}{
		// Weeknights, crossing midnight: Friday's window runs into Saturday morning.
		{"Mon-Fri 22:00-05:00", "Fri 2026-11-20 21:59", false, "Fri 2026-11-20 22:00"},
		{"Mon-Fri 22:00-05:00", "Fri 2026-11-20 22:00", true, "Fri 2026-11-20 22:00"},
		{"Mon-Fri 22:00-05:00", "Sat 2026-11-21 04:59", true, "Sat 2026-11-21 04:59"},
		{"Mon-Fri 22:00-05:00", "Sat 2026-11-21 05:00", false, "Mon 2026-11-23 22:00"},
		{"Mon-Fri 22:00-05:00", "Sat 2026-11-21 23:00", false, "Mon 2026-11-23 22:00"},
		// Early Monday belongs to Sunday's window, and Sunday has none.
		{"Mon-Fri 22:00-05:00", "Mon 2026-11-23 03:00", false, "Mon 2026-11-23 22:00"},
		{"Mon-Fri 22:00-05:00", "Tue 2026-11-24 03:00", true, "Tue 2026-11-24 03:00"},
		// A range wrapping past Sunday: Fri, Sat, Sun, Mon.
		{"Fri-Mon 23:00-01:00", "Thu 2026-11-19 23:30", false, "Fri 2026-11-20 23:00"},
		{"Fri-Mon 23:00-01:00", "Fri 2026-11-20 00:30", false, "Fri 2026-11-20 23:00"},
		{"Fri-Mon 23:00-01:00", "Sun 2026-11-22 00:30", true, "Sun 2026-11-22 00:30"},
		{"Fri-Mon 23:00-01:00", "Mon 2026-11-23 23:59", true, "Mon 2026-11-23 23:59"},
		{"Fri-Mon 23:00-01:00", "Tue 2026-11-24 00:59", true, "Tue 2026-11-24 00:59"},
		{"Fri-Mon 23:00-01:00", "Tue 2026-11-24 01:00", false, "Fri 2026-11-27 23:00"},
		{"Fri-Mon 23:00-01:00", "Tue 2026-11-24 23:00", false, "Fri 2026-11-27 23:00"},
		// Whole days; "24:00" and "00:00" as ends are the same midnight.
		{"Sat,Sun 00:00-24:00", "Fri 2026-11-20 23:59", false, "Sat 2026-11-21 00:00"},
		{"Sat,Sun 00:00-24:00", "Sun 2026-11-22 23:59", true, "Sun 2026-11-22 23:59"},
		{"Sat,Sun 00:00-00:00", "Mon 2026-11-23 00:00", false, "Sat 2026-11-28 00:00"},
		// An end equal to the start: 24 hours.
		{"Sat 06:00-06:00", "Sat 2026-11-21 05:59", false, "Sat 2026-11-21 06:00"},
		{"Sat 06:00-06:00", "Sun 2026-11-22 05:59", true, "Sun 2026-11-22 05:59"},
		{"Sat 06:00-06:00", "Sun 2026-11-22 06:00", false, "Sat 2026-11-28 06:00"},
		// Every day, with and without "*".
		{"10:00-11:00", "Wed 2026-11-18 11:00", false, "Thu 2026-11-19 10:00"},
		{"* 10:00-11:00", "Wed 2026-11-18 10:30", true, "Wed 2026-11-18 10:30"},
		// Zones: Berlin is UTC+1 in November, Tokyo UTC+9 all year.
		{"10:00-11:00 Europe/Berlin", "Wed 2026-11-18 09:00", true, "Wed 2026-11-18 09:00"},
		{"10:00-11:00 Europe/Berlin", "Wed 2026-11-18 10:00", false, "Thu 2026-11-19 09:00"},
		{"Mon,Wed-Fri 13:00-15:00 Asia/Tokyo", "Tue 2026-11-24 04:00", false, "Wed 2026-11-25 04:00"},
		{"Mon,Wed-Fri 13:00-15:00 Asia/Tokyo", "Wed 2026-11-25 05:59", true, "Wed 2026-11-25 05:59"},
		// Monday 00:30 in Tokyo is Sunday 15:30 UTC: the day is the zone's.
		{"Mon 00:30-01:30 Asia/Tokyo", "Sun 2026-11-22 15:45", true, "Sun 2026-11-22 15:45"},
		{"Mon 00:30-01:30 Asia/Tokyo", "Mon 2026-11-23 00:45", false, "Sun 2026-11-29 15:30"},
		// New York is UTC-5 in November: Friday 22:00 there is Saturday 03:00 UTC.
		{"Fri 22:00-02:00 America/New_York", "Sat 2026-11-21 02:59", false, "Sat 2026-11-21 03:00"},
		{"Fri 22:00-02:00 America/New_York", "Sat 2026-11-21 06:59", true, "Sat 2026-11-21 06:59"},
		{"Fri 22:00-02:00 America/New_York", "Sat 2026-11-21 07:00", false, "Sat 2026-11-28 03:00"},
	}
	for _, c := range cases {
		r := mustWindow(t, c.spec)
		now := at(c.at)
		if got := r.Contains(now); got != c.open {
			t.Errorf("%q at %s UTC: open=%v, want %v", c.spec, c.at, got, c.open)
		}
		if got := r.NextOpen(now); !got.Equal(at(c.next)) {
			t.Errorf("%q at %s UTC: next open %s, want %s", c.spec, c.at, got.UTC().Format("Mon 2006-01-02 15:04"), c.next)
		}
	}
}

func TestParseExclusionKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		spec, canonical string
		start, end      string // UTC
	}{
		// Whole days, inclusive: New York is UTC-5 in late November.
		{"2026-11-27/2026-12-01 America/New_York", "2026-11-27/2026-12-01 America/New_York", "2026-11-27 05:00", "2026-12-02 05:00"},
		{"2026-11-27T18:00/2026-12-01T08:00 Europe/Berlin", "2026-11-27T18:00/2026-12-01T08:00 Europe/Berlin", "2026-11-27 17:00", "2026-12-01 07:00"},
		{"2026-12-25", "2026-12-25 UTC", "2026-12-25 00:00", "2026-12-26 00:00"},
		{"2026-12-25 Asia/Tokyo", "2026-12-25 Asia/Tokyo", "2026-12-24 15:00", "2026-12-25 15:00"},
		{"2026-12-24T12:00/2026-12-26", "2026-12-24T12:00/2026-12-26 UTC", "2026-12-24 12:00", "2026-12-27 00:00"},
		{"2026-12-24/2026-12-24T18:00 UTC", "2026-12-24/2026-12-24T18:00 UTC", "2026-12-24 00:00", "2026-12-24 18:00"},
		{"2026-12-31T22:00/2027-01-01T02:00", "2026-12-31T22:00/2027-01-01T02:00 UTC", "2026-12-31 22:00", "2027-01-01 02:00"},
		{"2028-02-29", "2028-02-29 UTC", "2028-02-29 00:00", "2028-03-01 00:00"},
	} {
		e := mustExclusion(t, c.spec)
		if e.String() != c.canonical || e.Spec() != c.spec {
			t.Errorf("ParseExclusion(%q): String %q, Spec %q; want %q, %q", c.spec, e.String(), e.Spec(), c.canonical, c.spec)
		}
		if !e.Start().Equal(utc(c.start)) || !e.End().Equal(utc(c.end)) {
			t.Errorf("ParseExclusion(%q): [%s, %s) UTC, want [%s, %s)", c.spec, e.Start().UTC().Format("2006-01-02 15:04"), e.End().UTC().Format("2006-01-02 15:04"), c.start, c.end)
		}
		start := e.Start()
		if e.Contains(start.Add(-time.Nanosecond)) || !e.Contains(start) || !e.Contains(e.End().Add(-time.Nanosecond)) || e.Contains(e.End()) {
			t.Errorf("ParseExclusion(%q): Contains is not [Start, End)", c.spec)
		}
	}
	var zero Exclusion
	if zero.Contains(time.Time{}) || zero.Contains(utc("2026-11-27 00:00")) {
		t.Error("the zero Exclusion must cover nothing")
	}
}

// TestBadSpecs lists the refusals and their messages: they reach the user as start-up errors, prefixed
// with the flag's name.
func TestBadSpecs(t *testing.T) {
	const (
		winSyntax  = `want "[DAYS ]HH:MM-HH:MM[ ZONE]", e.g. "Mon-Fri 22:00-05:00 Europe/Berlin" or "3rd-Tue 22:00-02:00"`
		daySyntax  = `want day names (Mon, Tue, Wed, Thu, Fri, Sat, Sun), ranges such as Mon-Fri or Fri-Mon, days of the month such as 3rd-Tue, last-Fri or 16, lists such as Sat,Sun or 1st-Sat,15, or * (or daily) for every day`
		zoneWant   = `want an IANA name such as Europe/Berlin or America/New_York, or UTC`
		exclSyntax = `want "YYYY-MM-DD[THH:MM]/YYYY-MM-DD[THH:MM][ ZONE]" or "YYYY-MM-DD[ ZONE]", e.g. "2026-11-27/2026-12-01 America/New_York"`
		dateWant   = `want YYYY-MM-DD or YYYY-MM-DDTHH:MM, e.g. 2026-11-27 or 2026-11-27T18:00`
	)
	for _, c := range []struct{ spec, err string }{
		{"", `window "": empty; ` + winSyntax},
		{"   ", `window "": empty; ` + winSyntax},
		{"Mon-Fri", `window "Mon-Fri": no time range after the days; ` + winSyntax},
		{"Mon-Fri Europe/Berlin", `window "Mon-Fri Europe/Berlin": time range "Europe/Berlin": want HH:MM-HH:MM, e.g. 22:00-05:00`},
		{"Mon 14:00", `window "Mon 14:00": time range "14:00": want HH:MM-HH:MM, e.g. 22:00-05:00`},
		{"Foo 22:00-05:00", `window "Foo 22:00-05:00": days "Foo": unknown day "Foo"; ` + daySyntax},
		{"Mon-Fry 22:00-05:00", `window "Mon-Fry 22:00-05:00": days "Mon-Fry": unknown day "Fry"; ` + daySyntax},
		{"Mon,,Tue 22:00-05:00", `window "Mon,,Tue 22:00-05:00": days "Mon,,Tue": empty day name; ` + daySyntax},
		{"Mon, 22:00-05:00", `window "Mon, 22:00-05:00": days "Mon,": empty day name; ` + daySyntax},
		{"Mon-Mon 22:00-05:00", `window "Mon-Mon 22:00-05:00": days "Mon-Mon": range "Mon-Mon" starts and ends on the same day (write Mon alone, or * for every day); ` + daySyntax},
		{"Mon-Wed-Fri 22:00-05:00", `window "Mon-Wed-Fri 22:00-05:00": days "Mon-Wed-Fri": unknown day "Wed-Fri"; ` + daySyntax},
		{"0 02:00-04:00", `window "0 02:00-04:00": days "0": day of the month "0": want 1 to 31; ` + daySyntax},
		{"32 02:00-04:00", `window "32 02:00-04:00": days "32": day of the month "32": want 1 to 31; ` + daySyntax},
		{"016 02:00-04:00", `window "016 02:00-04:00": days "016": day of the month "016": want 1 to 31; ` + daySyntax},
		{"6th-Tue 02:00-04:00", `window "6th-Tue 02:00-04:00": days "6th-Tue": "6th-Tue": want 1st, 2nd, 3rd, 4th, 5th or last before the day; ` + daySyntax},
		{"3rd-Tux 02:00-04:00", `window "3rd-Tux 02:00-04:00": days "3rd-Tux": "3rd-Tux": unknown day "Tux"; ` + daySyntax},
		{"last 02:00-04:00", `window "last 02:00-04:00": days "last": unknown day "last"; ` + daySyntax},
		{"last-Fri-Sat 02:00-04:00", `window "last-Fri-Sat 02:00-04:00": days "last-Fri-Sat": "last-Fri-Sat": unknown day "Fri-Sat"; ` + daySyntax},
		{"Mon Tue 22:00-05:00", `window "Mon Tue 22:00-05:00": time range "Tue": want HH:MM-HH:MM, e.g. 22:00-05:00`},
		{"22:00-", `window "22:00-": end "": want HH:MM (24-hour clock)`},
		{"-05:00", `window "-05:00": start "": want HH:MM (24-hour clock)`},
		{"22:00", `window "22:00": time range "22:00": want HH:MM-HH:MM, e.g. 22:00-05:00`},
		{"22:00 - 05:00", `window "22:00 - 05:00": time range "22:00": want HH:MM-HH:MM, e.g. 22:00-05:00`},
		{"25:00-05:00", `window "25:00-05:00": start "25:00": want hours 00-23 and minutes 00-59`},
		{"24:00-05:00", `window "24:00-05:00": start "24:00": want hours 00-23 and minutes 00-59`},
		{"22:00-05:60", `window "22:00-05:60": end "05:60": want hours 00-23 and minutes 00-59, or 24:00`},
		{"22:00-24:01", `window "22:00-24:01": end "24:01": want hours 00-23 and minutes 00-59, or 24:00`},
		{"10pm-5am", `window "10pm-5am": start "10pm": want HH:MM (24-hour clock)`},
		{"22:0-05:00", `window "22:0-05:00": start "22:0": want HH:MM (24-hour clock)`},
		{"022:00-05:00", `window "022:00-05:00": start "022:00": want HH:MM (24-hour clock)`},
		{"22:00:00-05:00", `window "22:00:00-05:00": start "22:00:00": want HH:MM (24-hour clock)`},
		{"Mon-Fri 22:00-05:00 Europe/Berln", `window "Mon-Fri 22:00-05:00 Europe/Berln": time zone "Europe/Berln": unknown; ` + zoneWant},
		{"Mon-Fri 22:00-05:00 Local", `window "Mon-Fri 22:00-05:00 Local": time zone "Local": the operator's local zone depends on its container; ` + zoneWant},
		{"Mon-Fri 22:00-05:00 CET extra", `window "Mon-Fri 22:00-05:00 CET extra": unexpected "extra" after the zone; ` + winSyntax},
	} {
		_, err := ParseWindow(c.spec)
		if err == nil {
			t.Errorf("ParseWindow(%q) accepted", c.spec)
		} else if err.Error() != c.err {
			t.Errorf("ParseWindow(%q):\n got %s\nwant %s", c.spec, err, c.err)
		}
	}
	for _, c := range []struct{ spec, err string }{
		{"", `exclusion "": empty; ` + exclSyntax},
		{"2026-11-27/2026-12-01 America/New_York extra", `exclusion "2026-11-27/2026-12-01 America/New_York extra": unexpected "extra" after the zone; ` + exclSyntax},
		{"2026-11-27/2026-12-01 America/Nowhere", `exclusion "2026-11-27/2026-12-01 America/Nowhere": time zone "America/Nowhere": unknown; ` + zoneWant},
		{"2026-11-27 - 2026-12-01", `exclusion "2026-11-27 - 2026-12-01": unexpected "2026-12-01" after the zone; ` + exclSyntax},
		{"2026-11-27-2026-12-01", `exclusion "2026-11-27-2026-12-01": start "2026-11-27-2026-12-01": ` + dateWant},
		{"27.11.2026/01.12.2026", `exclusion "27.11.2026/01.12.2026": start "27.11.2026": ` + dateWant},
		{"2026-11-27/2026-12-32", `exclusion "2026-11-27/2026-12-32": end "2026-12-32": no such date (` + dateWant + `)`},
		{"2026-02-29", `exclusion "2026-02-29": start "2026-02-29": no such date (` + dateWant + `)`},
		{"2026-11-27/", `exclusion "2026-11-27/": end "": ` + dateWant},
		{"2026-11-27T25:00/2026-12-01", `exclusion "2026-11-27T25:00/2026-12-01": start "2026-11-27T25:00": time "25:00": want hours 00-23 and minutes 00-59`},
		{"2026-11-27T/2026-12-01", `exclusion "2026-11-27T/2026-12-01": start "2026-11-27T": time "": want HH:MM (24-hour clock)`},
		{"2026-11-27T18:00", `exclusion "2026-11-27T18:00": a start time needs an end; give a range, e.g. 2026-11-27T18:00/2026-11-28`},
		{"2026-12-01/2026-11-27", `exclusion "2026-12-01/2026-11-27": the end 2026-11-27 is not after the start 2026-12-01`},
		{"2026-12-01T08:00/2026-12-01T08:00", `exclusion "2026-12-01T08:00/2026-12-01T08:00": the end 2026-12-01T08:00 is not after the start 2026-12-01T08:00`},
		{"2026-12-01T08:00/2026-11-30", `exclusion "2026-12-01T08:00/2026-11-30": the end 2026-11-30 is not after the start 2026-12-01T08:00`},
		// 02:00 to 03:00 does not happen in Berlin on the day clocks go forward.
		{"2026-03-29T02:00/2026-03-29T03:00 Europe/Berlin", `exclusion "2026-03-29T02:00/2026-03-29T03:00 Europe/Berlin": covers no time: the clocks of Europe/Berlin skip it (a daylight-saving change)`},
	} {
		_, err := ParseExclusion(c.spec)
		if err == nil {
			t.Errorf("ParseExclusion(%q) accepted", c.spec)
		} else if err.Error() != c.err {
			t.Errorf("ParseExclusion(%q):\n got %s\nwant %s", c.spec, err, c.err)
		}
	}
}

// TestMonthlyKnownAnswers checks days of the month: the nth weekday, the last weekday, a date, in months
// without a 5th weekday or a 31st, in February, and on daylight-saving change days. Calendar facts used:
// 1 November 2026 and 1 February 2026 are Sundays, 1 December 2026 a Tuesday; Europe/Berlin's clocks go
// forward on Sunday 29 March 2026 and back on Sunday 25 October 2026.
func TestMonthlyKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		spec     string
		at       string // UTC
		open     bool
		nextOpen string // UTC; "" when open
	}{
		// 3rd Tuesday: 17 November (3, 10, 17), 15 December; Berlin is UTC+1 in winter.
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-17 20:59", false, "2026-11-17 21:00"},
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-17 21:00", true, ""},
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-18 00:59", true, ""}, // after midnight: still the 17th's window
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-18 01:00", false, "2026-12-15 21:00"},
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-10 21:30", false, "2026-11-17 21:00"}, // the 2nd Tuesday
		{"3rd-Tue 22:00-02:00 Europe/Berlin", "2026-11-24 21:30", false, "2026-12-15 21:00"}, // the 4th
		// Last Friday: 27 November (6 .. 27), 25 December (dim-6 of a 31-day month), 27 February 2026.
		{"last-Fri 20:00-23:00", "2026-11-27 20:00", true, ""},
		{"last-Fri 20:00-23:00", "2026-11-20 20:00", false, "2026-11-27 20:00"},
		{"last-Fri 20:00-23:00", "2026-11-28 00:00", false, "2026-12-25 20:00"},
		{"last-Fri 20:00-23:00", "2026-12-18 21:00", false, "2026-12-25 20:00"},
		{"last-Fri 20:00-23:00", "2026-02-20 21:00", false, "2026-02-27 20:00"},
		// 5th Tuesday: none in November 2026 (3 .. 24); 29 December.
		{"5th-Tue 02:00-04:00", "2026-11-01 00:00", false, "2026-12-29 02:00"},
		{"5th-Tue 02:00-04:00", "2026-12-29 03:59", true, ""},
		// The 16th, the 31st (none in November), the 29th (none in February 2026, one in 2028).
		{"16 02:00-04:00", "2026-11-16 02:00", true, ""},
		{"16 02:00-04:00", "2026-11-16 04:00", false, "2026-12-16 02:00"},
		{"31 02:00-04:00", "2026-11-01 00:00", false, "2026-12-31 02:00"},
		{"31 02:00-04:00", "2027-01-31 04:00", false, "2027-03-31 02:00"},
		{"29 02:00-04:00", "2026-02-01 00:00", false, "2026-03-29 02:00"},
		{"29 02:00-04:00", "2028-02-01 00:00", false, "2028-02-29 02:00"},
		// Mixed with weekdays: Saturdays and the 1st.
		{"Sat,1 02:00-04:00", "2026-11-28 02:30", true, ""},
		{"Sat,1 02:00-04:00", "2026-11-29 02:30", false, "2026-12-01 02:00"},
		// DST: on the last Sunday of March 2026 Berlin's 02:00-03:00 does not happen; the next last
		// Sunday is 26 April (UTC+2). On the last Sunday of October 01:00-04:00 lasts four real hours.
		{"last-Sun 02:00-03:00 Europe/Berlin", "2026-03-01 00:00", false, "2026-04-26 00:00"},
		{"last-Sun 01:00-04:00 Europe/Berlin", "2026-10-24 23:00", true, ""},
		{"last-Sun 01:00-04:00 Europe/Berlin", "2026-10-25 02:59", true, ""},
		{"last-Sun 01:00-04:00 Europe/Berlin", "2026-10-25 03:00", false, "2026-11-29 00:00"},
	} {
		r := mustWindow(t, c.spec)
		at := utc(c.at)
		if got := r.Contains(at); got != c.open {
			t.Errorf("%q at %s UTC: open=%v, want %v", c.spec, c.at, got, c.open)
		}
		want := at
		if c.nextOpen != "" {
			want = utc(c.nextOpen)
		}
		if got := r.NextOpen(at); !got.Equal(want) {
			t.Errorf("%q NextOpen(%s UTC) = %s, want %s", c.spec, c.at, got.UTC().Format("2006-01-02 15:04"), want.Format("2006-01-02 15:04"))
		}
	}
}
