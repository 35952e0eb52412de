package admission

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/window"
)

// diffMemory is a fleet memory for the differential test: failures and proofs by version.
type diffMemory struct {
	fleetswitch.Switch
	failures map[string][]time.Time
	proofs   map[string][]time.Time
}

func (m diffMemory) VersionResumedAt(string) time.Time                       { return time.Time{} }
func (m diffMemory) VersionFailures(v string) []time.Time                    { return m.failures[v] }
func (m diffMemory) VersionStalls(string) []time.Time                        { return nil }
func (m diffMemory) VersionProofs(v string, _ func(string) bool) []time.Time { return m.proofs[v] }

// The chain and plan built from the policy as one value answer every decision as the frozen copy of
// the closures they replaced (legacy_test.go) does: the same verdict, reason and retry, the same active
// fleet-wide blockers, for random fleets under every control-plane order, with and without a window,
// canaries and halts, fleet-wide and per-node blockers, group pauses and reservations.
func TestChainMatchesLegacy(t *testing.T) {
	thu, err := window.Parse("Thu 14:00", "1h", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	sched := window.NewSchedule(thu, nil, nil)
	g := max(t, "1")
	decisions, admitted, held := 0, 0, map[Kind]int{}
	for variant := 0; variant < 12; variant++ {
		rng := rand.New(rand.NewSource(int64(variant)))
		order := []Order{OrderNone, OrderWorkersFirst, OrderControlPlaneFirst}[variant%3]
		var schedule Schedule
		if variant%2 == 1 {
			schedule = sched
		}
		var canary Canary
		if variant >= 6 {
			canary = Canary{Nodes: 1, Bake: time.Minute, MaxFailed: 2}
		}
		l := Limits{Fleet: max(t, "3"), PerGroup: &g, ControlPlane: max(t, "1")}
		perNode := map[string]bool{}
		fleetHeld := false
		blockers := []Blocker{
			Func{N: "pods-on-node", F: func(_ context.Context, n *corev1.Node) (bool, string) { return perNode[n.Name], "db-0 running" }},
			Func{N: "prometheus-alerts", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return fleetHeld, "NodeDown firing" }},
		}
		newX, oldX := NewIndex(), NewIndex()
		cfg := Config{Limits: l, Order: order, Blockers: blockers, Policy: &Rules{Schedule: schedule, Canary: canary, UndrainableRetry: time.Hour}}
		a := NewAdmitter(cfg, newX)
		old := legacyNewAdmitter(legacyConfig{Limits: l, Order: order, Schedule: schedule, Blockers: blockers, Canary: canary, UndrainableRetry: time.Hour}, oldX)
		mem := diffMemory{failures: map[string][]time.Time{}, proofs: map[string][]time.Time{}}
		pending := map[string][2]func() bool{}
		now := t0
		for step := 0; step < 4000; step++ {
			now = now.Add(time.Duration(rng.Intn(120)) * time.Second)
			name := fmt.Sprintf("n%d", rng.Intn(10))
			switch r := rng.Intn(12); {
			case r < 5:
				e := Node{Group: []string{"", "a", "b"}[rng.Intn(3)], ControlPlane: rng.Intn(5) == 0, Paused: rng.Intn(10) == 0,
					AskedVersion: []string{"", "v1", "v2"}[rng.Intn(3)], Version: "v0"}
				switch r := rng.Intn(20); {
				case r < 8:
					e.State = protocol.Idle
				case r < 17:
					e.State = protocol.NeedsReboot
				default:
					e.State = protocol.Draining
				}
				e.Counts = e.State.InCycle() || rng.Intn(10) == 0
				if rng.Intn(8) == 0 {
					e.Settling = "--settle-time 5m"
				}
				if rng.Intn(10) == 0 {
					e.FailedVersion = e.AskedVersion
				}
				if rng.Intn(10) == 0 {
					e.UndrainableAt = now.Add(-time.Duration(rng.Intn(120)) * time.Minute)
				}
				if rng.Intn(15) == 0 {
					e.AgentProtocol = "v99"
				}
				if e.State == protocol.Idle && rng.Intn(3) == 0 {
					e.Version, e.FinishedAt = []string{"v1", "v2"}[rng.Intn(2)], now
				}
				present := rng.Intn(12) != 0
				newX.Update(name, now, func() (Node, bool) { return e, present })
				oldX.Update(name, now, func() (Node, bool) { return e, present })
			case r < 6:
				perNode[name] = rng.Intn(3) == 0
				fleetHeld = rng.Intn(6) == 0
				now = now.Add(planTTL) // blockers change without the index noticing: both look again after planTTL
			case r < 7:
				mem.Switch = fleetswitch.Switch{}
				if rng.Intn(3) == 0 {
					mem.Groups = map[string]string{"a": "maintenance"}
				}
				if rng.Intn(8) == 0 {
					v := []string{"v1", "v2"}[rng.Intn(2)]
					mem.failures[v] = append(mem.failures[v], now)
				}
				if rng.Intn(6) == 0 {
					clear(mem.failures) // a person resumed
				}
				if rng.Intn(4) == 0 {
					v := []string{"v1", "v2"}[rng.Intn(2)]
					mem.proofs[v] = append(mem.proofs[v], now)
				}
			case r < 8:
				for n, rel := range pending {
					if rel[0]() != rel[1]() {
						t.Fatalf("variant %d step %d: releasing %s: the two reservations differ", variant, step, n)
					}
					delete(pending, n)
					break
				}
			default:
				// Mostly a waiting node asks; sometimes one that stopped waiting meanwhile.
				var asking []string
				for n, e := range newX.Snapshot().Waiting {
					// The controller asks only about nodes that are not reboot-paused.
					if _, ok := pending[n]; !ok && !e.Paused {
						asking = append(asking, n)
					}
				}
				slices.Sort(asking)
				if len(asking) > 0 && rng.Intn(10) != 0 {
					name = asking[rng.Intn(len(asking))]
				}
				if _, ok := pending[name]; ok {
					continue
				}
				if e, ok := newX.Snapshot().Waiting[name]; ok && e.Paused {
					continue
				}
				lookup := func(n string) (*corev1.Node, bool) { return obj(n), true }
				got := a.Decide(context.Background(), name, obj(name), mem, now, lookup)
				want := old.legacyDecide(context.Background(), name, obj(name), mem, now, lookup)
				decisions++
				if got.String() != want.String() || got.Retry != want.Retry || got.Admitted() != want.Admitted() {
					t.Fatalf("variant %d step %d: %s: got %q (retry %s), the legacy chain %q (retry %s)", variant, step, name, got, got.Retry, want, want.Retry)
				}
				if !maps.Equal(got.ActiveBlockers, want.ActiveBlockers) {
					t.Fatalf("variant %d step %d: %s: active blockers %v, legacy %v", variant, step, name, got.ActiveBlockers, want.ActiveBlockers)
				}
				if got.Admitted() {
					admitted++
					pending[name] = [2]func() bool{got.Release, want.Release}
				} else {
					held[got.Kind]++
				}
			}
		}
	}
	t.Logf("%d decisions, %d admitted, held by kind %v", decisions, admitted, held)
	for _, k := range []Kind{KindWindow, KindPaused, KindBudget, KindOrder, KindCanary, KindVersionHalted, KindFailedVersion, KindUndrainable, KindAgentVersion, KindSettling, "pods-on-node", "prometheus-alerts"} {
		if held[k] == 0 {
			t.Errorf("no decision was held by %s: the comparison hardly tried it", k)
		}
	}
	if admitted < 100 {
		t.Errorf("only %d admissions", admitted)
	}
}
