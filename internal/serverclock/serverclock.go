// Package serverclock is the API server's clock, read where the operator has it for free: the Date
// header of every response it gets. The operator stamps what it records with it (a failure, a canary's
// proof, a stall) so that those stamps and a person's resume, which kubectl slipway dates by the API
// server's clock, are on one clock: a failure is counted after a resume exactly when it happened after
// it, however far the operator's node's clock is off.
//
// A Date header has a resolution of one second and was written somewhere between the request leaving
// and the response arriving, so each response bounds the offset (server minus local) to an interval;
// the clock keeps the intersection of the intervals seen, which narrows to well under a second. When
// a response no longer meets it (a clock stepped on either side), one response is not believed: the
// clock moves only when the next one agrees with it. Only successful responses count (an error page
// may come from a proxy with a clock of its own), an offset beyond MaxOffset is not applied (a clock
// that far off is broken: the operator keeps its node's and says so), and Now never goes backwards.
package serverclock

import (
	"net/http"
	"sync"
	"time"
)

// MaxOffset is the largest offset Now applies: beyond it the clocks disagree by more than time
// sync ever lets them, one of them is broken, and the local one is kept (Applied says so).
const MaxOffset = 10 * time.Minute

// Applies reports whether an offset is within MaxOffset, so Now applies it.
func Applies(off time.Duration) bool { return abs(off) <= MaxOffset }

// Clock is the local clock corrected by the offset the responses observed so far bound. The zero
// value is not usable; use New.
type Clock struct {
	local func() time.Time

	mu     sync.Mutex
	known  bool
	lo, hi time.Duration // the offset (server minus local) lies in [lo, hi]
	// cand: a response that did not meet [lo, hi], kept until the next one says whether it was a
	// step (it agrees) or an outlier (it does not).
	candLo, candHi time.Duration
	cand           bool
	steps          int       // times the clock moved to a new interval
	last           time.Time // the latest Now returned: it never goes backwards
	onSet          func(offset time.Duration, first bool)
}

// New is a clock over local (time.Now in production). onChange, when not nil, is called (outside the
// clock's lock) when the offset is first known and whenever it moves by more than a second: the
// operator logs it and sets its gauge.
func New(local func() time.Time, onChange func(offset time.Duration, first bool)) *Clock {
	if local == nil {
		local = time.Now
	}
	return &Clock{local: local, onSet: onChange}
}

// Now is the API server's time now, as well as the responses so far tell it; the local time until
// one has.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.local()
	if off := c.mid(); Applies(off) {
		now = now.Add(off)
	}
	if now.Before(c.last) {
		return c.last
	}
	c.last = now
	return now
}

// Applied reports whether Now applies the offset (known and within MaxOffset).
func (c *Clock) Applied() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known && Applies(c.mid())
}

// Offset is the best estimate of server minus local time (the middle of what the responses bound)
// and whether any response has bounded it yet.
func (c *Clock) Offset() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mid(), c.known
}

func (c *Clock) mid() time.Duration {
	if !c.known {
		return 0
	}
	return c.lo + (c.hi-c.lo)/2
}

// Observe narrows the offset with one response: a request that left at sent and whose response,
// dated date by the server (a Date header, whole seconds), arrived at received (both local).
func (c *Clock) Observe(sent, received, date time.Time) {
	if received.Before(sent) || date.IsZero() {
		return
	}
	// The server wrote date at some server time s in [date, date+1s), at some local time l in
	// [sent, received]: s-l lies in [date-received, date+1s-sent].
	lo := date.Sub(received)
	hi := date.Add(time.Second).Sub(sent)
	c.mu.Lock()
	before, was := c.mid(), c.known
	switch {
	case !c.known:
		c.lo, c.hi, c.known = lo, hi, true
	case lo <= c.hi && hi >= c.lo:
		c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
		c.cand = false
	case c.cand && lo <= c.candHi && hi >= c.candLo:
		// Two responses in a row agree on another offset: a clock stepped.
		c.lo, c.hi = max(c.candLo, lo), min(c.candHi, hi)
		c.cand = false
		c.steps++
	default:
		c.candLo, c.candHi, c.cand = lo, hi, true
	}
	after := c.mid()
	onSet := c.onSet
	c.mu.Unlock()
	if onSet != nil && (!was || abs(after-before) > time.Second) {
		onSet(after, !was)
	}
}

// Steps is how many times the responses stopped agreeing with the offset kept (a clock was stepped).
func (c *Clock) Steps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steps
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Transport wraps rt so every response's Date header feeds the clock: the wrapper for a rest.Config's
// WrapTransport (rest.Config.Wrap).
func (c *Clock) Transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{c, rt}
}

type roundTripper struct {
	c  *Clock
	rt http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := r.c.local()
	resp, err := r.rt.RoundTrip(req)
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			r.c.Observe(sent, r.c.local(), d)
		}
	}
	return resp, err
}
