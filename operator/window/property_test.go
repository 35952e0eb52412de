package window

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Zones for random schedules: daylight-saving in both hemispheres, at 02:00 and at midnight
// (Santiago), by half an hour (Lord Howe), odd offsets (Kolkata +5:30, Chatham +12:45/+13:45),
// none at all.
var propertyZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Chatham", "Asia/Tokyo",
}

// Scan starts: a week before the 2026 clock changes of some of those zones, and one quiet stretch.
var propertyStarts = []struct {
	start    string
	changing []string // zones whose clocks change within three weeks
}{
	{"2026-03-01 00:00", []string{"America/New_York"}},
	{"2026-03-22 00:00", []string{"Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Pacific/Chatham"}},
	{"2026-08-30 00:00", []string{"America/Santiago"}},
	{"2026-09-20 00:00", []string{"Pacific/Chatham", "Australia/Lord_Howe"}},
	{"2026-10-18 00:00", []string{"Europe/Berlin", "America/New_York"}},
	{"2026-06-01 00:00", nil},
}

type randomWindow struct {
	days       [7]bool
	monthly    []string // days of the month: "3rd-Tue", "last-Fri", "16"
	start, end int      // minutes; end as written, 0..1440
	zone       string
}

func (w randomWindow) spec() string {
	var names []string
	for d, on := range w.days {
		if on {
			names = append(names, time.Weekday(d).String()[:3])
		}
	}
	names = append(names, w.monthly...)
	return fmt.Sprintf("%s %d:%02d-%02d:%02d %s", strings.Join(names, ","), w.start/60, w.start%60, w.end/60, w.end%60, w.zone)
}

// on reports whether the window starts on the local date y-m-d, read from the spec's words without
// the package's parser: a weekday it names, or a day of the month it names.
func (w randomWindow) on(y int, m time.Month, d int) bool {
	date := time.Date(y, m, d, 12, 0, 0, 0, time.UTC)
	if w.days[date.Weekday()] {
		return true
	}
	daysInMonth := time.Date(y, m+1, 0, 12, 0, 0, 0, time.UTC).Day()
	for _, item := range w.monthly {
		if n, err := strconv.Atoi(item); err == nil {
			if d == n {
				return true
			}
			continue
		}
		ord, day, _ := strings.Cut(item, "-")
		if date.Weekday().String()[:3] != day {
			continue
		}
		if ord == "last" && d+7 > daysInMonth {
			return true
		}
		if n := int(ord[0] - '0'); ord != "last" && d > 7*(n-1) && d <= 7*n {
			return true
		}
	}
	return false
}

// randomMonthly picks days of the month: an nth or last weekday, or a date (29 to 31 often, for the
// months without them).
func randomMonthly(rng *rand.Rand) string {
	day := time.Weekday(rng.IntN(7)).String()[:3]
	switch rng.IntN(4) {
	case 0:
		return "last-" + day
	case 1:
		return []string{"1st", "2nd", "3rd", "4th", "5th"}[rng.IntN(5)] + "-" + day
	case 2:
		return strconv.Itoa(29 + rng.IntN(3))
	}
	return strconv.Itoa(1 + rng.IntN(31))
}

// clockMinute picks a time of day, half the time on the half hour in the small hours where the
// daylight-saving changes happen.
func clockMinute(rng *rand.Rand) int {
	if rng.IntN(2) == 0 {
		return rng.IntN(11) * 30 // 00:00 .. 05:00
	}
	return rng.IntN(24 * 60)
}

// changeTimes are the wall-clock times (minutes) at which the zones' clocks change in 2026, always on a
// Sunday or, for Santiago, at the end of a Saturday.
var changeTimes = map[string][]int{
	"Europe/Berlin":       {120, 180},
	"America/New_York":    {60, 120, 180},
	"America/Santiago":    {0, 23 * 60},
	"Australia/Lord_Howe": {90, 120, 150},
	"Pacific/Chatham":     {165, 225},
}

// newRandomWindow makes a window in one of zones; half of the time, when changing (zones whose clocks
// change soon) is not empty, a short one in one of them right at the change.
func newRandomWindow(rng *rand.Rand, zones, changing []string) randomWindow {
	w := randomWindow{zone: zones[rng.IntN(len(zones))], start: clockMinute(rng), end: clockMinute(rng)}
	if rng.IntN(3) == 0 {
		// Days of the month, alone or besides weekdays.
		for range 1 + rng.IntN(3) {
			w.monthly = append(w.monthly, randomMonthly(rng))
		}
		if rng.IntN(2) == 0 {
			w.days[rng.IntN(7)] = true
		}
	}
	for len(w.monthly) == 0 && !w.days[0] && !w.days[1] && !w.days[2] && !w.days[3] && !w.days[4] && !w.days[5] && !w.days[6] {
		for d := range w.days {
			w.days[d] = rng.IntN(3) == 0
		}
	}
	switch {
	case len(changing) > 0 && rng.IntN(2) == 0:
		// Inside, across or at the edge of a skipped or repeated hour.
		w.zone = changing[rng.IntN(len(changing))]
		marks := changeTimes[w.zone]
		w.start = (marks[rng.IntN(len(marks))] + 15*(rng.IntN(7)-3) + 24*60) % (24 * 60)
		w.end = (w.start + 15*(1+rng.IntN(4))) % (24 * 60)
		w.days[time.Sunday], w.days[time.Saturday] = true, true
	case rng.IntN(8) == 0:
		w.end = 24 * 60
	}
	return w
}

