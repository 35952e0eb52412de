package serverclock

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

// Known answers: one response bounds the offset to [date-received, date+1s-sent]; the next narrows it;
// one that no longer meets it starts again from itself.
func TestObserve(t *testing.T) {
	local := t0
	c := New(func() time.Time { return local }, nil)
	if off, ok := c.Offset(); ok || off != 0 || !c.Now().Equal(t0) {
		t.Fatalf("before any response: %v %v %v, want the local clock", off, ok, c.Now())
	}
	// The server is an hour ahead; the request took 200 ms; the server wrote 04:00:00 (whole seconds).
	c.Observe(t0, t0.Add(200*time.Millisecond), t0.Add(time.Hour))
	if c.lo != time.Hour-200*time.Millisecond || c.hi != time.Hour+time.Second {
		t.Fatalf("bounds [%v, %v], want [59m59.8s, 1h0m1s]", c.lo, c.hi)
	}
	// A second response, 10 s later, written at 04:00:10 and received 100 ms after it left: the
	// server's second began no later than the arrival, so the offset is at least 1h-100ms... and at
	// most 1h+900ms.
	c.Observe(t0.Add(10*time.Second+500*time.Millisecond), t0.Add(10*time.Second+600*time.Millisecond), t0.Add(time.Hour+11*time.Second))
	if c.lo != time.Hour+400*time.Millisecond || c.hi != time.Hour+time.Second {
		t.Fatalf("bounds [%v, %v], want [1h0m0.4s, 1h0m1s]", c.lo, c.hi)
	}
	if off, _ := c.Offset(); off != time.Hour+700*time.Millisecond {
		t.Fatalf("offset %v, want the middle 1h0m0.7s", off)
	}
	local = t0.Add(time.Minute)
	if want := t0.Add(time.Minute + time.Hour + 700*time.Millisecond); !c.Now().Equal(want) {
		t.Fatalf("Now %v, want %v", c.Now(), want)
	}
	// The server's clock is stepped back an hour: the next response does not meet the bounds.
	c.Observe(t0.Add(time.Minute), t0.Add(time.Minute+50*time.Millisecond), t0.Add(time.Minute))
	if off, _ := c.Offset(); off < -50*time.Millisecond || off > time.Second || c.Steps() != 1 {
		t.Fatalf("after a step: offset %v, steps %d", off, c.Steps())
	}
	// Nonsense is ignored: no Date, an arrival before the departure.
	c.Observe(t0, t0.Add(time.Second), time.Time{})
	c.Observe(t0.Add(time.Second), t0, t0.Add(48*time.Hour))
	if off, _ := c.Offset(); off > time.Second || c.Steps() != 1 {
		t.Fatalf("nonsense moved the clock: %v, steps %d", off, c.Steps())
	}
}

// onChange is told when the offset is first known and when it moves by more than a second, not on
// every narrowing.
func TestOnChange(t *testing.T) {
	var calls []time.Duration
	var firsts []bool
	c := New(nil, func(off time.Duration, first bool) { calls, firsts = append(calls, off), append(firsts, first) })
	c.Observe(t0, t0.Add(10*time.Millisecond), t0.Add(30*time.Second))
	c.Observe(t0.Add(time.Second), t0.Add(time.Second+10*time.Millisecond), t0.Add(31*time.Second))
	c.Observe(t0.Add(2*time.Second), t0.Add(2*time.Second+10*time.Millisecond), t0.Add(2*time.Second))
	if len(calls) != 2 || !firsts[0] || firsts[1] || calls[0] < 29*time.Second || calls[1] > time.Second {
		t.Fatalf("onChange calls %v (first %v), want the first offset (~30s) and the step (~0)", calls, firsts)
	}
}

// Property: whatever the true offset and the latencies, the true offset stays within the bounds and
// the estimate within a second of it; after 20 responses within 300 ms of it.
func TestBoundsHoldTheTruth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 2000; run++ {
		truth := time.Duration(rng.Int64N(int64(4*time.Hour))) - 2*time.Hour
		local := t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		c := New(nil, nil)
		for i := 0; i < 20; i++ {
			sent := local
			at := sent.Add(time.Duration(rng.Int64N(int64(100 * time.Millisecond)))) // the server writes Date
			received := at.Add(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
			c.Observe(sent, received, at.Add(truth).Truncate(time.Second))
			if c.lo > truth || c.hi < truth {
				t.Fatalf("run %d: truth %v outside [%v, %v] after %d responses", run, truth, c.lo, c.hi, i+1)
			}
			if off, _ := c.Offset(); abs(off-truth) > time.Second {
				t.Fatalf("run %d: estimate %v, truth %v", run, off, truth)
			}
			local = received.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
		if off, _ := c.Offset(); abs(off-truth) > 300*time.Millisecond || c.Steps() != 0 {
			t.Fatalf("run %d: estimate %v, truth %v after 20 responses (steps %d)", run, off, truth, c.Steps())
		}
	}
}

// Transport reads the Date header of real HTTP responses.
func TestTransport(t *testing.T) {
	ahead := 90 * time.Minute
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
	}))
	defer srv.Close()
	c := New(nil, nil)
	hc := &http.Client{Transport: c.Transport(http.DefaultTransport)}
	for i := 0; i < 3; i++ {
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if off, ok := c.Offset(); !ok || abs(off-ahead) > 2*time.Second {
		t.Fatalf("offset %v (known %v), want about %v", off, ok, ahead)
	}
}
