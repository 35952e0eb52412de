package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/window"
)

// FLUO's window in a published policy, in every form window.Window.Spec writes it, reads back into the
// same window.
func TestFLUOWindowReadBack(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct {
		start, length string
		loc           *time.Location
	}{
		{"14:00", "1h", time.UTC},
		{"Thu 14:00", "1h30m", berlin},
		{"sun 00:05", "30m", time.UTC},
		{"23:59", "23h", berlin},
	} {
		w, err := window.Parse(c.start, c.length, c.loc)
		if err != nil {
			t.Fatal(err)
		}
		// Published in the policy and read back by the view.
		start, length, zone := w.Spec()
		spec := policy.Defaults()
		spec.FLUOWindow = policy.FLUOWindow{Start: start, Length: length, TimeZone: zone}
		set := settingsOf(fleetCM(t, fleetswitch.Status{}, spec), true)
		if set.pol == nil {
			t.Fatalf("%q: %s", w.String(), set.why)
		}
		sched := set.pol.Schedule.(*window.Schedule)
		got := sched.FLUO()
		if got == nil || got.String() != w.String() {
			t.Fatalf("%q read back as %v", w.String(), got)
		}
		// And the same instants open: a week in 7-minute steps.
		t0 := time.Date(2026, 3, 23, 0, 0, 0, 0, time.UTC)
		for at := t0; at.Before(t0.AddDate(0, 0, 8)); at = at.Add(7 * time.Minute) {
			if got.Contains(at) != w.Contains(at) || sched.Open(at) != w.Contains(at) {
				t.Fatalf("%q: read back differs at %s", w.String(), at)
			}
		}
	}
	bad := policy.Defaults()
	bad.FLUOWindow = policy.FLUOWindow{Start: "Moonday 14:00", Length: "1h", TimeZone: "UTC"}
	if set := settingsOf(fleetCM(t, fleetswitch.Status{}, bad), true); set.pol != nil {
		t.Error("a bad published FLUO window must be an error, not a schedule")
	}
}

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // a Monday, 10:00 in Berlin
	published := func(windows, exclusions []string, fluo policy.FLUOWindow) *corev1.ConfigMap {
		spec := policy.Defaults()
		spec.Windows, spec.Exclusions = windows, exclusions
		if fluo.Start != "" {
			spec.FLUOWindow = fluo
		}
		return fleetCM(t, fleetswitch.Status{}, spec)
	}
	status := func(windows, exclusions []string) *corev1.ConfigMap {
		return published(windows, exclusions, policy.FLUOWindow{})
	}
	at := func(s string) *time.Time { t, _ := time.Parse(time.RFC3339, s); return &t }
	for _, c := range []struct {
		name      string
		cm        *corev1.ConfigMap
		published bool
		want      Schedule
	}{
		{"no windows", status(nil, nil), true, Schedule{Known: true, Open: true}},
		{"closed", status([]string{"Mon-Fri 22:00-05:00 Europe/Berlin"}, nil), true, Schedule{
			Known: true, NextOpen: at("2026-11-23T21:00:00Z"), ClosedBy: "outside the reboot windows",
		}},
		{"open", status([]string{"Sat,Sun 00:00-24:00", "08:00-10:00 UTC"}, nil), true, Schedule{Known: true, Open: true}},
		{"FLUO's window among them", published([]string{"Sat 00:00-01:00"}, nil,
			policy.FLUOWindow{Start: "08:30", Length: "1h", TimeZone: "UTC"}), true, Schedule{Known: true, Open: true}},
		{"FLUO's window alone, closed", published(nil, nil,
			policy.FLUOWindow{Start: "Tue 08:30", Length: "1h", TimeZone: "UTC"}), true, Schedule{
			Known: true, NextOpen: at("2026-11-24T08:30:00Z"), ClosedBy: "outside the reboot windows",
		}},
		{"excluded", status(nil, []string{"2026-11-20/2026-11-24"}), true, Schedule{
			Known: true, NextOpen: at("2026-11-25T00:00:00Z"), ClosedBy: "reboot exclusion 2026-11-20/2026-11-24 UTC",
		}},
		{"unparseable", status([]string{"whenever"}, nil), true, Schedule{Error: "the operator's published policy: reboot-window: window \"whenever\": "}},
		{"not published", nil, false, Schedule{Error: "the operator has published no status"}},
		{"no policies published", &corev1.ConfigMap{Data: map[string]string{fleetswitch.KeyStatus: `{"leader":"op-1"}`}}, true, Schedule{Error: noPolicies}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := schedule(settingsOf(c.cm, c.published), now)
			if got.Known != c.want.Known || got.Open != c.want.Open || got.ClosedBy != c.want.ClosedBy ||
				(got.NextOpen == nil) != (c.want.NextOpen == nil) || got.NextOpen != nil && !got.NextOpen.Equal(*c.want.NextOpen) ||
				!strings.HasPrefix(got.Error, c.want.Error) || (c.want.Error == "") != (got.Error == "") {
				t.Errorf("got %+v (next %v), want %+v (next %v)", got, got.NextOpen, c.want, c.want.NextOpen)
			}
		})
	}
}

