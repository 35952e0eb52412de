package admission

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
)

// No sequence of node changes, pauses, blockers and admissions (each written or failed after any
// delay) admits a node into a pool beyond its limit: every admission of a node that was not yet
// unavailable finds room in each of its pools, reservations included.
func TestChainNeverAdmitsBeyondABudget(t *testing.T) {
	g := max(t, "1")
	for _, order := range []Order{OrderNone, OrderWorkersFirst, OrderControlPlaneFirst} {
		rng := rand.New(rand.NewSource(int64(len(order))))
		l := Limits{Fleet: max(t, "3"), PerGroup: &g, ControlPlane: max(t, "1")}
		x := NewIndex()
		held := map[string]bool{} // a per-node blocker holds these
		a := NewAdmitter(Config{Limits: l, Order: order, Blockers: []Blocker{Func{N: "pods-on-node", F: func(_ context.Context, n *corev1.Node) (bool, string) {
			return held[n.Name], "held"
		}}}}, x)
		// RebootPolicies: gpu one at a time, web two, db unlimited (the fleet's and groups' only); one
		// of them sometimes paused.
		policyLimits := map[string]budget.Max{"gpu": max(t, "1"), "web": max(t, "2")}
		l.Policies = policyLimits
		pausedPolicy := ""
		// The policies' own blockers: db's per node (its blocking pod selectors), web's fleet-wide (its
		// health check).
		dbHeld, webBlocked := map[string]bool{}, false
		setPolicies := func() {
			byName := map[string]*Rules{}
			for _, name := range []string{"gpu", "web", "db"} {
				p := &Rules{Name: name}
				if name == pausedPolicy {
					p.Paused = "policy " + name + " paused"
				}
				switch name {
				case "db":
					p.Blockers = []Blocker{Func{N: "pods-on-node", F: func(_ context.Context, n *corev1.Node) (bool, string) { return dbHeld[n.Name], "db-0 running" }}}
				case "web":
					p.Blockers = []Blocker{Func{N: "health", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return webBlocked, "web unhealthy" }}}
				}
				byName[name] = p
			}
			a.SetPolicies(byName, policyLimits)
		}
		setPolicies()
		truth := map[string]Node{}
		pending := map[string]func() bool{} // admitted, write not yet landed
		// admittedIn: the group each node was admitted in, as the test saw it, while its cycle lasts.
		// The group budget is judged by it (independently of PoolKeys): a node that hops to another
		// group mid-cycle still occupies the one it started in.
		admittedIn := map[string]string{}
		decidedUnder := map[string]string{} // the policy each pending admission was decided under
		hops := 0
		sw := fleetswitch.Switch{}
		now := t0
		admitted := 0
		set := func(name string, e Node, present bool) {
			if present {
				truth[name] = e
			} else {
				delete(truth, name)
			}
			if !present || !e.State.InCycle() {
				delete(admittedIn, name)
			}
			x.Update(name, now, func() (Node, bool) { return e, present })
		}
		for step := 0; step < 20000; step++ {
			now = now.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
			name := fmt.Sprintf("n%d", rng.Intn(12))
			switch r := rng.Intn(10); {
			case r < 4: // the world changes the node
				// Mostly what fleets do: idle nodes start asking, nodes in a cycle finish; sometimes
				// anything (a node NotReady or cordoned while it asks, a relabel, a pause).
				e := Node{Group: []string{"", "a", "b"}[rng.Intn(3)], ControlPlane: rng.Intn(5) == 0, Paused: rng.Intn(10) == 0,
					Policy: []string{"", "gpu", "web", "db"}[rng.Intn(4)]}
				if rng.Intn(15) == 0 {
					e.Policy, e.PolicyTied = "", "gpu, web"
				}
				switch r := rng.Intn(20); {
				case r < 9:
					e.State = protocol.Idle
				case r < 18:
					e.State = protocol.NeedsReboot
				default:
					e.State = states[2+rng.Intn(len(states)-2)]
				}
				e.Counts = e.State.InCycle() || rng.Intn(10) == 0
				if p, ok := truth[name]; ok && p.State.InCycle() && e.State.InCycle() {
					// Pinned at admission (admission.Of reads the operator's keys): the same policy, and
					// the group it was admitted in, until its cycle ends.
					e.Policy = p.Policy
					if g, ok := admittedIn[name]; ok && g != e.Group {
						e.AdmittedGroup, e.HasAdmittedGroup = g, true
					}
				}
				set(name, e, rng.Intn(10) != 0)
				if pending[name] != nil {
					// The Node changed under an admission being written: its PATCH, conditional on
					// the Node admission saw, fails. Until its hold ends it counts where it is now.
					delete(admittedIn, name)
				}
			case r < 5:
				held[name] = rng.Intn(4) == 0
				// A node admitted by the chain and in its cycle is relabelled or asks in another group
				// (FleetLock): its entry carries the pin the operator wrote, as Of reads it.
				if g, ok := admittedIn[name]; ok && pending[name] == nil {
					e := truth[name]
					e.Group = []string{"", "a", "b"}[rng.Intn(3)]
					e.AdmittedGroup, e.HasAdmittedGroup = g, g != e.Group
					set(name, e, true)
					hops++
				}
			case r < 6:
				sw = fleetswitch.Switch{}
				if rng.Intn(3) == 0 {
					sw.Groups = map[string]string{"a": "x"}
				}
				pausedPolicy = []string{"", "", "gpu", "web"}[rng.Intn(4)]
				webBlocked = rng.Intn(3) == 0
				for _, n := range []string{"n0", "n1", "n2", "n3"} {
					dbHeld[n] = rng.Intn(2) == 0
				}
				setPolicies()
			case r < 8: // a pending admission's write lands (or fails) and its hold ends
				for n, release := range pending {
					// The write is conditional on the Node as admission saw it: a node relabelled
					// meanwhile is not admitted (the PATCH conflicts).
					if e, ok := truth[n]; ok && rng.Intn(2) == 0 && e.Group == admittedIn[n] && hasAdmitted(admittedIn, n) {
						e.State, e.Counts = protocol.BeforeHooks, true
						set(n, e, true)
					} else {
						delete(admittedIn, n)
					}
					release()
					delete(pending, n)
					break
				}
			default: // a waiting node asks
				e, ok := truth[name]
				if !ok || !e.Waiting() || e.Paused || pending[name] != nil {
					continue
				}
				// The referee counts from the test's own truth, not the index: pending admissions
				// are in their cycle.
				var all []Node
				for n, e := range truth {
					if pending[n] != nil {
						e.State, e.Counts = protocol.BeforeHooks, true
					}
					all = append(all, e)
				}
				before := Pools(all, l)
				d := a.Decide(context.Background(), name, obj(name), sw, now, func(n string) (*corev1.Node, bool) { return obj(n), true })
				if !d.Admitted() {
					continue
				}
				if held[name] {
					t.Fatalf("%s step %d: %s admitted while a blocker holds it", order, step, name)
				}
				if h, _ := sw.Holds(e.Group); h {
					t.Fatalf("%s step %d: %s admitted while its group is paused", order, step, name)
				}
				if e.PolicyTied != "" || e.Policy != "" && e.Policy == pausedPolicy {
					t.Fatalf("%s step %d: %s admitted under policy %q (tied %q, paused %q)", order, step, name, e.Policy, e.PolicyTied, pausedPolicy)
				}
				if e.Policy == "db" && dbHeld[name] || e.Policy == "web" && webBlocked {
					t.Fatalf("%s step %d: %s of policy %q admitted while its policy's blocker holds it", order, step, name, e.Policy)
				}
				if d.Policy == nil || d.Policy.Name != e.Policy {
					t.Fatalf("%s step %d: %s of policy %q admitted under %+v", order, step, name, e.Policy, d.Policy)
				}
				inGroup := 0 // in the admitted node's group: by label now, or by where it was admitted
				for n, o := range truth {
					counts := o.Counts || pending[n] != nil
					if g, ok := admittedIn[n]; n != name && counts && (o.Group == e.Group || ok && g == e.Group) {
						inGroup++
					}
				}
				if inGroup+1 > l.PerGroup.Limit(0) {
					t.Fatalf("%s step %d: %s admitted into group %q while %d node(s) occupy it (admitted there or labelled so)", order, step, name, e.Group, inGroup)
				}
				if m, ok := policyLimits[e.Policy]; ok && !e.Counts {
					inPolicy := 0 // judged from the test's truth, not PoolKeys: pinned policies stay
					for n, o := range truth {
						pol := o.Policy
						if pending[n] != nil {
							pol = decidedUnder[n] // its admission, being written, pins that one
						}
						if n != name && pol == e.Policy && (o.Counts || pending[n] != nil) {
							inPolicy++
						}
					}
					if inPolicy+1 > m.Limit(0) {
						t.Fatalf("%s step %d: %s admitted into policy %q while %d node(s) of it are unavailable", order, step, name, e.Policy, inPolicy)
					}
				}
				if !e.Counts {
					in := map[string]bool{}
					for _, k := range e.PoolKeys() {
						in[k] = true
					}
					for _, p := range before {
						if in[p.Key] && p.Limited && p.Used+1 > p.Limit {
							t.Fatalf("%s step %d: %s admitted into full pool %+v", order, step, name, p)
						}
					}
				}
				pending[name] = d.Release
				admittedIn[name] = e.Group
				decidedUnder[name] = e.Policy
				admitted++
			}
		}
		t.Logf("%s: %d admissions, %d group hops mid-cycle", order, admitted, hops)
		if admitted < 50 {
			t.Errorf("%s: only %d admissions in 20,000 steps: the property was hardly tried", order, admitted)
		}
	}
}

