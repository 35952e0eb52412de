package notify

import (
	"testing"
	"time"
)

// recorder is a Notifier that hands every Event to the test.
type recorder chan Event

func (r recorder) Notify(ev Event) { r <- ev }

func (r recorder) next(t *testing.T) Event {
	t.Helper()
	select {
	case ev := <-r:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no blocked Event within 5s")
		return Event{}
	}
}

func (r recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ev := <-r:
		t.Fatalf("unexpected Event %+v", ev)
	case <-time.After(d):
	}
}

func TestBlockedRule(t *testing.T) {
	const after = 100 * time.Millisecond
	rec := make(recorder, 10)
	r := NewBlockedRule(rec, after, DefaultQuietKinds)

	// The plan working (budget, window, order) is never reported.
	r.Blocked("a", "window: closed until 2026-07-01T22:00:00Z")
	r.Blocked("d", "budget: full (fleet 1/1)")
	// Two nodes held by the same alert: one message, sent by the timer (no further calls), counting the other.
	start := time.Now()
	r.Blocked("b", "alerts: KubeNodeNotReady firing")
	time.Sleep(30 * time.Millisecond)
	r.Blocked("c", "alerts: KubeNodeNotReady firing")
	rec.none(t, 30*time.Millisecond)
	ev := rec.next(t)
	if waited := time.Since(start); waited < after {
		t.Errorf("reported after %s, before %s", waited, after)
	}
	if ev.Kind != KindBlocked || ev.Node != "b" || ev.Reason != "alerts: KubeNodeNotReady firing" || ev.Detail != "and 1 other node held by alerts" || ev.Took < after {
		t.Errorf("Event %+v", ev)
	}
	// c's own threshold passes: covered by b's message. More calls, a changed detail: still one episode.
	r.Blocked("b", "alerts: KubeNodeNotReady, KubeletDown firing")
	rec.none(t, 2*after)
	r.Blocked("c", "alerts: KubeNodeNotReady firing")
	rec.none(t, 10*time.Millisecond)

	// a leaves its (quiet) window wait for a blocker of another kind: counted from now, not from when
	// it began waiting, and reported although the alerts message stands.
	kindStart := time.Now()
	r.Blocked("a", "pods: backup-7f9 (app=backup) on this node")
	rec.none(t, after/2)
	ev = rec.next(t)
	if ev.Node != "a" || ev.Reason != "pods: backup-7f9 (app=backup) on this node" || ev.Detail != "" || time.Since(kindStart) < after {
		t.Errorf("Event %+v after %s", ev, time.Since(kindStart))
	}

	// Both alert-held nodes admitted: the alerts episode is over; the next one is reported again.
	r.Unblocked("b")
	r.Unblocked("c")
	r.Blocked("c", "alerts: Watchdog firing")
	ev = rec.next(t)
	if ev.Node != "c" || ev.Reason != "alerts: Watchdog firing" || ev.Detail != "" {
		t.Errorf("Event %+v", ev)
	}
	// A quiet kind ends an episode too; the blocker coming back starts a new one.
	r.Blocked("c", "budget: full")
	r.Blocked("c", "alerts: Watchdog firing")
	if ev = rec.next(t); ev.Node != "c" {
		t.Errorf("Event %+v", ev)
	}
	rec.none(t, 2*after)

	// Off.
	off := NewBlockedRule(rec, 0, nil)
	off.Blocked("x", "alerts: y")
	var nilRule *BlockedRule
	nilRule.Blocked("x", "alerts: y")
	nilRule.Unblocked("x")
	rec.none(t, 2*after)
}

func TestBlockedKind(t *testing.T) {
	for why, want := range map[string]string{"alerts: x: y": "alerts", "node gone": "node gone", "": "", " paused : z": "paused"} {
		if got := BlockedKind(why); got != want {
			t.Errorf("BlockedKind(%q) = %q, want %q", why, got, want)
		}
	}
}
