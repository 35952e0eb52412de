package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/versions"
	"github.com/slipway-dev/slipway/operator/window"
)

var t0 = time.Date(2026, 11, 19, 9, 0, 0, 0, time.UTC) // a Thursday

func max(t *testing.T, s string) budget.Max {
	t.Helper()
	m, err := budget.ParseMax(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func obj(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

// fleetOf indexes the entries (name -> entry) and returns a decision's view of them.
func fleetOf(entries map[string]Node, sw Switch) (*Index, *Fleet) {
	x := NewIndex()
	for name, e := range entries {
		e := e
		x.Update(name, t0, func() (Node, bool) { return e, true })
	}
	s := x.Snapshot()
	return x, &Fleet{Snapshot: &s, Switch: sw}
}

// notPaused keeps the waiting nodes that are not reboot-paused as the plan's candidates.
func notPaused(_ string, e Node) bool { return !e.Paused }

var (
	waiting = Node{State: protocol.NeedsReboot}
	cycling = Node{State: protocol.Draining, Counts: true}
	idle    = Node{State: protocol.Idle}
)

func TestWindowGate(t *testing.T) {
	thu, err := window.Parse("Thu 14:00", "1h", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	never, err := window.ParseExclusion("2026-01-01/2028-01-01")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		s     Schedule
		now   time.Time
		want  string
		retry time.Duration
	}{
		{"no schedule", nil, t0, "", 0},
		{"closed: retry when it opens", window.NewSchedule(thu, nil, nil), t0, "window: closed until 2026-11-19T14:00:00Z", 5*time.Hour + time.Second},
		{"open", window.NewSchedule(thu, nil, nil), t0.Add(5*time.Hour + 30*time.Minute), "", 0},
		{"never opens", window.NewSchedule(nil, nil, []window.Exclusion{never}), t0, "window: no reboot window opens in the next 400 days (", 0},
	} {
		v := WindowGate.Check(context.Background(), Input{Name: "a", Now: c.now, Policy: &Rules{Schedule: c.s}})
		if !strings.HasPrefix(v.String(), c.want) || (c.want == "") != v.Passes() || v.Retry != c.retry {
			t.Errorf("%s: %q retry %s, want %q retry %s", c.name, v, v.Retry, c.want, c.retry)
		}
	}
}

func TestPauseGate(t *testing.T) {
	for _, c := range []struct {
		name  string
		sw    fleetswitch.Switch
		group string
		want  string
	}{
		{"nothing paused", fleetswitch.Switch{}, "a", ""},
		{"fleet paused", fleetswitch.Switch{Paused: true, Reason: "incident 42"}, "a", "paused: fleet paused: incident 42"},
		{"own group paused", fleetswitch.Switch{Groups: map[string]string{"a": "AZ maintenance"}}, "a", "paused: group a paused: AZ maintenance"},
		{"other group paused", fleetswitch.Switch{Groups: map[string]string{"b": "x"}}, "a", ""},
	} {
		_, f := fleetOf(nil, c.sw)
		if v := PauseGate.Check(context.Background(), Input{Node: Node{Group: c.group}, Fleet: f}); v.String() != c.want {
			t.Errorf("%s: %q, want %q", c.name, v, c.want)
		}
	}
}

func TestFleetBlockersGateAsksEveryBlocker(t *testing.T) {
	asked := 0
	fire := func(name, reason string) Blocker {
		return Func{N: name, Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { asked++; return reason != "", reason }}
	}
	x, f := fleetOf(map[string]Node{"a": waiting}, fleetswitch.Switch{})
	a := NewAdmitter(Config{Blockers: []Blocker{fire("quiet", ""), fire("prometheus-alerts", "NodeDown firing"), fire("min-ready-nodes", "2 of 5 Ready")}}, x)
	f.blocking, f.retry = a.fleetBlocking(context.Background(), obj("a"), t0, nil, 0).results, DefaultBlockerRetry
	v := FleetBlockersGate.Check(context.Background(), Input{Obj: obj("a"), Fleet: f})
	if v.String() != "prometheus-alerts: NodeDown firing" || v.Retry != DefaultBlockerRetry {
		t.Errorf("verdict %q retry %s", v, v.Retry)
	}
	if asked != 3 || len(f.ActiveBlockers) != 2 || f.ActiveBlockers["min-ready-nodes"] != "2 of 5 Ready" {
		t.Errorf("asked %d, active %v: every blocker is asked so the status lists all", asked, f.ActiveBlockers)
	}
}

func TestOrderGate(t *testing.T) {
	worker, cp := Node{State: protocol.NeedsReboot}, Node{State: protocol.NeedsReboot, ControlPlane: true}
	for _, c := range []struct {
		name  string
		o     Order
		fleet map[string]Node
		node  Node
		want  Kind
	}{
		{"none", OrderNone, map[string]Node{"w": worker, "c": cp}, cp, ""},
		{"workers first, a worker waits", OrderWorkersFirst, map[string]Node{"w": worker, "c": cp}, cp, KindOrder},
		{"workers first, a paused worker does not count", OrderWorkersFirst, map[string]Node{"w": {State: protocol.NeedsReboot, Paused: true}, "c": cp}, cp, ""},
		{"workers first, the worker itself", OrderWorkersFirst, map[string]Node{"w": worker, "c": cp}, worker, ""},
		{"control plane first, one in its cycle", OrderControlPlaneFirst, map[string]Node{"w": worker, "c": {State: protocol.Rebooting, ControlPlane: true, Counts: true}}, worker, KindOrder},
		{"control plane first, all idle", OrderControlPlaneFirst, map[string]Node{"w": worker, "c": {State: protocol.Idle, ControlPlane: true}}, worker, ""},
	} {
		_, f := fleetOf(c.fleet, fleetswitch.Switch{})
		f.Order = c.o
		if v := OrderGate.Check(context.Background(), Input{Node: c.node, Fleet: f}); v.Kind != c.want {
			t.Errorf("%s: %q, want kind %q", c.name, v, c.want)
		}
	}
}

func TestBudgetAndNodeBlockerGates(t *testing.T) {
	l := Limits{Fleet: max(t, "2"), ControlPlane: max(t, "1")}
	g1 := max(t, "1")
	cases := []struct {
		name    string
		limits  Limits
		fleet   map[string]Node
		since   map[string]time.Duration // waited this long before t0
		held    map[string]string        // per-node blockers
		node    string
		want    string
		nodeGot string // NodeBlockersGate's verdict
	}{
		{"room", l, map[string]Node{"a": waiting, "b": idle}, nil, nil, "a", "", ""},
		{"fleet full", l, map[string]Node{"a": waiting, "x": cycling, "y": cycling}, nil, nil, "a", "budget: full (max-unavailable)", ""},
		{"longest waiting first", l, map[string]Node{"a": waiting, "b": waiting, "x": cycling}, map[string]time.Duration{"b": time.Hour, "a": time.Minute}, nil, "a", "budget: full (max-unavailable)", ""},
		{"ahead in order, pool not full", l, map[string]Node{"a": waiting, "b": waiting, "c": waiting}, map[string]time.Duration{"a": time.Minute, "b": time.Hour, "c": time.Hour}, nil, "a", "budget: full (max-unavailable)", ""},
		{"already unavailable goes free", l, map[string]Node{"a": {State: protocol.NeedsReboot, Counts: true}, "x": cycling, "b": waiting},
			map[string]time.Duration{"b": time.Hour}, nil, "a", "", ""},
		{"...and the pool it already fills is full for the others", l, map[string]Node{"a": {State: protocol.NeedsReboot, Counts: true}, "x": cycling, "b": waiting},
			map[string]time.Duration{"b": time.Hour}, nil, "b", "budget: full (max-unavailable)", ""},
		{"group full", Limits{Fleet: max(t, "5"), PerGroup: &g1, ControlPlane: max(t, "1")},
			map[string]Node{"a": {State: protocol.NeedsReboot, Group: "z"}, "x": {State: protocol.Draining, Counts: true, Group: "z"}}, nil, nil, "a", "budget: full (group/z)", ""},
		{"control plane full", l, map[string]Node{"a": {State: protocol.NeedsReboot, ControlPlane: true}, "x": {State: protocol.Rebooting, Counts: true, ControlPlane: true}}, nil, nil, "a", "budget: full (control-plane)", ""},
		{"a held node takes no budget", Limits{Fleet: max(t, "1"), ControlPlane: max(t, "1")}, map[string]Node{"a": waiting, "b": waiting},
			map[string]time.Duration{"b": time.Hour}, map[string]string{"b": "pods-on-node: db-0 running"}, "a", "", ""},
		// Settling (--settle-time, --settle-pdbs): a finished node holds its slots; the hold says so.
		{"settling fills the pool", Limits{Fleet: max(t, "1"), ControlPlane: max(t, "1")}, map[string]Node{"a": waiting, "s": {State: protocol.Idle, Settling: "--settle-time 5m"}, "t": {State: protocol.Idle, Settling: "--settle-time 5m; PDBs short: shop/web"}},
			nil, nil, "a", "settling: nodes that finished their cycle hold their slots: --settle-time 5m; PDBs short: shop/web", ""},
		{"settling, but room beside it", l, map[string]Node{"a": waiting, "s": {State: protocol.Idle, Settling: "finished"}}, nil, nil, "a", "", ""},
		{"full with a cycle too: the budget's answer", l, map[string]Node{"a": waiting, "x": cycling, "y": cycling, "s": {State: protocol.Idle, Settling: "finished"}}, nil, nil, "a", "budget: full (max-unavailable)", ""},
		{"settling in another group: its group has room", Limits{Fleet: max(t, "5"), PerGroup: &g1, ControlPlane: max(t, "1")},
			map[string]Node{"a": {State: protocol.NeedsReboot, Group: "z"}, "s": {State: protocol.Idle, Group: "y", Settling: "finished"}}, nil, nil, "a", "", ""},
		{"settling in its group", Limits{Fleet: max(t, "5"), PerGroup: &g1, ControlPlane: max(t, "1")},
			map[string]Node{"a": {State: protocol.NeedsReboot, Group: "z"}, "s": {State: protocol.Idle, Group: "z", Settling: "PDBs short: shop/web"}}, nil, nil, "a", "settling: nodes that finished their cycle hold their slots: PDBs short: shop/web", ""},
		{"a settling node asking again waits for its own settle", Limits{Fleet: max(t, "1"), ControlPlane: max(t, "1")},
			map[string]Node{"s": {State: protocol.NeedsReboot, Settling: "finished"}}, nil, nil, "s", "settling: nodes that finished their cycle hold their slots: finished", ""},
		{"...unless there is room beside it", l, map[string]Node{"s": {State: protocol.NeedsReboot, Settling: "finished"}}, nil, nil, "s", "", ""},
		{"the held node passes the budget, not the blockers", l, map[string]Node{"b": waiting}, nil, map[string]string{"b": "pods-on-node: db-0 running"}, "b", "", "pods-on-node: db-0 running"},
	}
	for _, c := range cases {
		x, _ := fleetOf(nil, fleetswitch.Switch{})
		for name, e := range c.fleet {
			e := e
			at := t0.Add(-c.since[name])
			x.Update(name, at, func() (Node, bool) { return e, true })
		}
		s := x.Snapshot()
		f := &Fleet{Snapshot: &s, Switch: fleetswitch.Switch{}}
		f.plan = func() *Plan {
			return BuildPlan(&s, c.limits, t0, notPaused, func(name string) Verdict {
				if r, ok := c.held[name]; ok {
					k, reason, _ := strings.Cut(r, ": ")
					return Held(Kind(k), reason, DefaultBlockerRetry)
				}
				return Pass
			})
		}
		in := Input{Name: c.node, Node: c.fleet[c.node], Now: t0, Fleet: f}
		if v := BudgetGate.Check(context.Background(), in); v.String() != c.want {
			t.Errorf("%s: budget %q, want %q", c.name, v, c.want)
		}
		if v := NodeBlockersGate.Check(context.Background(), in); v.String() != c.nodeGot {
			t.Errorf("%s: node blockers %q, want %q", c.name, v, c.nodeGot)
		}
	}
}

func TestKinds(t *testing.T) {
	for why, want := range map[string]Kind{"budget: full (max-unavailable)": KindBudget, "pods-on-node: x: y": KindPodsOnNode, "odd": "odd", "": ""} {
		if got := KindOf(why); got != want {
			t.Errorf("KindOf(%q) = %q, want %q", why, got, want)
		}
	}
	for _, k := range Kinds {
		if k.Quiet() != (k == KindBudget || k == KindSettling || k == KindCanary || k == KindWindow || k == KindOrder || k == KindVersion || k == KindProof) {
			t.Errorf("%s quiet = %v", k, k.Quiet())
		}
	}
	if s := Held(KindPaused, "fleet paused: x", 0).String(); s != "paused: fleet paused: x" || Pass.String() != "" {
		t.Errorf("String: %q", s)
	}
}

// Queue is the order the plan admits in: known answers (already unavailable first, then the longest
// waiting, then by name; reboot-paused, paused groups and nodes the control-plane order keeps back have
// no place), and for every fleet limit the plan admits a prefix of it.
func TestQueue(t *testing.T) {
	entries := map[string]Node{
		"a":      waiting,
		"b":      waiting,
		"c":      waiting,
		"down":   {State: protocol.NeedsReboot, Counts: true}, // NotReady or cordoned: costs nothing
		"paused": {State: protocol.NeedsReboot, Paused: true},
		"zoned":  {State: protocol.NeedsReboot, Group: "z"},
		"cp":     {State: protocol.NeedsReboot, ControlPlane: true},
		"idle":   idle,
	}
	since := map[string]time.Duration{"a": time.Minute, "b": time.Hour, "c": time.Hour, "down": 0, "cp": 2 * time.Hour, "zoned": 3 * time.Hour}
	x := NewIndex()
	for name, e := range entries {
		e := e
		x.Update(name, t0.Add(-since[name]), func() (Node, bool) { return e, true })
	}
	s := x.Snapshot()
	sw := fleetswitch.Switch{Groups: map[string]string{"z": "AZ maintenance"}}
	for _, c := range []struct {
		order Order
		want  string
	}{
		{OrderNone, "down cp b c a"},
		{OrderWorkersFirst, "down b c a"}, // workers wait: the control plane is kept back
		{OrderControlPlaneFirst, "cp"},    // a control-plane node waits: workers are kept back
	} {
		if got := strings.Join(Queue(&s, c.order, sw, t0), " "); got != c.want {
			t.Errorf("%s: queue %q, want %q", c.order, got, c.want)
		}
	}
	q := Queue(&s, OrderNone, sw, t0)
	for limit := 1; limit <= len(q); limit++ {
		p := BuildPlan(&s, Limits{Fleet: max(t, fmt.Sprint(limit)), ControlPlane: max(t, "5")}, t0, func(name string, _ Node) bool { return slices.Contains(q, name) }, func(string) Verdict { return Pass })
		var got []string
		for _, name := range q {
			if p.Admitted[name] {
				got = append(got, name)
			}
		}
		// down counts already, so limit-1 others fit beside it.
		if want := q[:min(limit, len(q))]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("limit %d: admitted %q, want the queue's first %q", limit, got, want)
		}
	}
}

// AgentProtocolGate: FLUO's protocol (announced or not) and the current one go; anything else is held,
// with the value cut short in the reason (a node writes it).
func TestAgentProtocolGate(t *testing.T) {
	g := AgentProtocolGate
	for _, k := range []struct {
		v    string
		pass bool
	}{{"", true}, {protocol.AgentProtocolFLUO, true}, {protocol.AgentProtocolCurrent, true}, {"3", false}, {strings.Repeat("x", 500), false}} {
		v := g.Check(context.Background(), Input{Node: Node{AgentProtocol: k.v}})
		if v.Passes() != k.pass {
			t.Errorf("protocol %.10q: passes %v, want %v (%s)", k.v, v.Passes(), k.pass, v)
		}
		if !k.pass && (v.Kind != KindAgentVersion || len(v.String()) > 300 || !strings.Contains(v.String(), "upgrade the operator first")) {
			t.Errorf("protocol %.10q: verdict %q", k.v, v)
		}
	}
	// What admission reads off a Node: none announced is FLUO's.
	n := obj("a")
	if e := Of(n, "", ""); e.AgentProtocol != protocol.AgentProtocolFLUO {
		t.Errorf("no annotation: %q", e.AgentProtocol)
	}
	n.Annotations = map[string]string{protocol.AgentProtocol: "7"}
	if e := Of(n, "", ""); e.AgentProtocol != "7" {
		t.Errorf("announced 7: %q", e.AgentProtocol)
	}
}

// seenSwitch is a Switch that remembers when each version was first seen staged.
type seenSwitch struct {
	fleetswitch.Switch
	seen  map[string]time.Time
	halts map[string]fleetrecord.Halt
}

func (s seenSwitch) VersionFirstSeen(v string) time.Time { return s.seen[v] }
func (s seenSwitch) VersionHalt(v string) (fleetrecord.Halt, bool) {
	h, ok := s.halts[v]
	return h, ok
}
func (s seenSwitch) HaltsInForce() []string {
	var out []string
	for v := range s.halts {
		out = append(out, v)
	}
	return out
}

// A staged version its policy does not let the node reboot into holds it, naming the version, the
// rule and the policy; minAge counts from the fleet's first sighting and says when it ends; a node
// whose agent names no version is held when there are rules to judge it by.
func TestDeclaredVersionGate(t *testing.T) {
	rules, err := versions.Compile([]string{">=4459.2.0 <4500.0.0"}, []string{"4459.2.3"}, 72*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sw := seenSwitch{seen: map[string]time.Time{"4459.2.1": t0.Add(-100 * time.Hour), "4459.2.2": t0.Add(-24 * time.Hour)},
		halts: map[string]fleetrecord.Halt{"4459.2.5": {Version: "4459.2.5", By: "alice", At: t0.Add(-time.Hour), Why: "kernel regression"}}}
	for _, c := range []struct {
		name, version string
		rules         versions.Rules
		pool          string
		want          string
		retry         time.Duration
	}{
		{"no rules", "9999.0.0", versions.Rules{}, "", "", 0},
		{"no rules, no version", "", versions.Rules{}, "", "", 0},
		{"allowed and old enough", "4459.2.1", rules, "prod", "", 0},
		{"denied", "4459.2.3", rules, "prod", "version: 4459.2.3 denied by rp/prod (deny: 4459.2.3)", 0},
		{"not allowed, the flags'", "4500.1.0", rules, "", "version: 4500.1.0 not allowed by the flags (allow: >=4459.2.0 <4500.0.0)", 0},
		{"too young: until its age", "4459.2.2", rules, "prod", "version: 4459.2.2 allowed from 2026-11-21T09:00:00Z (minAge 72h0m0s, rp/prod)", 48*time.Hour + 10*time.Millisecond},
		{"never seen: from now", "4459.2.4", rules, "prod", "version: 4459.2.4 allowed from 2026-11-22T09:00:00Z (minAge 72h0m0s, rp/prod)", 72*time.Hour + 10*time.Millisecond},
		{"halted by a person, with no rules", "4459.2.5", versions.Rules{}, "", "version-halted: 4459.2.5 halted by alice at 2026-11-19T08:00:00Z: kernel regression; kubectl slipway resume --version 4459.2.5 releases it", 0},
		{"no version named while a version is halted", "", versions.Rules{}, "", "version-halted: its agent does not say which version it staged, and versions are halted: 4459.2.5", 0},
		{"no version named", "", rules, "prod", "version: its agent does not say which version it staged, and rp/prod says which versions it may reboot into", 0},
	} {
		s := sw
		if c.version == "" && !strings.Contains(c.name, "halted") {
			s = seenSwitch{seen: sw.seen} // no halt in force
		}
		_, f := fleetOf(nil, s)
		e := waiting
		e.AskedVersion = c.version
		v := DeclaredVersionGate.Check(context.Background(), Input{Name: "a", Node: e, Now: t0, Fleet: f, Policy: &Rules{Name: c.pool, Versions: c.rules}})
		if v.String() != c.want || v.Retry != c.retry {
			t.Errorf("%s: %q retry %s, want %q retry %s", c.name, v, v.Retry, c.want, c.retry)
		}
	}
}
