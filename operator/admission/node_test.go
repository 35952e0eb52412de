package admission

import (
	"github.com/slipway-dev/slipway/operator/budget"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/stall"
)

// Of reads the pools an admission pinned while the node is in its cycle, and ignores a pin left on a
// node out of it: a relabel or a FleetLock group hop mid-cycle keeps the node in the pools it started
// in, as well as the ones it is in now.
func TestOfPinsTheAdmissionPools(t *testing.T) {
	const zone = "example.com/zone"
	node := func(labels, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: ann},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	draining := map[string]string{protocol.RebootNeeded: "true", protocol.DrainStarted: "2026-11-24T00:00:00Z"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name     string
		n        *corev1.Node
		groups   []string
		keys     []string
		cp       bool
		inCycle  bool
		countsOK bool
	}{
		{"in cycle, same group: one group", node(map[string]string{zone: "a"}, with(draining, protocol.AdmittedGroup, "a")),
			[]string{"a"}, []string{FleetPool, "group/a"}, false, true, true},
		{"relabelled mid-cycle: both groups", node(map[string]string{zone: "b"}, with(draining, protocol.AdmittedGroup, "a")),
			[]string{"b", "a"}, []string{FleetPool, "group/b", "group/a"}, false, true, true},
		{"FleetLock group hop mid-cycle (no label): both groups", node(nil, with(draining, protocol.AdmittedGroup, "a", protocol.FleetLockGroup, "b")),
			[]string{"b", "a"}, []string{FleetPool, "group/b", "group/a"}, false, true, true},
		{"admitted in the default group, labelled since", node(map[string]string{zone: "b"}, with(draining, protocol.AdmittedGroup, "")),
			[]string{"b", ""}, []string{FleetPool, "group/b", "group/"}, false, true, true},
		{"control-plane label removed mid-cycle: still control plane", node(nil, with(draining, protocol.AdmittedGroup, "", protocol.AdmittedControlPlane, "true")),
			[]string{""}, []string{FleetPool, "group/", ControlPlanePool}, true, true, true},
		{"no pin (admitted before pins existed): current group", node(map[string]string{zone: "b"}, draining),
			[]string{"b"}, []string{FleetPool, "group/b"}, false, true, true},
		{"pin left after the cycle: ignored", node(map[string]string{zone: "b"}, map[string]string{protocol.AdmittedGroup: "a", protocol.AdmittedControlPlane: "true"}),
			[]string{"b"}, []string{FleetPool, "group/b"}, false, false, false},
		{"pin on a waiting node: ignored", node(map[string]string{zone: "b"}, map[string]string{protocol.RebootNeeded: "true", protocol.AdmittedGroup: "a"}),
			[]string{"b"}, []string{FleetPool, "group/b"}, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := Of(c.n, zone, stall.Hold)
			if got := e.Groups(); !reflect.DeepEqual(got, c.groups) {
				t.Errorf("Groups() = %q, want %q", got, c.groups)
			}
			if got := e.PoolKeys(); !reflect.DeepEqual(got, c.keys) {
				t.Errorf("PoolKeys() = %q, want %q", got, c.keys)
			}
			if e.ControlPlane != c.cp || e.State.InCycle() != c.inCycle || e.Counts != c.countsOK {
				t.Errorf("ControlPlane %v, in cycle %v, counts %v; want %v, %v, %v", e.ControlPlane, e.State.InCycle(), e.Counts, c.cp, c.inCycle, c.countsOK)
			}
		})
	}
}

// A node relabelled mid-cycle keeps the group it was admitted in occupied: with one per group, the
// next node of that group waits (budget), and a pause of either group holds a node that carries both.
func TestAGroupHopFreesNoSlot(t *testing.T) {
	one := max(t, "1")
	x := NewIndex()
	a := NewAdmitter(Config{Limits: Limits{Fleet: max(t, "10"), PerGroup: &one, ControlPlane: max(t, "1")}}, x)
	hopper := Node{Group: "b", AdmittedGroup: "a", HasAdmittedGroup: true, State: protocol.Draining, Counts: true}
	x.Update("hopper", t0, func() (Node, bool) { return hopper, true })
	x.Update("next", t0, func() (Node, bool) { return Node{Group: "a", State: protocol.NeedsReboot}, true })
	d := a.Decide(t.Context(), "next", obj("next"), fleetswitch.Switch{}, t0, func(n string) (*corev1.Node, bool) { return obj(n), true })
	if d.Admitted() || d.Kind != KindBudget {
		t.Fatalf("next of group a: %v, want held by the budget of group a", d.Verdict)
	}
	if got := PauseGate.Check(t.Context(), Input{Name: "hopper", Node: hopper, Fleet: &Fleet{Switch: fleetswitch.Switch{Groups: map[string]string{"a": "maintenance"}}}}); got.Kind != KindPaused {
		t.Errorf("pause of group a, node admitted in a now in b: %v, want paused", got)
	}
}

