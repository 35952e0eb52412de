package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// TestFleetBenchSmall proves the simulator and the measurement on a small fleet against the real
// control plane and a real update-operator process: every node that asked rebooted exactly once (and
// no other), the budget held at every instant the benchmark's own watch saw, the latency run
// measured every node, and the printed lines parse. It asserts only what a slow machine cannot move:
// budgets, counts, lower bounds that follow from them (3 waves of 1 s reboots take 3 s at least), and
// orderings the simulator makes happen by construction; how fast is for fleetbench to print.
func TestFleetBenchSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a control plane and builds the operator (~30 s)")
	}
	d, ok := testenv.ControlPlaneBinaries()
	if !ok {
		t.Skip("control-plane binaries not built (make controlplane)")
	}
	if d != "" {
		t.Setenv("SLIPWAY_CONTROLPLANE_DIR", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b, err := operatorproc.Build(ctx, dir+"/bin", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("update-operator at %s", b.Commit)
	cfg := Config{Nodes: 30, Need: 6, K: 2, Reboot: time.Second, LatencyNeed: 6, LatencyK: 6, LatencySpread: 500 * time.Millisecond, Idle: 2 * time.Second,
		HeapProfile: true, OperatorBin: b.Path, Dir: dir, ProgressEvery: 5 * time.Second,
		Say: func(format string, args ...interface{}) { t.Logf(format, args...) }}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("the benchmark could not run: %v", err)
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	if !res.RebootsExactOnce {
		t.Error("not every needing node rebooted exactly once")
	}

	kind, f, err := ParseLine(res.Line())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Line())
	if kind != "rolling" {
		t.Errorf("line starts with %q, want rolling", kind)
	}
	for _, k := range []string{"nodes", "need", "k", "total_s", "ideal_s", "ratio", "max_unavailable", "rss_mib"} {
		if _, ok := f[k]; !ok {
			t.Errorf("line %q has no %s", res.Line(), k)
		}
	}
	if f["nodes"] != 30 || f["need"] != 6 || f["k"] != 2 || f["ideal_s"] != 3 {
		t.Errorf("line %q: want nodes=30 need=6 k=2 ideal_s=3", res.Line())
	}
	if u := f["max_unavailable"]; u < 1 || u > 2 {
		t.Errorf("peak unavailable %v, want 1..2 (the budget, and something rolled)", u)
	}
	if f["total_s"] < 3 || f["ratio"] < 1 || f["rss_mib"] <= 0 {
		t.Errorf("line %q: a roll of 3 rounds of 1 s reboots cannot be faster than 3 s, and the operator has memory", res.Line())
	}
	for _, l := range res.Lines() {
		if _, _, err := ParseLine(l); err != nil {
			t.Error(err)
		}
		t.Log(l)
	}

	if l := res.Latency; l == nil || l.P50ms <= 0 || l.P99ms < l.P50ms || l.MaxUnavailable > 6 || l.SpreadS != 0 {
		t.Errorf("latency run: %+v", res.Latency)
	}
	// While 6 background nodes roll (budget 6 + 6), 6 more ask one by one over 0.5 s. The simulator
	// holds the background in its reboot until every asking node is granted (Sim.Hold), so each asking
	// node is granted while all 6 are unavailable: 7 at least, itself included, however slow the
	// machine. Without the hold, a grant 1 s late on a loaded machine finds the background back.
	if l := res.LatencyRolling; l == nil || l.P50ms <= 0 || l.P99ms < l.P50ms || l.K != 12 || l.MaxUnavailable > 12 ||
		l.MinUnavailableAtGrant < l.Background+1 || l.SpreadS != 0.5 || l.Need != 6 || l.Background != 6 {
		t.Errorf("latency run while rolling: %+v", res.LatencyRolling)
	}
	// Each cycle is a handful of operator requests (admission, cordon, drain's pod list, grant,
	// finish, Events); far more would mean the operator polls or rewrites. What grows with time, its
	// Lease renewal every 2 s, stays under 15 per cycle within the test's 3 minutes.
	if pc := res.Requests.OperatorPerCycle; pc < 3 || pc > 40 {
		t.Errorf("operator requests per cycle %.1f (by method %v)", pc, res.Requests.Operator)
	}
	// The idle window opens once the operator has stored all it owes of the roll (its Events, the
	// record and status it defers up to 30 s), known from what is stored, not after a pause; after
	// that an operator that writes anything while no node needs a reboot writes on a timer.
	if res.Idle == nil || res.Idle.WritesPerMin != 0 || res.Idle.Unsettled != "" {
		t.Errorf("idle writes: %+v", res.Idle)
	}
	if len(res.Profiles) != 1 {
		t.Errorf("profiles %v, want the heap profile", res.Profiles)
	}
}
