package window

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// kured is a window in kured's own terms: its --reboot-days, --start-time, --end-time and
// --time-zone, judged as kured judges them (its pkg/timewindow). kured asks of an instant whether its
// weekday, in the zone, is one of the days, and whether its time of day lies between the start and the
// end (both inclusive; the end to the last nanosecond of its second). A start later than the end wraps
// around midnight on the same day: "mon,fri 22:00-05:00" is open Monday 00:00-05:00:00.999 and
// 22:00-24:00, and Friday the same, never early Tuesday or early Saturday. Slipway's own windows name
// the day a window starts on instead ("Mon,Fri 22:00-05:00" is open Friday 22:00 to Saturday 05:00):
// the same flags mean different hours, which is why this form exists.
type kured struct {
	days       [7]bool
	start, end clock
	loc        *time.Location
}

// clock is a time of day to the second.
type clock struct{ h, m, s int }

func (c clock) after(o clock) bool {
	return c.h*3600+c.m*60+c.s > o.h*3600+o.m*60+o.s
}

func (c clock) String() string {
	if c.s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", c.h, c.m, c.s)
	}
	return fmt.Sprintf("%02d:%02d", c.h, c.m)
}

// kuredClockLayouts are the forms kured accepts for --start-time and --end-time, in its order.
var kuredClockLayouts = []string{"15:04", "15:04:05", "03:04pm", "15", "03pm", "3pm"}

// parseKuredClock reads a time the way kured does.
func parseKuredClock(text string) (clock, error) {
	for _, layout := range kuredClockLayouts {
		if t, err := time.Parse(layout, text); err == nil {
			return clock{t.Hour(), t.Minute(), t.Second()}, nil
		}
	}
	return clock{}, fmt.Errorf("%q: want one of kured's forms 15:04, 15:04:05, 03:04pm, 15, 03pm or 3pm", text)
}

// parseKuredDays reads kured's --reboot-days: day names (su, sun, sunday, any case) or numbers 0 (Sunday)
// to 6, comma-separated.
func parseKuredDays(text string) ([7]bool, error) {
	var days [7]bool
	for _, item := range strings.Split(text, ",") {
		if n, err := strconv.Atoi(item); err == nil {
			if n < 0 || n > 6 {
				return days, fmt.Errorf("day %q: kured's day numbers are 0 (Sunday) to 6", item)
			}
			days[n] = true
			continue
		}
		d, err := parseDay(item)
		if err != nil {
			return days, fmt.Errorf("%v (kured's days are names such as mon or monday, or 0-6, comma-separated)", err)
		}
		days[d] = true
	}
	return days, nil
}

// parseKured reads the fields after "kured": [DAYS] START-END [ZONE]. Without days, every day (kured's
// default); without a zone, UTC (kured's default).
func parseKured(fields []string) (*kured, error) {
	k := &kured{days: [7]bool{true, true, true, true, true, true, true}, loc: time.UTC}
	if len(fields) > 0 && !strings.Contains(fields[0], "-") {
		days, err := parseKuredDays(fields[0])
		if err != nil {
			return nil, err
		}
		k.days, fields = days, fields[1:]
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("no START-END after the days; %s", kuredSyntax)
	}
	startText, endText, ok := strings.Cut(fields[0], "-")
	if !ok {
		return nil, fmt.Errorf("%q: want START-END, e.g. 22:00-05:00; %s", fields[0], kuredSyntax)
	}
	var err error
	if k.start, err = parseKuredClock(startText); err != nil {
		return nil, fmt.Errorf("start %v", err)
	}
	if k.end, err = parseKuredClock(endText); err != nil {
		return nil, fmt.Errorf("end %v", err)
	}
	fields = fields[1:]
	if len(fields) > 0 {
		if fields[0] == "Local" {
			// kured loads "Local" as its container's zone, and kured's own image has none but UTC.
			return nil, fmt.Errorf(`time zone "Local": in kured it is the zone of kured's container, UTC in kured's own image: write UTC to keep the hours kured used (or the IANA name of the zone you meant, e.g. Europe/Berlin)`)
		}
		if k.loc, err = loadZone(fields[0]); err != nil {
			return nil, err
		}
		fields = fields[1:]
	}
	if len(fields) > 0 {
		return nil, fmt.Errorf("unexpected %q after the zone; %s", strings.Join(fields, " "), kuredSyntax)
	}
	return k, nil
}

const kuredSyntax = `want "kured [DAYS] START-END [ZONE]" with kured's --reboot-days, --start-time, --end-time and --time-zone, e.g. "kured mon,fri 22:00-05:00 Europe/Berlin"`

// at is the instant kured takes for the clock c on the date of lt: Go's time.Date in the zone, as kured
// builds it (a clock a daylight-saving change skips or repeats is resolved as Go resolves it).
func (k *kured) at(lt time.Time, c clock) time.Time {
	y, m, d := lt.Date()
	return time.Date(y, m, d, c.h, c.m, c.s, 0, k.loc)
}

// contains is kured's answer for t.
func (k *kured) contains(t time.Time) bool {
	lt := t.In(k.loc)
	if !k.days[lt.Weekday()] {
		return false
	}
	start := k.at(lt, k.start)
	end := k.at(lt, k.end).Add(time.Second - time.Nanosecond)
	if k.start.after(k.end) {
		// Around midnight: before today's end the window began yesterday, else it ends tomorrow (24
		// hours of real time either way, as kured counts them).
		if lt.Before(end) {
			start = start.Add(-24 * time.Hour)
		} else {
			end = end.Add(24 * time.Hour)
		}
	}
	return !lt.Before(start) && !lt.After(end)
}

// nextOpen is the earliest instant at or after t at which contains is true, within Horizon. The window
// can only open at the start of a day (around midnight) or at the start time, so those instants of
// each day are the candidates.
func (k *kured) nextOpen(t time.Time) time.Time {
	if k.contains(t) {
		return t
	}
	lt := t.In(k.loc)
	for i := 0; i <= int(Horizon/(24*time.Hour)); i++ {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+i, 12, 0, 0, 0, k.loc) // noon: always on that date
		var best time.Time
		for _, c := range []time.Time{firstInstant(day, k.loc), k.at(day, k.start)} {
			if c.Before(t) || !k.contains(c) {
				continue
			}
			if best.IsZero() || c.Before(best) {
				best = c
			}
		}
		if !best.IsZero() {
			return best.In(t.Location())
		}
	}
	return time.Time{}
}

// firstInstant is the first instant of day's date in loc: its midnight, or the end of a daylight-saving
// jump that skips midnight.
func firstInstant(day time.Time, loc *time.Location) time.Time {
	y, m, d := day.In(loc).Date()
	c := time.Date(y, m, d, 0, 0, 0, 0, loc)
	for c.In(loc).Day() != d {
		c = c.Add(time.Minute)
	}
	// time.Date may resolve a skipped midnight after the jump; the first instant is the jump itself.
	for p := c.Add(-time.Minute); p.In(loc).Day() == d; p = p.Add(-time.Minute) {
		c = p
	}
	return c
}

func (k *kured) String() string {
	return fmt.Sprintf("kured %s %s-%s %s", kuredDays(k.days), k.start, k.end, k.loc)
}

// kuredDays writes days as kured's --reboot-days takes them.
func kuredDays(days [7]bool) string {
	var out []string
	for d := range 7 {
		if days[d] {
			out = append(out, strings.ToLower(time.Weekday(d).String()[:3]))
		}
	}
	return strings.Join(out, ",")
}
