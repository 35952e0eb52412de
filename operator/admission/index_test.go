package admission

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
)

var states = []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining, protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks}

func randomNode(rng *rand.Rand) Node {
	e := Node{Group: []string{"", "a", "b"}[rng.Intn(3)], ControlPlane: rng.Intn(4) == 0, Counts: rng.Intn(2) == 0,
		State: states[rng.Intn(len(states))], Paused: rng.Intn(5) == 0}
	if g := []string{"", "a", "b", "c"}[rng.Intn(4)]; e.State.InCycle() && g != e.Group && rng.Intn(3) == 0 {
		e.AdmittedGroup, e.HasAdmittedGroup = g, true // relabelled mid-cycle
	}
	if rng.Intn(4) == 0 {
		e.Settling = []string{"finished", "PDBs short"}[rng.Intn(2)]
	}
	return e
}

// The incremental counts equal Pools over every entry (the one definition) after every change, in any
// order of adds, changes, deletes and reservations: admission trusts them for the budget, the status
// view computes Pools from the Nodes.
func TestIndexMatchesPools(t *testing.T) {
	g := max(t, "1")
	l := Limits{Fleet: max(t, "30%"), PerGroup: &g, ControlPlane: max(t, "1")}
	rng := rand.New(rand.NewSource(1))
	x := NewIndex()
	truth := map[string]Node{}
	holds := map[string][]func() bool{}
	for step := 0; step < 20000; step++ {
		name := fmt.Sprintf("n%d", rng.Intn(40))
		gen := x.Gen()
		if rng.Intn(5) == 0 {
			// An admission (or a slot-freeing step) being written: reserved, then released; holds nest.
			if hs := holds[name]; len(hs) > 0 && rng.Intn(2) == 0 {
				last := len(hs) == 1
				if changed := hs[0](); changed != last {
					t.Fatalf("step %d: releasing a hold of %s changed=%v, want %v (last hold)", step, name, changed, last)
				}
				holds[name] = hs[1:]
			} else {
				holds[name] = append(holds[name], x.Reserve(name))
				if len(holds[name]) == 1 && x.Gen() == gen {
					t.Fatalf("step %d: a reservation did not move gen", step)
				}
			}
		} else {
			present := rng.Intn(6) != 0
			e := randomNode(rng)
			if !present {
				e = Node{}
			}
			old, had := truth[name]
			changed := x.Update(name, t0, func() (Node, bool) { return e, present })
			if want := had != present || present && old != e; changed != want {
				t.Fatalf("step %d: Update(%s) changed=%v, want %v", step, name, changed, want)
			}
			if changed != (x.Gen() != gen) {
				t.Fatalf("step %d: gen moved %v on change %v", step, x.Gen() != gen, changed)
			}
			if present {
				truth[name] = e
			} else {
				delete(truth, name)
			}
		}
		if step%97 != 0 && step < 19900 {
			continue
		}
		var all []Node
		var waiting []string
		for n, e := range truth {
			if len(holds[n]) > 0 { // held: in its cycle, counting
				e.Counts, e.State = true, protocol.BeforeHooks
			}
			all = append(all, e)
			if e.Waiting() {
				waiting = append(waiting, n)
			}
		}
		s := x.Snapshot()
		if got, want := s.Pools(l), Pools(all, l); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: index pools\n %+v\nrecount\n %+v", step, got, want)
		}
		if got, want := Pools(x.Entries(), l), Pools(all, l); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: entries differ", step)
		}
		var settling, gotSettling []string
		for n, e := range truth {
			if e.Settling != "" {
				settling = append(settling, n)
			}
		}
		for n := range s.Settling {
			gotSettling = append(gotSettling, n)
		}
		sort.Strings(settling)
		sort.Strings(gotSettling)
		if fmt.Sprint(settling) != fmt.Sprint(gotSettling) {
			t.Fatalf("step %d: settling %v, want %v", step, gotSettling, settling)
		}
		var got []string
		for n := range s.Waiting {
			got = append(got, n)
		}
		sort.Strings(got)
		sort.Strings(waiting)
		if fmt.Sprint(got) != fmt.Sprint(waiting) {
			t.Fatalf("step %d: waiting %v, want %v", step, got, waiting)
		}
		busy := [2]bool{}
		for _, e := range all {
			if e.Busy() {
				busy[b2i(e.ControlPlane)] = true
			}
		}
		if s.BusyWorkers != busy[0] || s.BusyCP != busy[1] {
			t.Fatalf("step %d: busy %v,%v want %v", step, s.BusyWorkers, s.BusyCP, busy)
		}
		// Zero counts leave no key behind.
		for k, v := range s.Used {
			if v == 0 {
				t.Fatalf("step %d: used[%q] = 0 kept", step, k)
			}
		}
	}
}

