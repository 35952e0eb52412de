package notify

import (
	"sync"
	"testing"
	"time"
)

// recorder is a Notifier that hands every Event to the test. The rule calls Notify synchronously
// (from Blocked, or from a timer the test fires), so what it sent is in the channel when that call
// returns.
type recorder chan Event

func (r recorder) Notify(ev Event) { r <- ev }

// next is the Event sent by the calls made so far.
func (r recorder) next(t *testing.T) Event {
	t.Helper()
	select {
	case ev := <-r:
		return ev
	default:
		t.Fatal("no blocked Event sent")
		return Event{}
	}
}

// none asserts that the calls made so far sent nothing.
func (r recorder) none(t *testing.T) {
	t.Helper()
	select {
	case ev := <-r:
		t.Fatalf("unexpected Event %+v", ev)
	default:
	}
}

// fakeClock is the rule's clock in tests: time moves, and timers fire, only in advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool // fired or stopped
}

func (tm *fakeTimer) Stop() bool {
	tm.c.mu.Lock()
	defer tm.c.mu.Unlock()
	was := !tm.done
	tm.done = true
	return was
}

// clock makes r run on a new fakeClock.
func clock(r *BlockedRule) *fakeClock {
	c := &fakeClock{now: time.Date(2026, 7, 1, 20, 0, 0, 0, time.UTC)}
	r.now = func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	}
	r.afterFunc = func(d time.Duration, f func()) stopper {
		c.mu.Lock()
		defer c.mu.Unlock()
		tm := &fakeTimer{c: c, at: c.now.Add(d), f: f}
		c.timers = append(c.timers, tm)
		return tm
	}
	return c
}

// advance moves the clock on by d, firing each timer due by then at its time, in order, in the
// caller's goroutine; it returns how many fired.
func (c *fakeClock) advance(d time.Duration) (fired int) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var due *fakeTimer
		for _, tm := range c.timers {
			if !tm.done && !tm.at.After(end) && (due == nil || tm.at.Before(due.at)) {
				due = tm
			}
		}
		if due == nil {
			break
		}
		due.done = true
		c.now = due.at
		c.mu.Unlock()
		due.f()
		fired++
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
	return fired
}

// pending is how many timers are neither fired nor stopped.
func (c *fakeClock) pending() (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		if !tm.done {
			n++
		}
	}
	return n
}

func TestBlockedRule(t *testing.T) {
	const after = 100 * time.Millisecond
	rec := make(recorder, 10)
	r := NewBlockedRule(rec, after, DefaultQuietKinds)
	clk := clock(r)

	// The plan working (budget, window, order) is never reported: no timer even starts.
	r.Blocked("a", "window: closed until 2026-07-01T22:00:00Z")
	r.Blocked("d", "budget: full (fleet 1/1)")
	if n := clk.pending(); n != 0 {
		t.Fatalf("%d timers for quiet kinds", n)
	}
	// Two nodes held by the same alert: one message, sent by b's timer (no further calls), counting c,
	// which was blocked before it fired.
	r.Blocked("b", "alerts: KubeNodeNotReady firing")
	clk.advance(30 * time.Millisecond)
	r.Blocked("c", "alerts: KubeNodeNotReady firing")
	if fired := clk.advance(after - 30*time.Millisecond - time.Nanosecond); fired != 0 {
		t.Fatalf("%d timers fired before %s", fired, after)
	}
	rec.none(t)
	if fired := clk.advance(time.Nanosecond); fired != 1 {
		t.Fatalf("%d timers fired at %s, want b's", fired, after)
	}
	ev := rec.next(t)
	if ev.Kind != KindBlocked || ev.Node != "b" || ev.Reason != "alerts: KubeNodeNotReady firing" || ev.Detail != "and 1 other node held by alerts" || ev.Took != after {
		t.Errorf("Event %+v", ev)
	}
	// c's own threshold passes (its timer fires): covered by b's message. More calls, a changed
	// detail: still one episode.
	r.Blocked("b", "alerts: KubeNodeNotReady, KubeletDown firing")
	rec.none(t)
	if fired := clk.advance(2 * after); fired != 1 {
		t.Fatalf("%d timers fired, want c's", fired)
	}
	rec.none(t)
	r.Blocked("c", "alerts: KubeNodeNotReady firing")
	rec.none(t)

	// a leaves its (quiet) window wait for a blocker of another kind: counted from now, not from when
	// it began waiting, and reported although the alerts message stands.
	r.Blocked("a", "pods: backup-7f9 (app=backup) on this node")
	clk.advance(after / 2)
	rec.none(t)
	if fired := clk.advance(after / 2); fired != 1 {
		t.Fatalf("%d timers fired, want a's", fired)
	}
	ev = rec.next(t)
	if ev.Node != "a" || ev.Reason != "pods: backup-7f9 (app=backup) on this node" || ev.Detail != "" || ev.Took != after {
		t.Errorf("Event %+v", ev)
	}

	// Both alert-held nodes admitted: the alerts episode is over; the next one is reported again.
	r.Unblocked("b")
	r.Unblocked("c")
	r.Blocked("c", "alerts: Watchdog firing")
	rec.none(t)
	clk.advance(after)
	ev = rec.next(t)
	if ev.Node != "c" || ev.Reason != "alerts: Watchdog firing" || ev.Detail != "" {
		t.Errorf("Event %+v", ev)
	}
	// A quiet kind ends an episode too; the blocker coming back starts a new one.
	r.Blocked("c", "budget: full")
	r.Blocked("c", "alerts: Watchdog firing")
	if n := clk.pending(); n != 1 {
		t.Errorf("%d timers pending, want 1: the new episode's", n)
	}
	clk.advance(after)
	if ev = rec.next(t); ev.Node != "c" {
		t.Errorf("Event %+v", ev)
	}
	rec.none(t)
	clk.advance(2 * after)
	rec.none(t)

	// Off.
	off := NewBlockedRule(rec, 0, nil)
	offClk := clock(off)
	off.Blocked("x", "alerts: y")
	if n := offClk.pending(); n != 0 {
		t.Errorf("the rule is off and started %d timers", n)
	}
	offClk.advance(2 * after)
	var nilRule *BlockedRule
	nilRule.Blocked("x", "alerts: y")
	nilRule.Unblocked("x")
	rec.none(t)
}

func TestBlockedKind(t *testing.T) {
	for why, want := range map[string]string{"alerts: x: y": "alerts", "node gone": "node gone", "": "", " paused : z": "paused"} {
		if got := BlockedKind(why); got != want {
			t.Errorf("BlockedKind(%q) = %q, want %q", why, got, want)
		}
	}
}
