package window

import (
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse("Mon 2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestContains(t *testing.T) {
	cases := []struct {
		start, length string
		at            string
		open          bool
		next          string
	}{
		// Daily windows.
		{"14:00", "1h", "Thu 2026-11-19 13:59", false, "Thu 2026-11-19 14:00"},
		{"14:00", "1h", "Thu 2026-11-19 14:00", true, "Thu 2026-11-19 14:00"},
		{"14:00", "1h", "Thu 2026-11-19 14:59", true, "Thu 2026-11-19 14:59"},
		{"14:00", "1h", "Thu 2026-11-19 15:00", false, "Fri 2026-11-20 14:00"},
		// A daily window across midnight is open on both sides of it.
		{"23:30", "1h", "Fri 2026-11-20 00:15", true, "Fri 2026-11-20 00:15"},
		{"23:30", "1h", "Fri 2026-11-20 00:30", false, "Fri 2026-11-20 23:30"},
		// Weekly windows; day names in any case.
		{"Thu 14:00", "1h30m", "Thu 2026-11-19 15:29", true, "Thu 2026-11-19 15:29"},
		{"thu 14:00", "1h30m", "Thu 2026-11-19 15:30", false, "Thu 2026-11-26 14:00"},
		{"THU 14:00", "1h30m", "Wed 2026-11-18 14:30", false, "Thu 2026-11-19 14:00"},
		{"Sat 22:00", "4h", "Sun 2026-11-22 01:59", true, "Sun 2026-11-22 01:59"},
		{"Sat 22:00", "4h", "Sun 2026-11-22 02:00", false, "Sat 2026-11-28 22:00"},
	}
	for _, c := range cases {
		w, err := Parse(c.start, c.length, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q, %q): %v", c.start, c.length, err)
		}
		now := at(c.at)
		if got := w.Contains(now); got != c.open {
			t.Errorf("%s for %s at %s: open=%v, want %v", c.start, c.length, c.at, got, c.open)
		}
		if got := w.NextOpen(now); !got.Equal(at(c.next)) {
			t.Errorf("%s for %s at %s: next open %s, want %s", c.start, c.length, c.at, got.Format("Mon 2006-01-02 15:04"), c.next)
		}
	}
}

func TestTimeZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	w, err := Parse("02:00", "1h", berlin)
	if err != nil {
		t.Fatal(err)
	}
	// 01:30 UTC on a winter day is 02:30 in Berlin.
	if !w.Contains(at("Thu 2026-11-19 01:30")) {
		t.Error("02:00 Berlin window must be open at 01:30 UTC in winter")
	}
	if w.Contains(at("Thu 2026-11-19 02:30")) {
		t.Error("02:00 Berlin window must be closed at 02:30 UTC (03:30 Berlin)")
	}
}

func TestNoWindow(t *testing.T) {
	w, err := Parse("", "", nil)
	if err != nil || w != nil {
		t.Fatalf("empty window: %v, %v", w, err)
	}
	if !w.Contains(time.Now()) {
		t.Error("no window means always open")
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range [][2]string{
		{"14:00", ""}, {"", "1h"}, {"25:00", "1h"}, {"14:60", "1h"}, {"14", "1h"}, {"Foo 14:00", "1h"},
		{"Mon Tue 14:00", "1h"}, {"14:00", "soon"}, {"14:00", "-1h"}, {"14:00", "0s"}, {"14:00", "24h"},
		{"Mon 14:00", "168h"}, {"aa:bb", "1h"},
	} {
		if _, err := Parse(c[0], c[1], time.UTC); err == nil {
			t.Errorf("Parse(%q, %q) accepted", c[0], c[1])
		}
	}
}
