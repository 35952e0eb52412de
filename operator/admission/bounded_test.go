package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A check that has answered is over: the next decision asks the blocker again at once and gets its
// answer, never "an earlier check has not answered" (the operator's sync asks a held node's blockers
// again on every look; a stale "still running" would hold the node with a false reason).
func TestBoundedCheckBackToBack(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(context.Context, *corev1.Node) (bool, string)
		want string
	}{
		{"answers", func(context.Context, *corev1.Node) (bool, string) { return true, "busy" }, "busy"},
		{"panics", func(context.Context, *corev1.Node) (bool, string) { panic("boom") }, "check failed: panic: boom"},
	} {
		b := Bounded(Func{N: "b", F: c.f}, time.Minute)
		for i := range 2000 {
			if blocked, reason := b.Check(context.Background(), &corev1.Node{}); !blocked || reason != c.want {
				t.Fatalf("%s: call %d: %v %q, want blocked %q", c.name, i+1, blocked, reason, c.want)
			}
		}
	}
}

// A check still running when its bound passes is not started again: the next call blocks, saying so,
// and once the slow check returns, the blocker is asked again.
func TestBoundedCheckStillRunning(t *testing.T) {
	release := make(chan struct{})
	calls := 0
	b := Bounded(Func{N: "slow", F: func(context.Context, *corev1.Node) (bool, string) {
		calls++
		if calls == 1 {
			<-release
		}
		return false, ""
	}}, 10*time.Millisecond)
	if blocked, reason := b.Check(context.Background(), &corev1.Node{}); !blocked || !strings.Contains(reason, "no answer within 10ms") {
		t.Fatalf("first call: %v %q", blocked, reason)
	}
	if blocked, reason := b.Check(context.Background(), &corev1.Node{}); !blocked || !strings.Contains(reason, "an earlier check has not answered") {
		t.Fatalf("while the first runs: %v %q", blocked, reason)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		blocked, reason := b.Check(context.Background(), &corev1.Node{})
		if !blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the slow check returned: still %q", reason)
		}
		time.Sleep(time.Millisecond)
	}
}