// randomExclusion builds an exclusion spec starting within three weeks of base (a UTC midnight).
func randomExclusion(rng *rand.Rand, base time.Time, zones []string) string {
	zone := zones[rng.IntN(len(zones))]
	from := base.AddDate(0, 0, rng.IntN(21))
	to := from.AddDate(0, 0, rng.IntN(4))
	if rng.IntN(2) == 0 {
		return fmt.Sprintf("%s/%s %s", from.Format("2006-01-02"), to.Format("2006-01-02"), zone)
	}
	from = from.Add(time.Duration(clockMinute(rng)) * time.Minute)
	to = to.Add(time.Duration(clockMinute(rng)) * time.Minute)
	if !to.After(from) {
		to = from.Add(time.Duration(1+rng.IntN(600)) * time.Minute)
	}
	return fmt.Sprintf("%s/%s %s", from.Format("2006-01-02T15:04"), to.Format("2006-01-02T15:04"), zone)
}

func randomFLUO(rng *rand.Rand, zones []string) *Window {
	loc, err := time.LoadLocation(zones[rng.IntN(len(zones))])
	if err != nil {
		panic(err)
	}
	m := clockMinute(rng)
	start := fmt.Sprintf("%02d:%02d", m/60, m%60)
	length := time.Duration(1+rng.IntN(23*60)) * time.Minute
	if rng.IntN(2) == 0 {
		start = time.Weekday(rng.IntN(7)).String()[:3] + " " + start
		length = time.Duration(1+rng.IntN(6*24*60)) * time.Minute
	}
	w, err := Parse(start, length.String(), loc)
	if err != nil {
		panic(err)
	}
	return w
}

// TestNextOpenMatchesScan: for many random schedules (fixed seed), NextOpen equals a brute-force
// minute-by-minute scan of Open over three weeks around daylight-saving changes, from every minute next
// to an opening or closing, every fifth minute, and instants between minutes (every boundary lies on a
// whole minute, so the earliest open instant after t is t itself or a whole minute).
func TestNextOpenMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	schedules := 96
	if testing.Short() {
		schedules = 24
	}
	const checked = 3 * 7 * 24 * 60   // minutes whose NextOpen is checked
	const scanned = checked + 8*24*60 // minutes scanned, for the answer to lie within
	for n := range schedules {
		start := propertyStarts[n%len(propertyStarts)]
		base := utc(start.start)
		var rules []*Rule
		var specs []string
		for range rng.IntN(4) {
			spec := newRandomWindow(rng, propertyZones, start.changing).spec()
			rules = append(rules, mustWindow(t, spec))
			specs = append(specs, spec)
		}
		var exclusions []Exclusion
		for range rng.IntN(4) {
			spec := randomExclusion(rng, base, propertyZones)
			e, err := ParseExclusion(spec)
			if err != nil {
				continue // a random freeze that lies in a skipped hour
			}
			exclusions = append(exclusions, e)
			specs = append(specs, "exclude "+spec)
		}
		var fluo *Window
		if rng.IntN(4) == 0 {
			fluo = randomFLUO(rng, propertyZones)
			specs = append(specs, "FLUO "+fluo.String())
		}
		s := NewSchedule(fluo, rules, exclusions)

		open := make([]bool, scanned)
		for i := range open {
			open[i] = s.Open(base.Add(time.Duration(i) * time.Minute))
		}
		// next[i]: the first open minute at or after i, or -1 if none within the scan.
		next := make([]int, scanned+1)
		next[scanned] = -1
		for i := scanned - 1; i >= 0; i-- {
			next[i] = next[i+1]
			if open[i] {
				next[i] = i
			}
		}
		failures := 0
		check := func(now time.Time, want int, wantSelf bool) {
			got := s.NextOpen(now)
			var ok bool
			switch {
			case wantSelf:
				ok = got.Equal(now)
			case want >= 0:
				ok = got.Equal(base.Add(time.Duration(want) * time.Minute))
			default: // nothing open within the scan: later than it, or never
				ok = got.IsZero() || !got.Before(base.Add(scanned*time.Minute))
			}
			if !ok && failures < 5 {
				failures++
				wantText := "itself"
				if !wantSelf {
					wantText = base.Add(time.Duration(want) * time.Minute).UTC().Format(time.DateTime)
				}
				t.Errorf("schedule %q (%s)\nNextOpen(%s UTC) = %s, want %s", specs, s, now.UTC().Format(time.DateTime+".000"), got.UTC().Format(time.DateTime), wantText)
			}
		}
		for i := range checked {
			// Every fifth minute, and every minute next to a change between open and closed.
			edge := i > 0 && open[i] != open[i-1] || open[i] != open[i+1]
			if i%5 != 0 && !edge {
				continue
			}
			now := base.Add(time.Duration(i) * time.Minute)
			check(now, next[i], open[i])
			if i%2 == 0 || edge {
				// Between minutes: open like the minute before (boundaries are whole minutes).
				between := now.Add(time.Duration(1+rng.Int64N(int64(time.Minute)-1)) * time.Nanosecond)
				if s.Open(between) != open[i] && failures < 5 {
					failures++
					t.Errorf("schedule %q: Open(%s) = %v, but %v at the minute before", specs, between.UTC().Format(time.RFC3339Nano), !open[i], open[i])
				}
				check(between, next[i+1], open[i])
			}
		}
	}
}

