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
// one that no longer meets it is believed only when the next one agrees with it.
func TestObserve(t *testing.T) {
	const ahead = 5 * time.Minute // the server's clock, within MaxOffset
	local := t0
	c := New(func() time.Time { return local }, nil)
	if off, ok := c.Offset(); ok || off != 0 || !c.Now().Equal(t0) {
		t.Fatalf("before any response: %v %v %v, want the local clock", off, ok, c.Now())
	}
	// The server is five minutes ahead; the request took 200 ms; the server wrote 04:00:00 (whole seconds).
	c.Observe(t0, t0.Add(200*time.Millisecond), t0.Add(ahead))
	if c.lo != ahead-200*time.Millisecond || c.hi != ahead+time.Second {
		t.Fatalf("bounds [%v, %v], want [4m59.8s, 5m1s]", c.lo, c.hi)
	}
	// A second response, 10 s later: [date-received, date+1s-sent] = [5m0.4s, 5m1.5s], which
	// narrows the bounds.
	c.Observe(t0.Add(10*time.Second+500*time.Millisecond), t0.Add(10*time.Second+600*time.Millisecond), t0.Add(ahead+11*time.Second))
	if c.lo != ahead+400*time.Millisecond || c.hi != ahead+time.Second {
		t.Fatalf("bounds [%v, %v], want [5m0.4s, 5m1s]", c.lo, c.hi)
	}
	if off, _ := c.Offset(); off != ahead+700*time.Millisecond {
		t.Fatalf("offset %v, want the middle 5m0.7s", off)
	}
	local = t0.Add(time.Minute)
	if want := t0.Add(time.Minute + ahead + 700*time.Millisecond); !c.Now().Equal(want) {
		t.Fatalf("Now %v, want %v", c.Now(), want)
	}
	// One response five minutes off (a proxy's page, a server out of sync) is not believed...
	c.Observe(t0.Add(time.Minute), t0.Add(time.Minute+50*time.Millisecond), t0.Add(time.Minute))
	if off, _ := c.Offset(); off != ahead+700*time.Millisecond || c.Steps() != 0 {
		t.Fatalf("one outlier moved the clock: offset %v, steps %d", off, c.Steps())
	}
	// ... one that agrees with the kept offset again drops it...
	c.Observe(t0.Add(time.Minute), t0.Add(time.Minute+50*time.Millisecond), t0.Add(ahead+time.Minute))
	c.Observe(t0.Add(2*time.Minute), t0.Add(2*time.Minute+50*time.Millisecond), t0.Add(2*time.Minute))
	if off, _ := c.Offset(); off != ahead+700*time.Millisecond || c.Steps() != 0 {
		t.Fatalf("outliers apart moved the clock: offset %v, steps %d", off, c.Steps())
	}
	// ... and two in a row that agree are a step: the server's clock was set back five minutes.
	c.Observe(t0.Add(2*time.Minute+time.Second), t0.Add(2*time.Minute+time.Second+50*time.Millisecond), t0.Add(2*time.Minute+time.Second))
	if off, _ := c.Offset(); off < -50*time.Millisecond || off > time.Second || c.Steps() != 1 {
		t.Fatalf("after a step: offset %v, steps %d", off, c.Steps())
	}
	// Now never goes backwards: it was five minutes ahead before the step.
	local = t0.Add(2 * time.Minute)
	if now := c.Now(); !now.Equal(t0.Add(time.Minute + ahead + 700*time.Millisecond)) {
		t.Fatalf("Now after the step went back to %v", now)
	}
	// Nonsense is ignored: no Date, an arrival before the departure.
	c.Observe(t0, t0.Add(time.Second), time.Time{})
	c.Observe(t0.Add(time.Second), t0, t0.Add(48*ahead))
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
	c.Observe(t0.Add(3*time.Second), t0.Add(3*time.Second+10*time.Millisecond), t0.Add(3*time.Second))
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

// An offset beyond MaxOffset is known but not applied: Now is the local clock.
func TestBeyondMaxOffset(t *testing.T) {
	local := t0
	c := New(func() time.Time { return local }, nil)
	for i := 0; i < 3; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		c.Observe(at, at.Add(10*time.Millisecond), at.Add(MaxOffset+time.Minute))
	}
	if off, known := c.Offset(); !known || off < MaxOffset || c.Applied() || !c.Now().Equal(local) {
		t.Fatalf("offset %v known %v applied %v now %v: want known, not applied, the local clock", off, known, c.Applied(), c.Now())
	}
}

// Transport reads the Date header of real HTTP responses, successful ones only.
func TestTransport(t *testing.T) {
	ahead := 3 * time.Minute
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/proxy-error" { // a proxy's page, with a clock of its own
			w.Header().Set("Date", time.Now().Add(-5*time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
	}))
	defer srv.Close()
	c := New(nil, nil)
	hc := &http.Client{Transport: c.Transport(http.DefaultTransport)}
	for _, path := range []string{"/proxy-error", "/", "/proxy-error", "/proxy-error", "/", "/"} {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if off, ok := c.Offset(); !ok || abs(off-ahead) > 2*time.Second {
		t.Fatalf("offset %v (known %v), want about %v", off, ok, ahead)
	}
}