// The budget is counted as the operator counts it: in a cycle, NotReady or cordoned; per group when
// a group label is published; the control plane apart; percentages of each pool's own size.
func TestBudgets(t *testing.T) {
	zone := "topology.kubernetes.io/zone"
	mk := func(name, z string, ready, cordoned bool, ann map[string]string, cp bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: ann}}
		if z != "" {
			n.Labels[zone] = z
		}
		if cp {
			n.Labels[protocol.ControlPlaneLabel] = ""
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		n.Spec.Unschedulable = cordoned
		return n
	}
	nodes := []corev1.Node{
		mk("a1", "a", true, false, nil, false),
		mk("a2", "a", false, false, nil, false), // NotReady
		mk("b1", "b", true, true, nil, false),   // cordoned by someone
		mk("b2", "b", true, false, map[string]string{protocol.DrainStarted: "2026-11-23T08:00:00Z"}, false),
		mk("c1", "", true, false, map[string]string{protocol.FleetLockGroup: "fl"}, true),
		mk("c2", "", true, false, nil, true),
	}
	spec := policy.Defaults()
	spec.GroupLabel, spec.MaxUnavailable, spec.MaxUnavailablePerGroup, spec.MaxUnavailableControlPlane = zone, "50%", "1", "1"
	cm := fleetCM(t, fleetswitch.Status{}, spec)
	r := Build(nodes, cm, fleetrecord.Record{}, "ns", time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	var got []string
	for _, b := range r.Fleet.Budgets {
		l := "nil"
		if b.Limit != nil {
			l = fmt.Sprint(*b.Limit)
		}
		got = append(got, fmt.Sprintf("%s/%s %d/%s of %d", b.Pool, b.Group, b.Unavailable, l, b.Nodes))
	}
	want := []string{"fleet/ 3/3 of 6", "control-plane/ 0/1 of 2", "group/ 0/1 of 1", "group/a 1/1 of 2", "group/b 2/1 of 2", "group/fl 0/1 of 1"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("budgets\n got %v\nwant %v", got, want)
	}

	// Not published: the counts, but no limits.
	r = Build(nodes, nil, fleetrecord.Record{}, "ns", time.Now())
	if len(r.Fleet.Budgets) != 4 || r.Fleet.Budgets[0].Limit != nil || r.Fleet.Budgets[0].Unavailable != 3 {
		t.Errorf("unpublished budgets: %+v", r.Fleet.Budgets)
	}
}

