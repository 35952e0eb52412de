package chaos

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The short chaos scenario inside `go test ./...`: 8 nodes, 30 cycles, every kind of fault at least
// once, judged by the independent checker. `make chaos` is the full one.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos scenario takes about 1.5 minutes")
	}
	if _, ok := testenv.ControlPlaneBinaries(); !ok {
		t.Skip("control-plane binaries not built (make controlplane)")
	}
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon not installed (make deps)")
	}
	cfg := Short()
	cfg.Seed = uint64(time.Now().UnixNano())
	cfg.Out = testWriter{t}
	t.Logf("seed %d", cfg.Seed)
	// Under go test's default 10-minute timeout, which would end the run without its report.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+cfg.SettleTimeout+30*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("the scenario could not run: %v", err)
	}
	for _, n := range res.Notes {
		t.Log("note:", n)
	}
	if res.Kept {
		t.Log("logs kept in", res.Dir)
	}
	t.Logf("chaos: cycles=%d violations=%d (runtime %s, faults %v)", res.Cycles, len(res.Violations), res.Elapsed.Round(time.Second), res.Faults)
	for _, v := range res.Violations {
		t.Error(v)
	}
	if res.Cycles < cfg.Cycles {
		t.Errorf("only %d of %d cycles completed", res.Cycles, cfg.Cycles)
	}
	faults := []string{"leader-kill", "leader-cut", "node-reregistered", "canary-replaced", "agent-kill", "apiserver-restart", "etcd-restart", "never-back", "failed-node-deleted"}
	if res.UpgradedFrom != "" {
		faults = append(faults, "operator-upgraded", "agent-upgraded")
	} else {
		t.Log("the upgrade did not run (see the NO UPGRADE note): this clone lacks the previous release's commit")
	}
	for _, f := range faults {
		if res.Faults[f] == 0 {
			t.Errorf("fault %s was never injected", f)
		}
	}
}