func hasAdmitted(m map[string]string, n string) bool { _, ok := m[n]; return ok }

// A blocker that panics holds the node with the panic as its reason; one that hangs holds it after
// the bound and is not started again while it hangs; the Admitter goes on deciding.
func TestBlockersThatPanicOrHangBlock(t *testing.T) {
	var started atomic.Int32
	hang := make(chan struct{})
	defer close(hang)
	panicky := Func{N: "pods-on-node", F: func(_ context.Context, n *corev1.Node) (bool, string) {
		if n.Name == "boom" {
			panic("index out of range")
		}
		return false, ""
	}}
	hanging := Func{N: "prometheus-alerts", Fleet: true, F: func(ctx context.Context, n *corev1.Node) (bool, string) {
		if n.Name == "stuck" {
			started.Add(1)
			<-hang // ignores ctx on purpose
		}
		return false, ""
	}}
	x := NewIndex()
	for _, n := range []string{"boom", "fine", "stuck"} {
		x.Update(n, t0, func() (Node, bool) { return waiting, true })
	}
	a := NewAdmitter(Config{Limits: Limits{Fleet: max(t, "3"), ControlPlane: max(t, "1")}, Blockers: []Blocker{panicky, hanging},
		CheckTimeout: 50 * time.Millisecond}, x)
	lookup := func(n string) (*corev1.Node, bool) { return obj(n), true }
	d := a.Decide(context.Background(), "boom", obj("boom"), fleetswitch.Switch{}, t0, lookup)
	if d.Admitted() || d.Kind != KindPodsOnNode || !strings.Contains(d.Reason, "panic: index out of range") {
		t.Fatalf("panicking blocker: %q, want held with the panic", d)
	}
	if d := a.Decide(context.Background(), "fine", obj("fine"), fleetswitch.Switch{}, t0, lookup); !d.Admitted() {
		t.Fatalf("after a panic the next node is decided as usual: %q", d)
	} else {
		d.Release()
	}
	goroutines := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		d := a.Decide(context.Background(), "stuck", obj("stuck"), fleetswitch.Switch{}, t0, lookup)
		if d.Admitted() || d.Kind != KindAlerts || !strings.Contains(d.Reason, "check failed") {
			t.Fatalf("hanging blocker, decision %d: %q, want held", i, d)
		}
	}
	if n := started.Load(); n != 1 {
		t.Errorf("the hanging check was started %d times, want once", n)
	}
	if g := runtime.NumGoroutine(); g > goroutines+3 {
		t.Errorf("goroutines %d -> %d: a hanging blocker must cost one, not one per decision", goroutines, g)
	}
}

