// Package serverclock is the API server's clock, read where the operator has it for free: the Date
// header of every response it gets. The operator stamps what it records with it (a failure, a canary's
// proof, a stall) so that those stamps and a person's resume, which kubectl slipway dates by the API
// server's clock, are on one clock: a failure is counted after a resume exactly when it happened after
// it, however far the operator's node's clock is off.
//
// A Date header has a resolution of one second and was written somewhere between the request leaving
// and the response arriving, so each response bounds the offset (server minus local) to an interval;
// the clock keeps the intersection of the intervals seen, which narrows to well under a second, and
// starts again from the newest when they no longer meet (a clock stepped on either side).
package serverclock

import (
	"net/http"
	"sync"
	"time"
)

// Clock is the local clock corrected by the offset the responses observed so far bound. The zero
// value is not usable; use New.
type Clock struct {
	local func() time.Time

	mu     sync.Mutex
	known  bool
	lo, hi time.Duration // the offset (server minus local) lies in [lo, hi]
	steps  int           // times the intervals stopped meeting and the clock started again
	onSet  func(offset time.Duration, first bool)
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
	off, _ := c.Offset()
	return c.local().Add(off)
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
	case lo > c.hi || hi < c.lo:
		c.lo, c.hi = lo, hi // no longer meet: a clock stepped; the newest response is the truth now
		c.steps++
	default:
		c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
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
	if err == nil {
		if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			r.c.Observe(sent, r.c.local(), d)
		}
	}
	return resp, err
}