func TestFit(t *testing.T) {
	long := strings.Repeat("x", 80)
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	nodes := func(name string) Report {
		return Report{Time: now, Nodes: []Node{
			{Name: name, State: protocol.NeedsReboot, Ready: true, Group: "zone-a", BlockedBy: "budget: " + long, DrainError: long},
			{Name: "n2", State: protocol.Idle, Ready: true, Stalled: "drain-failing"},
		}}
	}
	for _, c := range []struct {
		width int
		name  string
	}{
		{80, "node-1"},
		{100, "ip-10-0-3-17.eu-west-1.compute"},
		{140, "ip-10-0-3-17.eu-west-1.compute.internal"},
	} {
		var b bytes.Buffer
		if err := writeNodes(&b, nodes(c.name), TextOptions{Width: c.width}); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if n := len([]rune(line)); n > c.width {
				t.Errorf("width %d: line of %d: %q", c.width, n, line)
			}
		}
		if !strings.Contains(b.String(), "budget: xxx") {
			t.Errorf("width %d: cut too much:\n%s", c.width, b.String())
		}
	}
	var b bytes.Buffer
	_ = writeNodes(&b, nodes("node-1"), TextOptions{})
	if !strings.Contains(b.String(), "budget: "+long+"; drain-error: "+long) {
		t.Errorf("wide output cut the error:\n%s", b.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fleetCM is the slipway-fleet ConfigMap of an operator that published st and runs spec (published as
// its default policy under fleetswitch.KeyPolicies).
func fleetCM(t *testing.T, st fleetswitch.Status, spec policy.Spec) *corev1.ConfigMap {
	t.Helper()
	return &corev1.ConfigMap{Data: map[string]string{
		fleetswitch.KeyStatus:   mustJSON(t, st),
		fleetswitch.KeyPolicies: policy.Publish(policy.Named{Spec: spec}),
	}}
}

// Text the view prints from a Node is stripped of control characters: an agent (or anyone who can
// annotate a Node) cannot move the cursor, clear the screen, set the clipboard (OSC 52) or reorder
// text (bidi overrides) on the terminal of whoever runs kubectl slipway. Wide and narrow alike.
func TestTextStripsControlCharacters(t *testing.T) {
	hostile := "logind said no\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1;1H\r\nFleet: running\u009b31m\u202etxt.exe\x7f"
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		protocol.RebootNeeded: "true", protocol.RebootError: hostile, protocol.DrainError: hostile,
		protocol.BlockedBy: "budget: " + hostile, protocol.FleetLockGroup: "g\x1b[31m"}}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	r := Build([]corev1.Node{n}, nil, fleetrecord.Record{}, "ns", time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	for _, width := range []int{0, 100} {
		var b strings.Builder
		if err := WriteText(&b, r, TextOptions{Width: width}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for i, r := range out {
			if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
				t.Fatalf("width %d: control character %U at byte %d in:\n%q", width, r, i, out)
			}
		}
		if strings.Count(out, "\nFleet:") != 1 || !strings.HasPrefix(out, "Problems:  none\nFleet:") {
			t.Errorf("width %d: a Node's text started a line of its own:\n%s", width, out)
		}
		if !strings.Contains(out, "logind said no") {
			t.Errorf("width %d: the readable part of the error is gone:\n%s", width, out)
		}
	}
}

// The per-version section: nodes on each version, in their cycle for it, asking for it, its failures
// since a person resumed it, and its canary state as admission decides it.
func TestVersions(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name, version string, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{protocol.Version: version}, Annotations: ann}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	ask := func(v string) map[string]string {
		return map[string]string{protocol.NewVersion: v, protocol.RebootNeeded: protocol.True}
	}
	draining := ask("B")
	draining[protocol.DrainStarted] = "2026-11-23T08:59:00Z"
	nodes := []corev1.Node{
		mk("a1", "A", ask("B")),
		mk("a2", "A", ask("B")),
		mk("a3", "A", draining), // B's canary, in its cycle
		mk("b1", "B", map[string]string{protocol.LastRebootTime: "2026-11-23T08:58:00Z"}),
		// On B with a recent last-reboot-time of its own, but no cycle Slipway ran: no proof.
		mk("b2", "B", map[string]string{protocol.LastRebootTime: "2026-11-23T08:58:00Z"}),
		// Its failure marks are gone (a person removed them): the record still holds C's failure.
		mk("a4", "A", map[string]string{protocol.NewVersion: "C", protocol.RebootNeeded: protocol.True}),
	}
	nodes[3].UID, nodes[4].UID = "uid-b1", "uid-b2"
	var rec fleetrecord.Record
	rec.AddProof(fleetrecord.Proof{Node: "b1", UID: "uid-b1", Version: "B", At: now.Add(-2 * time.Minute)})
	rec.AddFailure(fleetrecord.Failure{Node: "gone", UID: "uid-gone", Reason: fleetrecord.ReasonOldVersion, Version: "C", At: now.Add(-time.Hour), Budget: true})
	spec := policy.Defaults()
	spec.Canary = policy.Canary{Nodes: 2, Bake: metav1.Duration{Duration: 10 * time.Minute}, MaxFailedPerVersion: 1}
	cm := fleetCM(t, fleetswitch.Status{}, spec)
	r := Build(nodes, cm, rec, "ns", now)
	var got []string
	for _, v := range r.Fleet.Versions {
		got = append(got, fmt.Sprintf("%s on=%d in=%d asking=%d failed=%d proven=%d unproven=%d %s", v.Version, v.On, v.InCycle, v.Asking, v.Failed, v.Proven, v.Unproven, v.Canary))
	}
	// A: nodes on it, none rebooted onto it by Slipway, and canaries on: A is not released by them
	// (nobody asks for it, so nothing waits).
	want := []string{"A on=3 in=0 asking=0 failed=0 proven=0 unproven=3 canaries", "B on=2 in=1 asking=2 failed=0 proven=1 unproven=1 waiting", "C on=0 in=0 asking=1 failed=1 proven=0 unproven=0 halted"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("versions\n got %v\nwant %v", got, want)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r, TextOptions{Width: DefaultWidth}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Versions:  A: 3 on, 0 in cycle, 0 asking, 0 failed\n", // nothing goes to it: no canary state, no "no proof"
		"           B: 2 on, 1 in cycle, 2 asking, 0 failed, ETA unknown; others wait for its canaries (1 on it without a Slipway cycle: no proof)\n",
		"           C: 0 on, 0 in cycle, 1 asking, 1 failed; HALTED (undo: resume --version C)\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text output without %q:\n%s", line, out.String())
		}
	}
	// A person resumed C after its failure: it counts no more; without canaries published, no state.
	rec.AddResume(fleetrecord.Resume{Version: "C", By: "alice", Why: "rollback understood", At: now.Add(-30 * time.Minute)})
	r = Build(nodes, cm, rec, "ns", now)
	if c := r.Fleet.Versions[2]; c.Failed != 0 || c.Canary != "canaries" || c.Resumed == nil || c.ResumedBy != "alice" || c.ResumeReason != "rollback understood" {
		t.Errorf("C after resume: %+v", c)
	}
	r = Build(nodes, nil, rec, "ns", now)
	if b := r.Fleet.Versions[1]; b.Canary != "" || b.Asking != 2 {
		t.Errorf("B unpublished: %+v", b)
	}
}

