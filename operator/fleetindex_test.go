package operator

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
)

// The incremental counts equal a recount from scratch after every change, in any order of adds,
// changes and deletes (the admission plan trusts them for the budget).
func TestFleetIndexMatchesRecount(t *testing.T) {
	states := []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining, protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks}
	rng := rand.New(rand.NewSource(1))
	x := newFleetIndex()
	truth := map[string]entry{}
	reserved := map[string]bool{}
	for step := 0; step < 20000; step++ {
		name := fmt.Sprintf("n%d", rng.Intn(40))
		if rng.Intn(5) == 0 {
			// An admission being written: reserved, then released.
			on := !reserved[name]
			gen := x.gen
			if on {
				x.reserve(name)
			} else if !x.unreserve(name) {
				t.Fatalf("step %d: unreserve(%s) changed nothing", step, name)
			}
			if x.gen == gen {
				t.Fatalf("step %d: a reservation did not move gen", step)
			}
			reserved[name] = on
			if !on {
				delete(reserved, name)
			}
			compare(t, step, x.snapshot(), truth, reserved)
			continue
		}
		present := rng.Intn(6) != 0
		e := entry{group: []string{"", "a", "b"}[rng.Intn(3)], cp: rng.Intn(4) == 0, counts: rng.Intn(2) == 0,
			state: states[rng.Intn(len(states))], paused: rng.Intn(5) == 0}
		if !present {
			e = entry{}
		}
		_, had := truth[name]
		gen := x.gen
		changed := x.set(name, e, present)
		if want := had != present || present && truth[name] != e; changed != want {
			t.Fatalf("step %d: set(%s) changed=%v, want %v", step, name, changed, want)
		}
		if changed != (x.gen != gen) {
			t.Fatalf("step %d: gen moved %v on change %v", step, x.gen != gen, changed)
		}
		if present {
			truth[name] = e
		} else {
			delete(truth, name)
		}
		if step%97 == 0 || step > 19900 {
			compare(t, step, x.snapshot(), truth, reserved)
		}
	}
}

func compare(t *testing.T, step int, s snapshot, truth map[string]entry, reserved map[string]bool) {
	t.Helper()
	size, used := map[string]int{}, map[string]int{}
	cp := 0
	busy := [2]bool{}
	var waiting []string
	for n, e := range truth {
		if reserved[n] { // being admitted: in its cycle, counting
			e.counts, e.state = true, protocol.BeforeHooks
		}
		size[e.group]++
		if e.cp {
			cp++
		}
		if e.counts {
			used[budget.Global]++
			used["group/"+e.group]++
			if e.cp {
				used[controlPlanePool]++
			}
		}
		if e.state == protocol.NeedsReboot && !e.paused || e.state.InCycle() {
			busy[b2i(e.cp)] = true
		}
		if e.state == protocol.NeedsReboot {
			waiting = append(waiting, n)
		}
	}
	var got []string
	for n := range s.waiting {
		got = append(got, n)
	}
	sort.Strings(got)
	sort.Strings(waiting)
	if s.total != len(truth) || s.cpSize != cp || s.busyWorkers != busy[0] || s.busyCP != busy[1] || fmt.Sprint(got) != fmt.Sprint(waiting) {
		t.Fatalf("step %d: total %d/%d cp %d/%d busy %v,%v/%v waiting %v/%v", step, s.total, len(truth), s.cpSize, cp, s.busyWorkers, s.busyCP, busy, got, waiting)
	}
	for k, v := range size {
		if s.size[k] != v {
			t.Fatalf("step %d: size[%q] %d, want %d", step, k, s.size[k], v)
		}
	}
	for k, v := range used {
		if s.used[k] != v {
			t.Fatalf("step %d: used[%q] %d, want %d", step, k, s.used[k], v)
		}
	}
	for k, v := range s.used {
		if v != used[k] {
			t.Fatalf("step %d: used[%q] %d, want %d", step, k, v, used[k])
		}
	}
}
