package stall

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Known answers for Of: which reason, for each stage, once the timeout has passed.
func TestStallOf(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	const timeout = 10 * time.Minute
	node := func(ann map[string]string, kubeletBoot string, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: ann}}
		n.Status.NodeInfo.BootID = kubeletBoot
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		return n
	}
	start := t0.Format(time.RFC3339)
	granted := func(extra map[string]string) map[string]string {
		a := map[string]string{protocol.RebootOK: "true", protocol.RebootNeeded: "true", protocol.RebootBootID: "b1", protocol.BootID: "b1", protocol.RebootOKTime: start}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	hooks := protocol.Hooks{Before: []string{"example.com/b"}, After: []string{"example.com/a"}}
	cases := []struct {
		name string
		n    *corev1.Node
		want string
	}{
		{"idle", node(nil, "b1", true), ""},
		{"waiting for the budget", node(map[string]string{protocol.RebootNeeded: "true"}, "b1", true), ""},
		{"before hooks pending", node(map[string]string{protocol.RebootNeeded: "true", protocol.CycleStarted: start}, "b1", true), HooksPending},
		{"draining", node(map[string]string{protocol.RebootNeeded: "true", protocol.DrainStarted: start}, "b1", true), DrainFailing},
		{"granted, same boot", node(granted(nil), "b1", true), RebootTimeout},
		{"granted, in progress, same boot", node(granted(map[string]string{protocol.RebootInProgress: "true"}), "b1", false), RebootTimeout},
		{"new boot, agent silent", node(granted(map[string]string{protocol.RebootInProgress: "true"}), "b2", true), AgentSilent},
		{"back, not Ready", node(granted(map[string]string{protocol.RebootNeeded: "false", protocol.BootID: "b2"}), "b2", false), NotReady},
		{"back and Ready: finishing, not stalled", node(granted(map[string]string{protocol.RebootNeeded: "false", protocol.BootID: "b2"}), "b2", true), ""},
		{"agent back, kubelet not", node(granted(map[string]string{protocol.RebootNeeded: "false", protocol.BootID: "b2"}), "b1", true), RebootTimeout},
		{"paused mid-drain", node(map[string]string{protocol.RebootNeeded: "true", protocol.DrainStarted: start, protocol.RebootPaused: "true"}, "b1", true), Paused},
		{"no stage time (older operator): never", node(map[string]string{protocol.RebootNeeded: "true", protocol.DrainStarted: "garbage"}, "b1", true), ""},
	}
	cases[2].n.Labels = map[string]string{protocol.BeforeReboot: "true"}
	for _, c := range cases {
		f := protocol.Observe(c.n, hooks)
		state := protocol.Classify(f)
		if got, at := Of(state, f, c.n, t0.Add(timeout-time.Second), timeout); got != "" {
			t.Errorf("%s: stalled %q before the timeout", c.name, got)
		} else if c.want != "" && !at.Equal(t0.Add(timeout)) {
			t.Errorf("%s: will stall at %s, want %s", c.name, at, t0.Add(timeout))
		}
		if got, _ := Of(state, f, c.n, t0.Add(timeout), timeout); got != c.want {
			t.Errorf("%s (state %s): stall %q, want %q", c.name, state, got, c.want)
		}
		if got, _ := Of(state, f, c.n, t0.Add(timeout), 0); got != "" {
			t.Errorf("%s: stalled %q with no timeout", c.name, got)
		}
	}
}

// reboot-in-progress without reboot-ok: stalled "ungranted" at once, whatever the timeout says; with
// the grant it is the ordinary rebooting stage, timed from reboot-ok-time.
func TestStallOfUngranted(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{protocol.RebootInProgress: protocol.True}}}
	f := protocol.Observe(n, protocol.Hooks{})
	if s := protocol.Classify(f); s != protocol.Rebooting {
		t.Fatalf("state %s", s)
	}
	if r, _ := Of(protocol.Rebooting, f, n, now, time.Hour); r != Ungranted {
		t.Errorf("ungranted: %q", r)
	}
	if r, _ := Of(protocol.Rebooting, f, n, now, 0); r != "" {
		t.Errorf("stall reporting off (no --reboot-timeout): %q", r)
	}
	n.Annotations[protocol.RebootOK] = protocol.True
	n.Annotations[protocol.RebootOKTime] = now.Add(-time.Minute).Format(time.RFC3339)
	if r, at := Of(protocol.Rebooting, protocol.Observe(n, protocol.Hooks{}), n, now, time.Hour); r != "" || !at.Equal(now.Add(59*time.Minute)) {
		t.Errorf("granted: %q at %s", r, at)
	}
	if Hint(Ungranted, n) == "" {
		t.Error("no hint")
	}
}