// Problems: known answers for each kind, most urgent first; a wait under BlockedProblemAfter, or held
// by the plan itself (budget, window), is no problem; nodes held for the same reason are one line.
func TestProblems(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name string, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	held := func(why, since string) map[string]string {
		return map[string]string{protocol.RebootNeeded: protocol.True, protocol.BlockedBy: why, protocol.WaitingSince: since}
	}
	stalled := held("", "")
	stalled[protocol.DrainStarted] = "2026-11-23T08:00:00Z"
	stalled[protocol.Stalled] = "drain-failing"
	undrainable := held("", "")
	undrainable[protocol.Undrainable] = "2026-11-23T08:30:00Z pod shop/web-0 would violate its PodDisruptionBudget"
	nodes := []corev1.Node{
		mk("budget-2h", held("budget: fleet 1/1 unavailable", "2026-11-23T07:00:00Z")), // the plan: quiet
		mk("blocker-59m", held("blocker: alerts: 1 alert firing", "2026-11-23T08:01:00Z")),
		mk("blocker-2h", held("blocker: alerts: 1 alert firing", "2026-11-23T07:00:00Z")),
		mk("blocker-3h", held("blocker: alerts: 1 alert firing", "2026-11-23T06:00:00Z")),
		mk("order-5h", held("order: workers first", "2026-11-23T04:00:00Z")),
		mk("drain", stalled),
		mk("undrainable", undrainable),
		mk("zoned", held("paused: group zone-b paused: AZ maintenance", "2026-11-23T07:30:00Z")),
	}
	spec := policy.Defaults()
	spec.Canary.MaxFailedPerVersion = 1
	cm := fleetCM(t, fleetswitch.Status{}, spec)
	got := func(r Report) string {
		var b strings.Builder
		for _, p := range r.Fleet.Problems {
			fmt.Fprintf(&b, "%s [%s] %s\n", p.Kind, p.Node, p.What)
		}
		return b.String()
	}
	r := Build(nodes, cm, fleetrecord.Record{}, "ns", now)
	want := `stalled [drain] stalled: drain-failing
undrainable [undrainable] drain failed: pod shop/web-0 would violate its PodDisruptionBudget
blocked [] 2 nodes (blocker-2h, blocker-3h) waiting 3h: blocker: alerts: 1 alert firing
blocked [zoned] waiting 90m: paused: group zone-b paused: AZ maintenance
`
	if g := got(r); g != want {
		t.Errorf("problems\n got:\n%s\nwant:\n%s", g, want)
	}
	if r.Fleet.Problems[0].Do == "" || !strings.Contains(r.Fleet.Problems[3].Do, "troubleshooting") {
		t.Errorf("every problem says what to do: %+v", r.Fleet.Problems)
	}

	// The fleet's switches come first, a dead leader before everything.
	cm.Data[fleetswitch.KeyPaused] = "change freeze"
	r = Build(nodes[:1], cm, fleetrecord.Record{}, "ns", now)
	renewed := now.Add(-time.Minute)
	r.WithLease(&Lease{Holder: "op-1", Renewed: &renewed, Duration: 15})
	want = "no-leader [] no operator is leading: the lease of op-1 expired (last renewed 2026-11-23T08:59:00Z)\npaused [] the fleet is paused: change freeze\n"
	if g := got(r); g != want {
		t.Errorf("problems\n got:\n%s\nwant:\n%s", g, want)
	}
	r = Build(nodes[:1], cm, fleetrecord.Record{}, "ns", now)
	r.WithLease(&Lease{Holder: "op-1", Renewed: &renewed, Duration: 15, Live: true})
	r.WithLease(nil) // published status, Lease not readable: no problem of its own
	if g := got(r); g != "paused [] the fleet is paused: change freeze\n" {
		t.Errorf("live lease: %s", g)
	}
	r = Build(nil, nil, fleetrecord.Record{}, "ns", now)
	r.WithLease(nil)
	if g := got(r); !strings.HasPrefix(g, "no-operator [] no operator in ns") {
		t.Errorf("nothing installed: %q", g)
	}

	// Text output: at most maxProblemLines lines, then how many more.
	var many []corev1.Node
	for i := range 20 {
		a := held("", "")
		a[protocol.DrainStarted] = "2026-11-23T08:00:00Z"
		a[protocol.Stalled] = "drain-failing"
		many = append(many, mk(fmt.Sprintf("n%02d", i), a))
	}
	var out bytes.Buffer
	if err := WriteText(&out, Build(many, nil, fleetrecord.Record{}, "ns", now), TextOptions{Width: DefaultWidth}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\n           and 12 more: -o wide lists them all\nFleet:") || strings.Contains(out.String(), "n08: stalled") {
		t.Errorf("text problems not capped:\n%s", out.String())
	}
}

// ETA: known answers. Rounds are the most any limited pool needs (its nodes left over its limit,
// rounded up), each the median measured cycle, with --settle-time between rounds; unknown without a
// measured cycle or a fleet limit.
func TestETA(t *testing.T) {
	fleet, zoneA, zoneB, cp := admission.FleetPool, admission.GroupPool("a"), admission.GroupPool("b"), admission.ControlPlanePool
	for _, c := range []struct {
		name   string
		left   map[string]int
		limits map[string]int
		cycles []int
		settle time.Duration
		want   string // "unknown" or a duration
	}{
		{"one round", map[string]int{fleet: 2}, map[string]int{fleet: 2}, []int{600}, 0, "10m0s"},
		{"rounds up", map[string]int{fleet: 5}, map[string]int{fleet: 2}, []int{600}, 0, "30m0s"},
		{"settle between rounds, not after the last", map[string]int{fleet: 5}, map[string]int{fleet: 2}, []int{600}, 5 * time.Minute, "40m0s"},
		{"median of an odd count", map[string]int{fleet: 1}, map[string]int{fleet: 1}, []int{900, 60, 600}, 0, "10m0s"},
		{"median of an even count: the middle two's mean", map[string]int{fleet: 1}, map[string]int{fleet: 1}, []int{900, 60, 600, 3000}, 0, "12m30s"},
		{"a group's limit makes more rounds", map[string]int{fleet: 4, zoneA: 3, zoneB: 1}, map[string]int{fleet: 10, zoneA: 1, zoneB: 1}, []int{60}, 0, "3m0s"},
		{"the control plane's too", map[string]int{fleet: 3, cp: 3}, map[string]int{fleet: 3, cp: 1}, []int{60}, 0, "3m0s"},
		{"an unlimited pool limits nothing", map[string]int{fleet: 4, zoneA: 4}, map[string]int{fleet: 4}, []int{60}, 0, "1m0s"},
		{"no cycle measured", map[string]int{fleet: 1}, map[string]int{fleet: 1}, nil, 0, "unknown"},
		{"no fleet limit published", map[string]int{fleet: 1}, map[string]int{}, []int{60}, 0, "unknown"},
	} {
		got := "unknown"
		if d, ok := ETA(c.left, c.limits, c.cycles, c.settle); ok {
			got = d.String()
		}
		if got != c.want {
			t.Errorf("%s: ETA %s, want %s", c.name, got, c.want)
		}
	}
}