// TestOpenMatchesWallClock: Open of random windows and exclusions equals a plain wall-clock reading
// (is the zone's local time within the window on one of its days, or within the exclusion?) at every
// minute that is not within two days of a daylight-saving change (where the span rules of the package
// documentation apply instead, see TestDST).
func TestOpenMatchesWallClock(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	schedules := 40
	if testing.Short() {
		schedules = 10
	}
	zones := append([]string{"Etc/GMT+5", "Pacific/Kiritimati", "Pacific/Pago_Pago"}, propertyZones...)
	const minutes = 14 * 24 * 60
	for n := range schedules {
		base := utc(propertyStarts[n%len(propertyStarts)].start).AddDate(0, 0, rng.IntN(14))
		nearChange := func(now time.Time, loc *time.Location) bool {
			_, off := now.In(loc).Zone()
			_, before := now.Add(-50 * time.Hour).In(loc).Zone()
			_, after := now.Add(50 * time.Hour).In(loc).Zone()
			return off != before || off != after
		}
		w := newRandomWindow(rng, zones, nil)
		r := mustWindow(t, w.spec())
		minutes := minutes
		if len(w.monthly) > 0 {
			minutes = 40 * 24 * 60 // past a month's end: the last and 5th weekdays, the 29th to 31st
		}
		exSpec := randomExclusion(rng, base, zones[:3]) // fixed-offset zones
		ex := mustExclusion(t, exSpec)
		loc := r.loc
		fromWall, toWall, exLoc := exclusionWall(t, exSpec)
		s := NewSchedule(nil, []*Rule{r}, []Exclusion{ex})
		end := w.end
		if end == 0 {
			end = 24 * 60
		}
		wallOpen := func(now time.Time) bool {
			local := now.In(loc)
			m := local.Hour()*60 + local.Minute()
			prev := local.AddDate(0, 0, -1)
			today, yesterday := w.on(local.Date()), w.on(prev.Date())
			if end > w.start {
				return today && m >= w.start && m < end
			}
			return today && m >= w.start || yesterday && m < end
		}
		wallExcluded := func(now time.Time) bool {
			local := now.In(exLoc)
			wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
			return !wall.Before(fromWall) && wall.Before(toWall)
		}
		failures := 0
		for i := range minutes {
			now := base.Add(time.Duration(i)*time.Minute + time.Duration(rng.IntN(60))*time.Second)
			if nearChange(now, loc) {
				continue
			}
			want := wallOpen(now) && !wallExcluded(now)
			if got := s.Open(now); got != want && failures < 5 {
				failures++
				t.Errorf("%q minus %q at %s (%s): open=%v, want %v", w.spec(), exSpec, now.UTC().Format(time.DateTime), now.In(loc).Format("Mon 15:04:05"), got, want)
			}
		}
	}
}

// exclusionWall reads back the wall-clock bounds and zone of a "FROM/TO ZONE" spec written by
// randomExclusion, independently of ParseExclusion.
func exclusionWall(t *testing.T, spec string) (from, to time.Time, loc *time.Location) {
	t.Helper()
	fields := strings.Fields(spec)
	a, b, _ := strings.Cut(fields[0], "/")
	loc, err := time.LoadLocation(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	parse := func(s string, end bool) time.Time {
		if d, err := time.Parse("2006-01-02", s); err == nil {
			if end {
				d = d.AddDate(0, 0, 1)
			}
			return d
		}
		d, err := time.Parse("2006-01-02T15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return parse(a, false), parse(b, true), loc
}
