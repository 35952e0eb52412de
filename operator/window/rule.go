package window

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the image is FROM scratch: no /usr/share/zoneinfo to load zones from
)

// Rule is one recurring window: on each of its days, from start to end (crossing midnight when the end
// is at or before the start) in its zone. Build it with [ParseWindow]; the syntax is in the package
// documentation.
type Rule struct {
	spec string
	days [7]bool // indexed by time.Weekday
	// monthly are the calendar days besides the weekdays (3rd-Tue, last-Fri, 16), in the order given.
	monthly []monthDay
	start   int // minutes after midnight, 0..1439
	end     int // minutes after midnight, 1..1440; at or before start: on the next day
	loc     *time.Location
	// k: a window in kured's terms ("kured ..."), which judges instants its own way (kured.go).
	k *kured
}

// dayNames holds the names a day may be given by (any case), as kured accepts them.
var dayNames = map[string]time.Weekday{
	"su": time.Sunday, "sun": time.Sunday, "sunday": time.Sunday,
	"mo": time.Monday, "mon": time.Monday, "monday": time.Monday,
	"tu": time.Tuesday, "tue": time.Tuesday, "tuesday": time.Tuesday,
	"we": time.Wednesday, "wed": time.Wednesday, "wednesday": time.Wednesday,
	"th": time.Thursday, "thu": time.Thursday, "thursday": time.Thursday,
	"fr": time.Friday, "fri": time.Friday, "friday": time.Friday,
	"sa": time.Saturday, "sat": time.Saturday, "saturday": time.Saturday,
}

const (
	windowSyntax = `want "[DAYS ]HH:MM-HH:MM[ ZONE]", e.g. "Mon-Fri 22:00-05:00 Europe/Berlin" or "3rd-Tue 22:00-02:00"`
	daysSyntax   = `want day names (Mon, Tue, Wed, Thu, Fri, Sat, Sun), ranges such as Mon-Fri or Fri-Mon, days of the month such as 3rd-Tue, last-Fri or 16, lists such as Sat,Sun or 1st-Sat,15, or * (or daily) for every day`
)

// monthDay is one day of each month: the nth weekday of the month (nth 1..5, "3rd-Tue"), its last
// such weekday (nth -1, "last-Fri"), or a date (nth 0, mday 1..31, "16"). A month without it (no 5th
// Tuesday, no 31st) has no occurrence, as in cron.
type monthDay struct {
	nth     int
	weekday time.Weekday
	mday    int
}