// A node hopping through many groups leaves one pool key, not one per group ever seen.
func TestIndexForgetsEmptyGroups(t *testing.T) {
	x := NewIndex()
	for i := 0; i < 200; i++ {
		e := Node{Group: fmt.Sprintf("g%d", i), State: protocol.Draining, Counts: true}
		x.Update("hopper", t0, func() (Node, bool) { return e, true })
	}
	s := x.Snapshot()
	var keys []string
	for k := range s.Size {
		keys = append(keys, k)
	}
	for k := range s.Used {
		keys = append(keys, "used:"+k)
	}
	sort.Strings(keys)
	if want := []string{"", "group/g199", "used:", "used:group/g199"}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("keys %q, want %q", keys, want)
	}
}

// A node's wait starts when it is first seen asking, survives its cycle until EndWait, and starts
// anew when it stops asking without a cycle.
func TestIndexWaitSince(t *testing.T) {
	x := NewIndex()
	set := func(at time.Time, s protocol.State) {
		x.Update("a", at, func() (Node, bool) { return Node{State: s}, true })
	}
	set(t0, protocol.NeedsReboot)
	set(t0.Add(time.Minute), protocol.NeedsReboot)
	if s := x.Snapshot(); !s.Since["a"].Equal(t0) {
		t.Fatalf("since %v, want the first ask %v", s.Since["a"], t0)
	}
	set(t0.Add(2*time.Minute), protocol.Draining)
	if at, ok := x.EndWait("a"); !ok || !at.Equal(t0) {
		t.Fatalf("EndWait = %v %v, want %v: the wait survives into the cycle", at, ok, t0)
	}
	set(t0.Add(3*time.Minute), protocol.NeedsReboot)
	set(t0.Add(4*time.Minute), protocol.Idle)
	set(t0.Add(5*time.Minute), protocol.NeedsReboot)
	if s := x.Snapshot(); !s.Since["a"].Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("since %v: a node that stopped asking waits from its new ask", s.Since["a"])
	}

	// A new leader's index: a node an earlier leader held (waiting-since) keeps its wait, so it stays
	// ahead of one that asked after it but was seen first; a waiting-since in the future is not believed.
	x = NewIndex()
	x.Update("late", t0, func() (Node, bool) { return Node{State: protocol.NeedsReboot, WaitingSince: t0.Add(-time.Hour)}, true })
	x.Update("early", t0.Add(time.Second), func() (Node, bool) {
		return Node{State: protocol.NeedsReboot, WaitingSince: t0.Add(-2 * time.Hour)}, true
	})
	x.Update("future", t0, func() (Node, bool) { return Node{State: protocol.NeedsReboot, WaitingSince: t0.Add(time.Hour)}, true })
	s := x.Snapshot()
	if !s.Since["early"].Equal(t0.Add(-2*time.Hour)) || !s.Since["late"].Equal(t0.Add(-time.Hour)) || !s.Since["future"].Equal(t0) {
		t.Errorf("since %v", s.Since)
	}
	if q := Queue(&s, OrderNone, fleetswitch.Switch{}, t0.Add(time.Minute)); strings.Join(q, " ") != "early late future" {
		t.Errorf("queue %v, want early late future", q)
	}
}

// Policy answers as admission counts: the entry's policy, none for a tie, the reservation's while an
// admission under another policy is being written, and whether the node is indexed at all.
func TestIndexPolicy(t *testing.T) {
	x := NewIndex()
	x.Update("gpu-1", t0, func() (Node, bool) { return Node{Policy: "gpu", State: protocol.Idle}, true })
	x.Update("both", t0, func() (Node, bool) { return Node{Policy: "", PolicyTied: "gpu, db", State: protocol.Idle}, true })
	x.Update("plain", t0, func() (Node, bool) { return Node{State: protocol.Idle}, true })
	for name, want := range map[string][2]any{"gpu-1": {"gpu", true}, "both": {"", true}, "plain": {"", true}, "nosuch": {"", false}} {
		if p, ok := x.Policy(name); p != want[0] || ok != want[1] {
			t.Errorf("Policy(%s) = %q, %v; want %q, %v", name, p, ok, want[0], want[1])
		}
	}
	release := x.ReserveAs("plain", "db")
	if p, _ := x.Policy("plain"); p != "db" {
		t.Errorf("reserved as db: Policy = %q", p)
	}
	release()
	if p, _ := x.Policy("plain"); p != "" {
		t.Errorf("released: Policy = %q", p)
	}
	x.Update("gpu-1", t0, func() (Node, bool) { return Node{}, false })
	if _, ok := x.Policy("gpu-1"); ok {
		t.Error("a removed node is still indexed")
	}
}