// CheckAll keeps the blockers' order and fails closed on a panic.
func TestCheckAll(t *testing.T) {
	open := Func{N: "open", F: func(context.Context, *corev1.Node) (bool, string) { return false, "" }}
	shut := Func{N: "shut", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return true, "closed for lunch" }}
	boom := Func{N: "boom", F: func(_ context.Context, n *corev1.Node) (bool, string) { return n.Labels["x"] == "", "unreached" }}
	got := CheckAll(context.Background(), []Blocker{boom, open, shut}, nil)
	if len(got) != 2 || got[0].Name != "boom" || got[1] != (Result{"shut", "closed for lunch"}) {
		t.Fatalf("CheckAll = %+v", got)
	}
	if !strings.HasPrefix(got[0].Reason, "check failed: panic: ") || !strings.Contains(got[0].Reason, "nil pointer") {
		t.Errorf("panic reason = %q", got[0].Reason)
	}
	if s := got[1].String(); s != "shut: closed for lunch" {
		t.Errorf("String() = %q", s)
	}
	if got := CheckAll(context.Background(), []Blocker{open}, obj("a")); got != nil {
		t.Errorf("nothing blocks, got %+v", got)
	}
}

// An admitted node is reserved in every pool until its release: the next decision counts it.
func TestDecideReserves(t *testing.T) {
	x := NewIndex()
	for _, n := range []string{"a", "b"} {
		x.Update(n, t0, func() (Node, bool) { return waiting, true })
	}
	a := NewAdmitter(Config{Limits: Limits{Fleet: max(t, "1"), ControlPlane: max(t, "1")}}, x)
	lookup := func(n string) (*corev1.Node, bool) { return obj(n), true }
	d := a.Decide(context.Background(), "a", obj("a"), fleetswitch.Switch{}, t0, lookup)
	if !d.Admitted() {
		t.Fatalf("a: %q", d)
	}
	if d2 := a.Decide(context.Background(), "b", obj("b"), fleetswitch.Switch{}, t0, lookup); d2.String() != "budget: full (max-unavailable)" {
		t.Fatalf("b while a's admission is being written: %q", d2)
	}
	if !d.Release() {
		t.Fatal("release of a reservation must say it freed a slot")
	}
	// a's write failed and a stopped asking meanwhile: its slot goes to b.
	x.Update("a", t0, func() (Node, bool) { return idle, true })
	if d2 := a.Decide(context.Background(), "b", obj("b"), fleetswitch.Switch{}, t0, lookup); !d2.Admitted() {
		t.Fatalf("b after a's admission failed: %q", d2)
	}
	if d := a.Decide(context.Background(), "gone", obj("gone"), fleetswitch.Switch{}, t0, lookup); d.Kind != KindGone {
		t.Errorf("a node not waiting: %q", d)
	}
}