// Per version: the nodes asking for it and in their cycle for it are what is left; the wait for a
// closed window comes first; a paused fleet, a halted version or nothing left has no ETA.
func TestVersionETA(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name, version string, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{protocol.Version: version}, Annotations: ann}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	ask := map[string]string{protocol.NewVersion: "B", protocol.RebootNeeded: protocol.True}
	cycling := map[string]string{protocol.NewVersion: "B", protocol.RebootNeeded: protocol.True, protocol.DrainStarted: "2026-11-23T08:59:00Z"}
	nodes := []corev1.Node{mk("a1", "A", ask), mk("a2", "A", ask), mk("a3", "A", cycling), mk("b1", "B", nil)}
	eta := func(st fleetswitch.Status, spec policy.Spec, data map[string]string) map[string]string {
		cm := fleetCM(t, st, spec)
		for k, v := range data {
			cm.Data[k] = v
		}
		out := map[string]string{}
		for _, v := range Build(nodes, cm, fleetrecord.Record{}, "ns", now).Fleet.Versions {
			out[v.Version] = "-"
			if v.ETASeconds != nil {
				out[v.Version] = (time.Duration(*v.ETASeconds) * time.Second).String()
			}
		}
		return out
	}
	st := fleetswitch.Status{CycleSeconds: []int{600}}
	spec := policy.Defaults()
	spec.MaxUnavailable, spec.Settle.Time = "2", metav1.Duration{Duration: time.Minute}
	spec.RebootTimeout = metav1.Duration{} // none: the Cycles line below names --settle-time alone
	// 3 left, 2 at a time: 2 rounds of 10m with 1m between.
	if got := eta(st, spec, nil); got["B"] != "21m0s" || got["A"] != "-" {
		t.Errorf("open window: %v, want B 21m0s, A none left", got)
	}
	closed := spec
	closed.Windows = []string{"Mon 10:00-11:00 UTC"}
	if got := eta(st, closed, nil); got["B"] != "1h21m0s" {
		t.Errorf("window opening in 1h: %v, want B 1h21m0s", got)
	}
	if got := eta(st, spec, map[string]string{fleetswitch.KeyPaused: "x"}); got["B"] != "-" {
		t.Errorf("paused fleet: %v, want no ETA", got)
	}
	none := st
	none.CycleSeconds = nil
	var out bytes.Buffer
	cm := fleetCM(t, none, spec)
	if err := WriteText(&out, Build(nodes, cm, fleetrecord.Record{}, "ns", now), TextOptions{Width: DefaultWidth}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"B: 1 on, 1 in cycle, 2 asking, 0 failed, ETA unknown\n", "Cycles:    none measured yet; --settle-time 1m0s\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text without %q:\n%s", want, out.String())
		}
	}
}

// The queue is admission.Queue over the Nodes: already unavailable first, then by waiting-since (a
// node without one waits from now), then by name; reboot-paused nodes, paused groups and nodes the
// published --control-plane-order keeps back have no place.
func TestQueuePositions(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	zone := "topology.kubernetes.io/zone"
	mk := func(name, z, since string, more ...string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zone: z},
			Annotations: map[string]string{protocol.RebootNeeded: protocol.True}}}
		if since != "" {
			n.Annotations[protocol.WaitingSince] = since
		}
		for i := 0; i+1 < len(more); i += 2 {
			n.Annotations[more[i]] = more[i+1]
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	cordoned := mk("cordoned", "a", "2026-11-23T08:55:00Z")
	cordoned.Spec.Unschedulable = true
	cp := mk("cp", "a", "2026-11-23T05:00:00Z")
	cp.Labels[protocol.ControlPlaneLabel] = ""
	idle := mk("idle", "a", "")
	idle.Annotations[protocol.RebootNeeded] = protocol.False
	nodes := []corev1.Node{
		mk("new", "a", ""),                        // not held yet: waits from now
		mk("a-late", "a", "2026-11-23T08:00:00Z"), // first by name, fifth by its wait
		mk("early", "a", "2026-11-23T06:00:00Z"),
		mk("early-too", "a", "2026-11-23T06:00:00Z"),
		mk("held", "a", "2026-11-23T04:00:00Z", protocol.RebootPaused, protocol.True),
		mk("zoned", "b", "2026-11-23T04:00:00Z"),
		cordoned, cp, idle,
	}
	positions := func(order string) string {
		spec := policy.Defaults()
		spec.GroupLabel, spec.ControlPlaneOrder = zone, order
		cm := fleetCM(t, fleetswitch.Status{}, spec)
		cm.Data[fleetswitch.GroupPausePrefix+"b"] = ""
		var got []string
		for _, n := range Build(nodes, cm, fleetrecord.Record{}, "ns", now).Nodes {
			if n.Queue > 0 {
				got = append(got, fmt.Sprintf("%s=%d", n.Name, n.Queue))
			}
		}
		return strings.Join(got, " ")
	}
	if got, want := positions("none"), "a-late=5 cordoned=1 cp=2 early=3 early-too=4 new=6"; got != want {
		t.Errorf("queue %q\nwant  %q", got, want)
	}
	if got, want := positions("control-plane-first"), "cp=1"; got != want {
		t.Errorf("control plane first: queue %q, want %q", got, want)
	}
}