// A node admitted under a policy counts against that policy's budget while its admission is being
// written, even if a relabel moves its entry to another policy meanwhile: the next node of the first
// policy waits.
func TestReservationKeepsThePolicy(t *testing.T) {
	x := NewIndex()
	a := NewAdmitter(Config{Limits: Limits{Fleet: max(t, "10"), ControlPlane: max(t, "1")}}, x)
	a.SetPolicies(map[string]*Rules{"db": {Name: "db"}, "web": {Name: "web"}}, map[string]budget.Max{"db": max(t, "1")})
	x.Update("a", t0, func() (Node, bool) { return Node{State: protocol.NeedsReboot, Policy: "db"}, true })
	x.Update("b", t0.Add(time.Second), func() (Node, bool) { return Node{State: protocol.NeedsReboot, Policy: "db"}, true })
	look := func(n string) (*corev1.Node, bool) { return obj(n), true }
	d := a.Decide(t.Context(), "a", obj("a"), fleetswitch.Switch{}, t0.Add(2*time.Second), look)
	if !d.Admitted() || d.Policy.Name != "db" {
		t.Fatalf("a: %v under %+v", d.Verdict, d.Policy)
	}
	// Relabelled into web while its admission's PATCH is on its way.
	x.Update("a", t0.Add(3*time.Second), func() (Node, bool) { return Node{State: protocol.NeedsReboot, Policy: "web"}, true })
	if got := a.Decide(t.Context(), "b", obj("b"), fleetswitch.Switch{}, t0.Add(4*time.Second), look); got.Admitted() || got.Kind != KindBudget {
		t.Fatalf("b of db while a's admission under db is being written: %v, want held by db's budget", got.Verdict)
	}
	d.Release()
}

// A node back on V whose update_engine already staged V+1 before its cycle finished (the operator was
// down or cut off meanwhile) is V's canary in flight, as its grant pinned it, not V+1's: counted for
// V+1, a second canary of V would be admitted beside it (the chaos run's leader cut found this).
func TestOfCountsTheCycleForThePinnedVersion(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u",
		Labels: map[string]string{protocol.Version: "4500.5.0"},
		Annotations: map[string]string{protocol.RebootNeeded: "true", protocol.NewVersion: "4500.6.0",
			protocol.RebootOK: "true", protocol.RebootBootID: "boot-1", protocol.RebootVersion: "4500.5.0",
			protocol.RebootOKTime: "2026-11-26T03:00:00Z", protocol.Cordoned: "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-2"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	e := Of(n, "", stall.Hold)
	if !e.State.InCycle() {
		t.Fatalf("state %s: want a node in its cycle", e.State)
	}
	if e.AskedVersion != "4500.5.0" {
		t.Errorf("AskedVersion = %q, want the pinned 4500.5.0", e.AskedVersion)
	}
	waiting := Of(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{protocol.Version: "4500.4.0"},
		Annotations: map[string]string{protocol.RebootNeeded: "true", protocol.NewVersion: "4500.5.0"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}, "", stall.Hold)
	s := VersionsOf([]Node{e, waiting})
	if v := s["4500.5.0"]; v == nil || v.InFlight != 1 || v.Asking != 1 {
		t.Errorf("4500.5.0: %+v, want 1 in flight (the pinned cycle) and 1 asking", v)
	}
	if v := s["4500.6.0"]; v != nil && v.InFlight != 0 {
		t.Errorf("4500.6.0: %+v, want none in flight", v)
	}
	// With one canary, the waiting node asking for 4500.5.0 waits.
	c := CanaryOf(WithMemory(*s["4500.5.0"], "4500.5.0", nil), Canary{Nodes: 1, Bake: time.Minute}, time.Time{}, t0, 0)
	if c.State != "waiting" {
		t.Errorf("4500.5.0 canary state %q, want waiting (its canary is in flight)", c.State)
	}
}

// A node settling after its cycle counts against the group it was admitted in (its pins, left by the
// cycle's end) as well as its own; out of its cycle and not settling, the pins mean nothing.
func TestSettleInKeepsTheAdmittedGroup(t *testing.T) {
	const zone = "example.com/zone"
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{zone: "b"},
		Annotations: map[string]string{protocol.AdmittedGroup: "a", protocol.AdmittedControlPlane: "true"}}}
	e := Of(n, zone, stall.Hold)
	e.SettleIn(n)
	if e.HasAdmittedGroup || e.ControlPlane {
		t.Fatalf("not settling, yet pinned: %+v", e)
	}
	e.Settling = "--settle-time 10m"
	e.SettleIn(n)
	if got := e.PoolKeys(); !reflect.DeepEqual(got, []string{FleetPool, GroupPool("b"), GroupPool("a"), ControlPlanePool}) {
		t.Fatalf("a settling node's pools: %v, want its own group, the one it was admitted in, the control plane's", got)
	}
}

// A canary's stall is dated when the operator saw it (stalled-at), not at its grant: a stall seen
// after a resume --version (which forgives what came before it) counts. Without stalled-at (an older
// operator's), the grant's time.
func TestStallDatedWhenSeen(t *testing.T) {
	node := func(stalledAt string) *corev1.Node {
		a := map[string]string{protocol.RebootNeeded: "true", protocol.RebootOK: "true", protocol.RebootBootID: "boot-1",
			protocol.RebootVersion: "4500.6.0", protocol.RebootOKTime: "2026-11-26T03:00:00Z", protocol.Stalled: "reboot-timeout"}
		if stalledAt != "" {
			a[protocol.StalledAt] = stalledAt
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", Labels: map[string]string{protocol.Version: "4500.5.0"}, Annotations: a},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"}}}
	}
	e := Of(node("2026-11-26T03:31:00Z"), "", stall.Hold)
	if e.StalledVersion != "4500.6.0" || !e.StalledAt.Equal(time.Date(2026, 11, 26, 3, 31, 0, 0, time.UTC)) {
		t.Errorf("stalled %q at %s, want 4500.6.0 at 03:31 (when it was seen)", e.StalledVersion, e.StalledAt)
	}
	if e := Of(node(""), "", stall.Hold); !e.StalledAt.Equal(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("without stalled-at: %s, want the grant's 03:00", e.StalledAt)
	}
}