var ordinals = map[string]int{"1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5, "last": -1}

// parseMonthDay reads "3rd-Tue", "last-Fri" or "16"; ok is false when item has neither form (it may
// be a weekday or a range of weekdays).
func parseMonthDay(item string) (m monthDay, ok bool, err error) {
	if digits(item) && item != "" {
		d, _ := strconv.Atoi(item)
		if d < 1 || d > 31 || len(item) > 2 {
			return m, true, fmt.Errorf("day of the month %q: want 1 to 31", item)
		}
		return monthDay{mday: d}, true, nil
	}
	ord, day, found := strings.Cut(item, "-")
	nth, isOrd := ordinals[strings.ToLower(ord)]
	if !found {
		return m, false, nil
	}
	if !isOrd {
		if n := strings.TrimRight(strings.ToLower(ord), "stndrh"); n != "" && n != ord && digits(n) {
			return m, true, fmt.Errorf("%q: want 1st, 2nd, 3rd, 4th, 5th or last before the day", item)
		}
		return m, false, nil
	}
	wd, err := parseDay(day)
	if err != nil {
		return m, true, fmt.Errorf("%q: %v", item, err)
	}
	return monthDay{nth: nth, weekday: wd}, true, nil
}

// on reports whether the civil date date (midnight UTC) is this day of its month.
func (m monthDay) on(date time.Time) bool {
	switch {
	case m.nth == 0:
		return date.Day() == m.mday
	case date.Weekday() != m.weekday:
		return false
	case m.nth > 0:
		return (date.Day()-1)/7+1 == m.nth
	}
	return date.AddDate(0, 0, 7).Month() != date.Month() // no such weekday later this month
}

func (m monthDay) String() string {
	if m.nth == 0 {
		return strconv.Itoa(m.mday)
	}
	for name, n := range ordinals {
		if n == m.nth {
			return name + "-" + m.weekday.String()[:3]
		}
	}
	return "?"
}

// on reports whether the window starts on the civil date date (midnight UTC).
func (r *Rule) on(date time.Time) bool {
	if r.days[date.Weekday()] {
		return true
	}
	for _, m := range r.monthly {
		if m.on(date) {
			return true
		}
	}
	return false
}

// ParseWindow reads a window such as "Mon-Fri 22:00-05:00 Europe/Berlin" (syntax in the package
// documentation). The error names the bad part and says what is expected.
func ParseWindow(spec string) (*Rule, error) {
	fields := strings.Fields(spec)
	norm := strings.Join(fields, " ")
	fail := func(format string, a ...any) (*Rule, error) {
		return nil, fmt.Errorf("window %q: %s", norm, fmt.Sprintf(format, a...))
	}
	if len(fields) == 0 {
		return fail("empty; %s", windowSyntax)
	}
	r := &Rule{spec: norm, loc: time.UTC}
	if strings.EqualFold(fields[0], "kured") {
		k, err := parseKured(fields[1:])
		if err != nil {
			return fail("%v", err)
		}
		r.k, r.loc = k, k.loc
		return r, nil
	}
	// The days are optional: a first field that looks like a time range is the time range.
	if looksLikeClock(fields[0]) {
		r.days = [7]bool{true, true, true, true, true, true, true}
	} else {
		days, monthly, err := parseDays(fields[0])
		if err != nil {
			return fail("days %q: %v; %s", fields[0], err, daysSyntax)
		}
		r.days, r.monthly, fields = days, monthly, fields[1:]
		if len(fields) == 0 {
			return fail("no time range after the days; %s", windowSyntax)
		}
	}
	startText, endText, ok := strings.Cut(fields[0], "-")
	if !ok {
		return fail("time range %q: want HH:MM-HH:MM, e.g. 22:00-05:00", fields[0])
	}
	var err error
	if r.start, err = parseClock(startText, false); err != nil {
		return fail("start %q: %v", startText, err)
	}
	if r.end, err = parseClock(endText, true); err != nil {
		return fail("end %q: %v", endText, err)
	}
	if r.end == 0 {
		r.end = 24 * 60 // 00:00 as an end is midnight at the end of the day
	}
	fields = fields[1:]
	if len(fields) > 0 {
		loc, err := loadZone(fields[0])
		if err != nil {
			return fail("%v", err)
		}
		r.loc, fields = loc, fields[1:]
	}
	if len(fields) > 0 {
		return fail("unexpected %q after the zone; %s", strings.Join(fields, " "), windowSyntax)
	}
	return r, nil
}

// looksLikeClock tells a time range ("22:00-05:00", or a malformed "10pm-5am") from days ("Mon-Fri",
// "*", "16", "1,15", "3rd-Tue"): a clock has a colon, or starts with a digit and is no list of days of
// the month.
func looksLikeClock(field string) bool {
	if strings.Contains(field, ":") {
		return true
	}
	if field[0] < '0' || field[0] > '9' {
		return false
	}
	for _, item := range strings.Split(field, ",") {
		if _, ok, _ := parseMonthDay(item); !ok {
			return true
		}
	}
	return false
}

func parseDay(name string) (time.Weekday, error) {
	d, ok := dayNames[strings.ToLower(name)]
	if !ok {
		if name == "" {
			return 0, errors.New("empty day name")
		}
		return 0, fmt.Errorf("unknown day %q", name)
	}
	return d, nil
}

func parseDays(text string) ([7]bool, []monthDay, error) {
	var days [7]bool
	var monthly []monthDay
	if text == "*" || strings.EqualFold(text, "daily") {
		return [7]bool{true, true, true, true, true, true, true}, nil, nil
	}
	for _, item := range strings.Split(text, ",") {
		if m, ok, err := parseMonthDay(item); ok {
			if err != nil {
				return days, nil, err
			}
			if !slices.Contains(monthly, m) {
				monthly = append(monthly, m)
			}
			continue
		}
		from, to, isRange := strings.Cut(item, "-")
		first, err := parseDay(from)
		if err != nil {
			return days, nil, err
		}
		if !isRange {
			days[first] = true
			continue
		}
		last, err := parseDay(to)
		if err != nil {
			return days, nil, err
		}
		if first == last {
			return days, nil, fmt.Errorf("range %q starts and ends on the same day (write %s alone, or * for every day)", item, from)
		}
		for d := first; ; d = (d + 1) % 7 {
			days[d] = true
			if d == last {
				break
			}
		}
	}
	if days == [7]bool{true, true, true, true, true, true, true} {
		monthly = nil // every day already
	}
	return days, monthly, nil
}

// parseClock reads H:MM or HH:MM as minutes after midnight; "24:00" only if end.
func parseClock(text string, end bool) (int, error) {
	h, m, ok := strings.Cut(text, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, errors.New("want HH:MM (24-hour clock)")
	}
	hour, _ := strconv.Atoi(h)
	minute, _ := strconv.Atoi(m)
	if end && hour == 24 && minute == 0 {
		return 24 * 60, nil
	}
	if hour > 23 || minute > 59 {
		if end {
			return 0, errors.New("want hours 00-23 and minutes 00-59, or 24:00")
		}
		return 0, errors.New("want hours 00-23 and minutes 00-59")
	}
	return hour*60 + minute, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// loadZone loads an IANA zone by name. "Local" is refused: the operator's own zone depends on the
// container, not on the fleet.
func loadZone(name string) (*time.Location, error) {
	const want = "want an IANA name such as Europe/Berlin or America/New_York, or UTC"
	if name == "Local" {
		return nil, fmt.Errorf("time zone %q: the operator's local zone depends on its container; %s", name, want)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: unknown; %s", name, want)
	}
	return loc, nil
}

// Spec is the window as given (blanks collapsed).
func (r *Rule) Spec() string {
	if r == nil {
		return ""
	}
	return r.spec
}

// String is the window in canonical form, e.g. "Mon-Fri 22:00-05:00 Europe/Berlin".
func (r *Rule) String() string {
	if r == nil {
		return "always"
	}
	if r.k != nil {
		return r.k.String()
	}
	return fmt.Sprintf("%s %s-%s %s", r.daysString(), clockString(r.start), clockString(r.end), r.loc)
}

func clockString(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// daysString is the weekdays (daysString) followed by the days of the month, as given.
func (r *Rule) daysString() string {
	var items []string
	if r.days != [7]bool{} {
		items = append(items, daysString(r.days))
	}
	for _, m := range r.monthly {
		items = append(items, m.String())
	}
	return strings.Join(items, ",")
}

// daysString writes days compactly: "daily", "Mon-Fri", "Sat,Sun", "Fri-Mon", "Mon,Wed-Fri".
func daysString(days [7]bool) string {
	gap := -1
	for d := range 7 {
		if !days[d] {
			gap = d
			break
		}
	}
	if gap < 0 {
		return "daily"
	}
	name := func(d int) string { return time.Weekday(d).String()[:3] }
	var items []string
	// Walk the week once, starting after a missing day, so that runs wrapping past Sunday stay whole.
	for i := 1; i <= 7; i++ {
		d := (gap + i) % 7
		if !days[d] || (i > 1 && days[(d+6)%7]) {
			continue // not a day, or not the first of its run
		}
		n := 1
		for days[(d+n)%7] {
			n++
		}
		switch n {
		case 1:
			items = append(items, name(d))
		case 2:
			items = append(items, name(d), name((d+1)%7))
		default:
			items = append(items, name(d)+"-"+name((d+n-1)%7))
		}
	}
	return strings.Join(items, ",")
}

// occurrence is the span of real time the window covers when it starts on the civil date day (a
// midnight in UTC standing for that date in the rule's zone). It may be empty (from == to) when it
// lies in a skipped daylight-saving hour.
func (r *Rule) occurrence(day time.Time) (from, to time.Time) {
	end := day.Add(time.Duration(r.end) * time.Minute)
	if r.end <= r.start {
		end = day.AddDate(0, 0, 1).Add(time.Duration(r.end) * time.Minute)
	}
	from, _ = spanEdges(day.Add(time.Duration(r.start)*time.Minute), r.loc)
	_, to = spanEdges(end, r.loc)
	if to.Before(from) {
		to = from
	}
	return from, to
}

// civilDate is the date of t in loc, as midnight UTC (a calendar date, ready for AddDate).
func civilDate(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Contains reports whether the window is open at t (start inclusive, end exclusive). A nil Rule is
// always open.
func (r *Rule) Contains(t time.Time) bool {
	if r == nil {
		return true
	}
	if r.k != nil {
		return r.k.contains(t)
	}
	today := civilDate(t, r.loc)
	// An occurrence starting on day D lasts at most about 25 hours; its instants have local dates from
	// D-1 (a clock set back across midnight) to D+2 (an end in a repeated hour after midnight).
	for i := -2; i <= 1; i++ {
		day := today.AddDate(0, 0, i)
		if !r.on(day) {
			continue
		}
		if from, to := r.occurrence(day); !t.Before(from) && t.Before(to) {
			return true
		}
	}
	return false
}

// NextOpen returns t if the window is open at t, else the start of its next occurrence after t (in t's
// location), looking ahead at most Horizon. A weekly rule opens at least once a week (an occurrence
// lost in a skipped hour moves the next opening a week on); a monthly one at least every few months
// (a 5th weekday, a 31st).
func (r *Rule) NextOpen(t time.Time) time.Time {
	if r.k != nil {
		return r.k.nextOpen(t)
	}
	if r.Contains(t) {
		return t
	}
	today := civilDate(t, r.loc)
	for i := -2; i <= int(Horizon/(24*time.Hour)); i++ {
		day := today.AddDate(0, 0, i)
		if !r.on(day) {
			continue
		}
		if from, to := r.occurrence(day); from.Before(to) && !from.Before(t) {
			return from.In(t.Location())
		}
	}
	return time.Time{} // none within the horizon (every rule has at least one day a year)
}

// spanEdges maps the wall-clock time wall (its fields read in UTC) in loc to the instants that bound
// spans of real time:
//
//   - first: the earliest instant at which loc's clock shows wall or later (where wall is skipped by a
//     jump forward, the instant of the jump);
//   - last: the end of the last stretch of time during which loc's clock shows a time before wall (where
//     wall is repeated by a jump back, its second showing; where it is skipped, the jump).
//
// Outside transitions both are simply the instant the clock shows wall.
func spanEdges(wall time.Time, loc *time.Location) (first, last time.Time) {
	// UTC offsets lie within -12h..+14h, so the instants that can show wall lie within 15 hours of it.
	// Walk the zone periods (spans of one offset) overlapping that range: in each, the clock shows
	// instant+offset, rising with time, and shows wall at the instant wall-offset.
	lo, hi := wall.Add(-15*time.Hour), wall.Add(15*time.Hour)
	found := false
	p := lo
	for range 16 {
		local := p.In(loc)
		_, offset := local.Zone()
		start, end := local.ZoneBounds()
		if start.IsZero() || start.Before(lo) {
			start = lo
		}
		if end.IsZero() || end.After(hi) {
			end = hi
		}
		at := wall.Add(-time.Duration(offset) * time.Second)
		if !found {
			if c := laterOf(start, at); c.Before(end) {
				first, found = c, true
			}
		}
		if start.Before(at) {
			last = earlierOf(end, at)
		}
		if !end.Before(hi) {
			break
		}
		p = end
	}
	return first, last
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlierOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Exclusion is a change freeze: an absolute span of time during which no new cycle starts. Build it
// with [ParseExclusion]; the syntax is in the package documentation. The zero Exclusion covers nothing.
type Exclusion struct {
	spec       string
	canonical  string
	start, end time.Time // [start, end)
}

const exclusionSyntax = `want "YYYY-MM-DD[THH:MM]/YYYY-MM-DD[THH:MM][ ZONE]" or "YYYY-MM-DD[ ZONE]", e.g. "2026-11-27/2026-12-01 America/New_York"`

// ParseExclusion reads an exclusion such as "2026-11-27/2026-12-01 America/New_York" or
// "2026-11-27T18:00/2026-12-01T08:00 Europe/Berlin" (syntax in the package documentation). The error
// names the bad part and says what is expected.
func ParseExclusion(spec string) (Exclusion, error) {
	fields := strings.Fields(spec)
	norm := strings.Join(fields, " ")
	fail := func(format string, a ...any) (Exclusion, error) {
		return Exclusion{}, fmt.Errorf("exclusion %q: %s", norm, fmt.Sprintf(format, a...))
	}
	if len(fields) == 0 {
		return fail("empty; %s", exclusionSyntax)
	}
	if len(fields) > 2 {
		return fail("unexpected %q after the zone; %s", strings.Join(fields[2:], " "), exclusionSyntax)
	}
	loc := time.UTC
	if len(fields) == 2 {
		var err error
		if loc, err = loadZone(fields[1]); err != nil {
			return fail("%v", err)
		}
	}
	fromText, toText, isRange := strings.Cut(fields[0], "/")
	if !isRange {
		toText = fromText
	}
	from, fromTime, err := parseDateTime(fromText)
	if err != nil {
		return fail("start %q: %v", fromText, err)
	}
	to, toTime, err := parseDateTime(toText)
	if err != nil {
		return fail("end %q: %v", toText, err)
	}
	if !isRange && fromTime {
		return fail("a start time needs an end; give a range, e.g. %s/%s", fromText, from.AddDate(0, 0, 1).Format("2006-01-02"))
	}
	if !toTime {
		to = to.AddDate(0, 0, 1) // a date alone as the end: through the whole day
	}
	if !to.After(from) {
		return fail("the end %s is not after the start %s", toText, fromText)
	}
	e := Exclusion{spec: norm}
	e.start, _ = spanEdges(from, loc)
	_, e.end = spanEdges(to, loc)
	if !e.start.Before(e.end) {
		return fail("covers no time: the clocks of %s skip it (a daylight-saving change)", loc)
	}
	e.canonical = fields[0] + " " + loc.String()
	return e, nil
}

// parseDateTime reads YYYY-MM-DD or YYYY-MM-DDTHH:MM as a wall-clock time (fields read in UTC).
func parseDateTime(text string) (t time.Time, hasTime bool, err error) {
	const want = "want YYYY-MM-DD or YYYY-MM-DDTHH:MM, e.g. 2026-11-27 or 2026-11-27T18:00"
	date, clock, hasTime := strings.Cut(text, "T")
	if len(date) != 10 {
		return t, false, errors.New(want)
	}
	t, err = time.Parse("2006-01-02", date)
	if err != nil {
		if strings.Contains(err.Error(), "out of range") {
			return t, false, fmt.Errorf("no such date (%s)", want)
		}
		return t, false, errors.New(want)
	}
	if hasTime {
		m, err := parseClock(clock, false)
		if err != nil {
			return t, false, fmt.Errorf("time %q: %v", clock, err)
		}
		t = t.Add(time.Duration(m) * time.Minute)
	}
	return t, hasTime, nil
}

// Spec is the exclusion as given (blanks collapsed).
func (e Exclusion) Spec() string { return e.spec }

// String is the exclusion with its zone spelled out, e.g. "2026-11-27/2026-12-01 America/New_York".
func (e Exclusion) String() string { return e.canonical }

// Start is the first instant the exclusion covers.
func (e Exclusion) Start() time.Time { return e.start }

// End is the first instant after the exclusion.
func (e Exclusion) End() time.Time { return e.end }

// Contains reports whether the exclusion covers t (start inclusive, end exclusive).
func (e Exclusion) Contains(t time.Time) bool {
	return !t.Before(e.start) && t.Before(e.end)
}