// A stall countdown for a node in its cycle, from its stage's start and the published
// --reboot-timeout (stall.Of): none when stalled already, out of a cycle, or no timeout published.
func TestStallsAt(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name string, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	drain := func(started string, more ...string) map[string]string {
		m := map[string]string{protocol.RebootNeeded: protocol.True, protocol.DrainStarted: started}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	nodes := []corev1.Node{
		mk("draining", drain("2026-11-23T08:48:00Z")),
		mk("overdue", drain("2026-11-23T08:00:00Z")), // the operator has not marked it yet
		mk("stalled", drain("2026-11-23T08:00:00Z", protocol.Stalled, "drain-failing")),
		mk("waiting", map[string]string{protocol.RebootNeeded: protocol.True}),
	}
	report := func(timeout time.Duration) Report {
		spec := policy.Defaults()
		spec.RebootTimeout = metav1.Duration{Duration: timeout}
		return Build(nodes, fleetCM(t, fleetswitch.Status{}, spec), fleetrecord.Record{}, "ns", now)
	}
	got := map[string]string{}
	r := report(30 * time.Minute)
	for _, n := range r.Nodes {
		got[n.Name] = "-"
		if n.StallsAt != nil {
			got[n.Name] = n.StallsAt.Format("15:04")
		}
	}
	want := map[string]string{"draining": "09:18", "overdue": "08:30", "stalled": "-", "waiting": "-"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stallsAt %v, want %v", got, want)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stalls in 18m\n", "stalls now\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text without %q:\n%s", want, out.String())
		}
	}
	for _, n := range report(0).Nodes {
		if n.StallsAt != nil {
			t.Errorf("%s: stallsAt %v with no --reboot-timeout published", n.Name, n.StallsAt)
		}
	}
}

// A node no agent ever wrote on (none of the keys protocol.Owners gives Slipway's agent, FLUO's or
// the FleetLock server) is a problem once it has been Ready for NoAgentAfter, unless it is enrolled in
// FleetLock (Zincati speaks only when it asks); one line for all of them.
func TestNoAgent(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name string, readySince time.Duration, ann, labels map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann, Labels: labels}}
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
		if readySince > 0 {
			cond.LastTransitionTime = metav1.NewTime(now.Add(-readySince))
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
		return n
	}
	notReady := mk("not-ready", 0, nil, nil)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	nodes := []corev1.Node{
		mk("bare", 0, nil, map[string]string{"kubernetes.io/hostname": "bare"}), // Ready since unknown: long enough
		mk("bare-hour", time.Hour, nil, nil),
		mk("fresh", 5*time.Minute, nil, nil), // its agent may not have started yet
		notReady,
		mk("slipway-agent", 0, map[string]string{protocol.BootID: "b1"}, nil),
		mk("fluo-agent", 0, map[string]string{protocol.RebootNeeded: protocol.False}, nil),
		mk("os-label", 0, nil, map[string]string{protocol.Version: "4459.2.0"}),
		mk("zincati", 0, map[string]string{protocol.FleetLockID: "abc"}, map[string]string{protocol.FleetLockEnrolled: protocol.True}),
		mk("zincati-quiet", 0, nil, map[string]string{protocol.FleetLockEnrolled: protocol.True}), // never asked yet
		mk("enrolled-no", 0, nil, map[string]string{protocol.FleetLockEnrolled: protocol.False}),
	}
	r := Build(nodes, nil, fleetrecord.Record{}, "ns", now)
	var got []string
	for _, n := range r.Nodes {
		if n.NoAgent {
			got = append(got, n.Name)
		}
	}
	if want := "bare bare-hour enrolled-no"; strings.Join(got, " ") != want {
		t.Errorf("no agent: %q, want %q", got, want)
	}
	var probs []string
	for _, p := range r.Fleet.Problems {
		probs = append(probs, fmt.Sprintf("%s [%s] %s", p.Kind, p.Node, p.What))
	}
	if want := "no-agent [] 3 nodes (bare, bare-hour, enrolled-no) have no update-agent: they never ask to reboot"; strings.Join(probs, "\n") != want {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(probs, "\n"), want)
	}
	r = Build(nodes[:1], nil, fleetrecord.Record{}, "ns", now)
	if p := r.Fleet.Problems; len(p) != 1 || p[0].Node != "bare" || p[0].Kind != "no-agent" || p[0].Do == "" {
		t.Errorf("one node without an agent: %+v", p)
	}
}

