// Package window decides when a new reboot cycle may start. It is pure: no Kubernetes, no clock of its
// own (every function takes the instant to judge), and it carries the IANA time zone database
// (time/tzdata), so zones work in a scratch image too.
//
// Three kinds of rule combine into a [Schedule]:
//
//   - FLUO's window ([Window], [Parse]): a start ("14:00" daily, or "Thu 14:00" weekly; day names are
//     the first three letters, any case) and a length (a Go duration such as "1h30m"), in one zone.
//     This is what --reboot-window-start, --reboot-window-length and --reboot-window-timezone give;
//     it behaves exactly as in FLUO.
//   - Windows ([Rule], [ParseWindow]): days of the week or of the month, a start and an end time, and a
//     zone.
//   - Exclusions ([Exclusion], [ParseExclusion]): absolute date ranges during which nothing starts
//     (a change freeze).
//
// A Schedule is open at an instant when at least one window is open (FLUO's window counts as one more
// window; with no window at all it is always open) and no exclusion covers it: an exclusion always
// wins. A nil *Schedule is always open.
//
// # Window syntax
//
//	window = [ days " " ] start "-" end [ " " zone ]
//	days   = "*" | "daily" | item { "," item }
//	item   = day | day "-" day | nth "-" day | date
//	day    = Mon | Tue | Wed | Thu | Fri | Sat | Sun      (any case; two letters, e.g. "Mo", and full
//	                                                       names, e.g. "Monday", are accepted too)
//	nth    = 1st | 2nd | 3rd | 4th | 5th | last           (that weekday of each month)
//	date   = 1 .. 31                                      (that day of each month)
//	start  = HH:MM                                        (00:00 to 23:59; one-digit hours allowed)
//	end    = HH:MM | "24:00"
//	zone   = an IANA name such as Europe/Berlin, or UTC   (default UTC)
//
// Fields are separated by blanks; no blanks inside a field. Examples:
//
//	Mon-Fri 22:00-05:00 Europe/Berlin    weeknights; the Friday window ends Saturday 05:00
//	Sat,Sun 00:00-24:00                  the whole weekend, UTC
//	Mon,Wed-Fri 13:00-15:00 Asia/Tokyo   a list mixing days and ranges
//	Fri-Mon 23:00-01:00                  a range may wrap past Sunday: Fri, Sat, Sun, Mon
//	02:00-04:00 America/New_York         no days: every day (same as "*" or "daily")
//	3rd-Tue 22:00-02:00 Europe/Berlin    the third Tuesday of each month (Patch Tuesday's week)
//	last-Fri 20:00-23:00                 the last Friday of each month
//	16 02:00-04:00                       the 16th of each month
//	1st-Sat,15 01:00-05:00               a list may mix them, and weekdays too
//
// A month without the named day has no window: no 5th Tuesday, no 31st, no 29th in February of a
// common year (as in cron). The days of the month are those of the window's zone.
//
// The start is inclusive, the end exclusive. An end at or before the start crosses midnight: the
// window ends on the next day, and the days name the day the window STARTS on ("Fri 22:00-02:00" is
// open Friday 22:00 to Saturday 02:00, not early Friday; "Mon-Fri 22:00-05:00" is closed early on
// Monday, as Sunday is not named). An end equal to the start is a 24-hour window ("Sat 06:00-06:00");
// "00:00-24:00" and "00:00-00:00" are the whole day. A range from a day to itself ("Mon-Mon") is
// refused as ambiguous.
//
// # kured's windows
//
//	window = "kured" [ " " days ] " " start "-" end [ " " zone ]
//
// with kured's own --reboot-days (day names or 0-6, comma-separated; default every day), --start-time
// and --end-time (15:04, 15:04:05, 03:04pm, 15, 03pm or 3pm) and --time-zone (default UTC), judged as
// kured judges them: the instant's weekday in the zone must be one of the days, and its time of day
// must lie between the start and the end, both inclusive (the end to the last nanosecond of its
// second). A start after the end wraps around midnight within the same day: kured's
// --reboot-days=mon,fri --start-time=22:00 --end-time=05:00 is open Monday 00:00-05:00 and 22:00-24:00
// and Friday the same — never early Tuesday or early Saturday. Slipway's own "Mon,Fri 22:00-05:00"
// names the day a window starts on, and is open Friday 22:00 to Saturday 05:00: not the same hours.
// Daylight-saving days are kured's too (its 24 hours of real time around midnight). FLUO's "Thu 14:00"
// with length "1h30m" is "Thu 14:00-15:30".
//
// # Exclusion syntax
//
//	exclusion = from "/" to [ " " zone ] | date [ " " zone ]
//	from, to  = date | date "T" HH:MM
//	date      = YYYY-MM-DD
//
// A date alone means whole days, inclusive: as a start, 00:00 of that day; as an end, 24:00 of that
// day. "2026-11-27/2026-12-01 America/New_York" is closed from 27 November 00:00 to 2 December 00:00
// New York time; "2026-12-25" is Christmas Day, UTC; "2026-11-27T18:00/2026-12-01T08:00 Europe/Berlin"
// has times (the end exclusive). The end must come after the start.
//
// # Daylight-saving time
//
// Times are wall-clock times in the rule's zone. Every occurrence of a window (one per day it names) and
// every exclusion is one continuous span of real time: from the first instant the zone's clock shows
// the start (or later), to the last instant it shows a time before the end. Hence:
//
//   - When clocks go back, the hour that repeats is covered twice over: a window or exclusion that
//     touches it covers both passes (Europe/Berlin "01:00-04:00" on 25 October 2026 is open for four
//     real hours; "02:00-03:00" that day is open for two).
//   - When clocks go forward, the skipped wall-clock times never happen. A span that starts in the gap
//     begins when the clock jumps; one that ends in the gap ends at the jump; one lying entirely in the
//     gap does not occur that day (Europe/Berlin "02:00-03:00" on 29 March 2026 is closed all day,
//     and so is America/New_York "02:00-03:00" on 8 March 2026). An exclusion that would lie entirely
//     in a gap is refused.
//
// FLUO's window keeps FLUO's own behaviour (Go's time.Date normalisation), unchanged.
//
// # Next opening
//
// [Schedule.NextOpen] finds the earliest instant at or after a given one at which the schedule is
// open, looking at most [Horizon] (400 days) ahead; beyond that (say, an exclusion of more than a
// year, or windows that all fall inside exclusions) it returns the zero time.
package window
