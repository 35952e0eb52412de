package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/testsupport/referee"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// previousMain is what "the previous release" is until this repository has a release tag: wave 3's
// main (2026-11-24), the last commit whose agent announces no protocol (FLUO's "1") and whose operator
// keeps the fleet's memory only on Nodes. Upgrading from it crosses both changes of this release.
const previousMain = "c1031a0120b02ffcfdfe6954213d34e3e78a041c"

// PreviousRelease is the commit the upgrade starts from: the repository's last release tag, or
// previousMain while there is none.
func PreviousRelease(ctx context.Context) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--tags", "--abbrev=0", "--match", "v*").Output(); err == nil {
		return strings.TrimSpace(string(out)), nil
	}
	if err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", previousMain+"^{commit}").Run(); err != nil {
		return "", fmt.Errorf("the upgrade starts from commit %s, which this clone lacks (a shallow clone?): fetch the full history (git fetch --unshallow) or run without the upgrade", previousMain[:12])
	}
	return previousMain, nil
}

// upgrader rolls Slipway from the previous release to this tree while nodes are in their cycles, as
// `kubectl apply` of a new release does: the operator Deployment one process at a time (SIGTERM, the
// replacement running before the next goes), then the agent DaemonSet one node at a time (the nodes in
// a cycle first; a machine down in its reboot gets the new agent when it is back). Each step is a
// timeline line saying where the node stood.
func (r *runner) upgrader(ctx context.Context, _ *rand.Rand) {
	if r.cfg.UpgradeFrom == "" {
		return
	}
	defer r.upgraded.Store(true)
	for r.check.Stats().Cycles < r.cfg.UpgradeAt || len(r.inCycle(ctx)) == 0 {
		if testenv.WaitCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
	r.say("upgrade: %s (%s) -> this tree: operator Deployment first, then the agent DaemonSet; nodes in a cycle: %s",
		r.cfg.UpgradeFrom[:min(12, len(r.cfg.UpgradeFrom))], r.oldOperator, r.stages(ctx))
	r.ops.setBin(r.bin)
	// Until no process runs the previous release (one its slot was restarting while the roll began
	// would otherwise be left leading).
	for old := r.ops.notOn(r.bin); len(old) > 0; old = r.ops.notOn(r.bin) {
		id := old[0]
		started, _, _ := r.ops.status()
		if !r.ops.terminate(id) {
			if testenv.WaitCtx(ctx, 100*time.Millisecond) != nil {
				return
			}
			continue
		}
		// The replacement is started by the slot; wait for it to be up a moment (readiness) before the next.
		for s, _, _ := r.ops.status(); s == started; s, _, _ = r.ops.status() {
			if testenv.WaitCtx(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
		if testenv.WaitCtx(ctx, 2*time.Second) != nil {
			return
		}
		r.fault("operator-upgraded")
		r.say("upgrade: operator %s (previous release) replaced by a new-build process; in a cycle: %s", id, r.stages(ctx))
	}
	if len(r.cfg.Pools) > 0 {
		r.check.JudgePools() // no process of the release before pools is left
		r.say("upgrade: every operator knows RebootPolicies; the referee judges each pool's budget from the first moment all are within it")
	}
	order := r.inCycle(ctx)
	for _, n := range r.nodes {
		if !contains(order, n) {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if int32(n.idx) == r.neverBack.Load() {
			continue
		}
		stage := r.stage(n, r.pdbAllows(ctx))
		n.mu.Lock()
		n.SetAgentBinary(r.newAgent)
		err := n.RestartAgentAfter(300 * time.Millisecond)
		if err == nil {
			n.agentUp = time.Now()
		}
		n.mu.Unlock()
		switch {
		case err == nil:
			r.say("upgrade: agent on %s (%s) replaced by the new build", n.Name, stage)
		case n.Down():
			r.say("upgrade: agent on %s (%s): the machine is down, the new agent starts when it is back", n.Name, stage)
		default:
			r.say("upgrade: agent on %s could not be restarted: %v", n.Name, err)
			continue
		}
		r.fault("agent-upgraded")
		if testenv.WaitCtx(ctx, 300*time.Millisecond) != nil {
			return
		}
	}
	r.say("upgrade: done; in a cycle: %s", r.stages(ctx))
}

func contains(ns []*simNode, n *simNode) bool {
	for _, m := range ns {
		if m == n {
			return true
		}
	}
	return false
}

// stage says where n stands in its cycle, from the referee's view of its Node and the machine, and
// allows: the disruptions each PodDisruptionBudget allows now ("ns/name"; nil: not known). A node out
// of its cycle is settling while a PDB its drain recorded (settle-pdbs) allows none (the operator also
// lets --settle-timeout end it; the runs here are shorter).
func (r *runner) stage(n *simNode, allows map[string]int32) string {
	switch {
	case n.Down():
		return "rebooting"
	case r.check.Annotation(n.Name, referee.KeyRebootOK) == "true":
		return "granted"
	case r.check.Annotation(n.Name, referee.KeyCordoned) == "true":
		return "draining"
	}
	for _, e := range strings.Split(r.check.Annotation(n.Name, "update.slipway.dev/settle-pdbs"), ",") {
		if key, _, ok := strings.Cut(e, "="); ok {
			if a, known := allows[key]; known && a == 0 {
				return "settling" // back, its slot held until its PDBs allow a disruption again
			}
		}
	}
	return "idle"
}

// pdbAllows reads the disruptions every PDB of the chaos workloads allows now.
func (r *runner) pdbAllows(ctx context.Context) map[string]int32 {
	l, err := r.client.PolicyV1().PodDisruptionBudgets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]int32{}
	for _, p := range l.Items {
		out[p.Namespace+"/"+p.Name] = p.Status.DisruptionsAllowed
	}
	return out
}

// stages lists the nodes in a cycle or settling, with their stage.
func (r *runner) stages(ctx context.Context) string {
	var out []string
	allows := r.pdbAllows(ctx)
	for _, n := range r.nodes {
		if st := r.stage(n, allows); st != "idle" {
			out = append(out, n.Name+"="+st)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}