// The view reads the policies the operator published (typed, compiled with policy.Compile), never the
// copy of its settings an older operator's Status carried; a format it does not know is an error it
// shows, not a guess.
func TestPublishedPoliciesWin(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // a Monday
	spec := policy.Defaults()
	spec.MaxUnavailable, spec.Windows, spec.Canary.Nodes = "3", []string{"Sat 00:00-06:00"}, 1
	spec.RebootTimeout = metav1.Duration{Duration: time.Hour}
	cm := &corev1.ConfigMap{Data: map[string]string{
		fleetswitch.KeyStatus:   `{"maxUnavailable":"1","rebootTimeout":"30m0s"}`,
		fleetswitch.KeyPolicies: policy.Publish(policy.Named{Spec: spec}),
	}}
	r := Build(nil, cm, fleetrecord.Record{}, "ns", now)
	if b := r.Fleet.Budgets[0]; b.Max != "3" {
		t.Errorf("fleet budget %+v: want the published policy's 3", b)
	}
	if s := r.Fleet.Schedule; !s.Known || s.Open || s.NextOpen == nil || !s.NextOpen.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("schedule %+v: want closed until Saturday", s)
	}
	if r.Fleet.RebootTimeout != "1h0m0s" {
		t.Errorf("reboot timeout %q", r.Fleet.RebootTimeout)
	}
	cm.Data[fleetswitch.KeyPolicies] = `{"apiVersion":"slipway.dev/policy/v9","policies":[]}`
	r = Build(nil, cm, fleetrecord.Record{}, "ns", now)
	if s := r.Fleet.Schedule; s.Known || !strings.Contains(s.Error, "upgrade kubectl-slipway") {
		t.Errorf("unknown format: schedule %+v", s)
	}
	if b := r.Fleet.Budgets[0]; b.Limit != nil {
		t.Errorf("unknown format: budget %+v has a limit", b)
	}
	delete(cm.Data, fleetswitch.KeyPolicies) // an operator from before: its Status's copy is not read
	if r = Build(nil, cm, fleetrecord.Record{}, "ns", now); r.Fleet.Budgets[0].Max != "" || r.Fleet.Budgets[0].Limit != nil ||
		r.Fleet.RebootTimeout != "" || r.Fleet.Schedule.Known || r.Fleet.Schedule.Error != noPolicies {
		t.Errorf("without published policies: %+v %q %+v", r.Fleet.Budgets[0], r.Fleet.RebootTimeout, r.Fleet.Schedule)
	}
}

// An operator from before the published policies (its Status still carries the copy of its settings,
// and no policies are published): its Status reads (leader, version, blockers, failed reboots, cycles),
// and the view says plainly why the settings are unknown instead of guessing them from the copy.
func TestOlderOperatorWithoutPolicies(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // a Monday
	old := `{"leader":"op-1","version":"v0.3.0","groupLabel":"topology.kubernetes.io/zone","maxUnavailable":"2",` +
		`"maxUnavailablePerGroup":"1","maxUnavailableControlPlane":"1","controlPlaneOrder":"workers-first","stallPolicy":"release",` +
		`"windows":["Sat 00:00-06:00"],"exclusions":["2026-12-24/2026-12-26"],"fluoWindow":{"start":"14:00","length":"1h","timeZone":"UTC"},` +
		`"blockers":[{"name":"alerts","reason":"1 alert firing","since":"2026-11-23T08:50:00Z"}],"failedReboots":["n1"],"maxFailedReboots":3,` +
		`"canaryNodes":1,"canaryBake":"10m0s","maxFailedPerVersion":1,"rebootTimeout":"30m0s","settleTime":"5m0s","cycleSeconds":[600,900]}`
	cm := &corev1.ConfigMap{Data: map[string]string{fleetswitch.KeyStatus: old}}
	st, ok := fleetswitch.ReadStatus(cm)
	if !ok || st.Leader != "op-1" || st.Version != "v0.3.0" || len(st.Blockers) != 1 || st.Blockers[0].Name != "alerts" ||
		fmt.Sprint(st.FailedReboots) != "[n1]" || fmt.Sprint(st.CycleSeconds) != "[600 900]" {
		t.Fatalf("an older operator's Status read as %+v (ok %v)", st, ok)
	}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	r := Build([]corev1.Node{n}, cm, fleetrecord.Record{}, "ns", now)
	if !r.Fleet.Published || r.Fleet.Leader != "op-1" || r.Fleet.OperatorVersion != "v0.3.0" || len(r.Fleet.Blockers) != 1 ||
		r.Fleet.Cycles.Measured != 2 || fmt.Sprint(r.Fleet.FailedReboots.Nodes) != "[n1]" {
		t.Errorf("what the Status says: %+v", r.Fleet)
	}
	if s := r.Fleet.Schedule; s.Known || s.Error != noPolicies || len(s.Windows) != 0 {
		t.Errorf("schedule %+v: want unknown, saying why", s)
	}
	if b := r.Fleet.Budgets[0]; b.Max != "" || b.Limit != nil || r.Fleet.GroupLabel != "" || r.Fleet.RebootTimeout != "" ||
		r.Fleet.SettleTime != "" || r.Fleet.FailedReboots.Max != 0 {
		t.Errorf("settings read from the Status's copy: budget %+v, %+v", b, r.Fleet)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r, TextOptions{Width: DefaultWidth}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Windows:   unknown (the operator published no policies: it is older than this kubectl slipway, or not running; upgrade it)\n",
		"Blockers:  alerts: 1 alert firing (for 10m)\n",
		"Operator:  leader op-1 (v0.3.0) (as last published; its Lease was not read)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text without %q:\n%s", want, out.String())
		}
	}
}

// A pool with more nodes unavailable than its limit is a problem naming the node that holds the extra
// slot: one down outside a Slipway cycle first (cordoned by someone, NotReady), else the one that
// entered its cycle last.
func TestOverBudget(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	mk := func(name string, ready, cordoned bool, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		n.Spec.Unschedulable = cordoned
		return n
	}
	draining := func(at string) map[string]string {
		return map[string]string{protocol.RebootNeeded: protocol.True, protocol.Cordoned: protocol.True, protocol.CycleStarted: at, protocol.DrainStarted: at}
	}
	cm := fleetCM(t, fleetswitch.Status{}, policy.Defaults()) // --max-unavailable 1
	over := func(nodes ...corev1.Node) []string {
		var out []string
		for _, p := range Build(nodes, cm, fleetrecord.Record{}, "ns", now).Fleet.Problems {
			if p.Kind == "over-budget" {
				out = append(out, p.Node+": "+p.What+" -> "+p.Do)
			}
		}
		return out
	}
	if got := over(mk("a", true, false, nil), mk("b", true, true, draining("2026-11-23T08:00:00Z"))); len(got) != 0 {
		t.Errorf("within its limit: %v", got)
	}
	got := over(mk("old", true, true, draining("2026-11-23T08:00:00Z")), mk("new", true, true, draining("2026-11-23T08:30:00Z")))
	if len(got) != 1 || got[0] != "new: over budget fleet (2 unavailable, limit 1): it holds the extra slot, the last in its cycle -> it finishes its cycle; nothing new starts meanwhile" {
		t.Errorf("two in their cycle: %q", got)
	}
	got = over(mk("cycling", true, true, draining("2026-11-23T08:30:00Z")), mk("broken", false, false, nil))
	if len(got) != 1 || !strings.HasPrefix(got[0], "broken: over budget fleet (2 unavailable, limit 1): it holds the extra slot, NotReady outside a cycle -> repair it") {
		t.Errorf("one NotReady outside a cycle: %q", got)
	}
}

// Agents of another release than the leading operator's are one problem naming them; development
// builds and simulators (no release version) are not compared.
func TestAgentSkew(t *testing.T) {
	r := Report{Fleet: Fleet{OperatorVersion: "v0.4.0"}, Nodes: []Node{
		{Name: "a", AgentVersion: "v0.4.0"}, {Name: "b", AgentVersion: "v0.3.0"}, {Name: "c", AgentVersion: "v0.3.0"},
		{Name: "d", AgentVersion: "simnode"}, {Name: "e"},
	}}
	p, ok := agentSkew(r)
	if !ok || p.What != "2 node(s) run an update-agent other than the operator's v0.4.0: v0.3.0 on b, c" {
		t.Errorf("skew: %v %q", ok, p.What)
	}
	r.Fleet.OperatorVersion = "v0.0.0-dev"
	if _, ok := agentSkew(r); !ok {
		t.Error("a pre-release operator is a release version too: v0.4.0 agents are another")
	}
	r.Fleet.OperatorVersion = "dev"
	if _, ok := agentSkew(r); ok {
		t.Error("an operator of no release compared")
	}
}

// The CHANNEL column appears once a pool declares a channel: each node's, "old→new" while its agent
// has not written the pool's yet; the agent's refusal and a server still to change are in DETAIL.
func TestChannelColumn(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	node := func(name, group string, ann map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{protocol.Group: group}, Annotations: ann}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	text := func(nodes []corev1.Node) string {
		var out bytes.Buffer
		if err := WriteText(&out, Build(nodes, nil, fleetrecord.Record{}, "ns", now), TextOptions{All: true}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := text([]corev1.Node{node("a", "stable", nil)}); strings.Contains(out, "CHANNEL") {
		t.Errorf("CHANNEL column without a pool declaring one:\n%s", out)
	}
	out := text([]corev1.Node{
		node("a", "beta", map[string]string{protocol.PoolGroup: "beta"}),
		node("b", "stable", map[string]string{protocol.PoolGroup: "beta"}),
		node("c", "stable", map[string]string{protocol.PoolGroup: "beta", protocol.UpdateConfError: "not Slipway's\x1b[2J to edit"}),
		node("d", "beta", map[string]string{protocol.PoolGroup: "beta", protocol.PoolServer: "https://n.example/", protocol.Server: "https://public/"}),
	})
	for _, want := range []string{"CHANNEL", "\na  ", " beta ", "\nb  ", " stable→beta ", "update.conf: not Slipway's?[2J to edit", "server https://public/→https://n.example/"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
