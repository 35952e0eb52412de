// Package chaos is `make chaos`: a real control plane (etcd, kube-apiserver, kube-controller-manager
// for PDB status), a fleet of simulated Flatcar nodes in this process (each a real update-agent on
// its own dbus-daemon with the update_engine and logind stand-ins), two real update-operator
// processes with leader election, and updates staged on every node again and again while faults are
// injected: the leader SIGKILLed, agents killed mid-cycle, the API server restarted, a PDB blocking
// drains for a while, update_engine restarted, one machine that never comes back from its reboot.
//
// Whether Slipway behaved is decided by package invariant, which shares no code with Slipway and
// watches the cluster on its own. The scenario only tells it what the API cannot show: which updates
// were staged and how often each machine really rebooted.
package chaos

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/referee"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Config is one scenario.
type Config struct {
	Nodes          int
	MaxUnavailable int
	Cycles         int           // node cycles to complete (a cycle: granted, rebooted, back)
	Duration       time.Duration // cap on the whole run
	RebootDelay    time.Duration // a simulated machine is down for 0.5-1.5x this
	StageDelay     time.Duration // a node's next update is staged up to this long after it came back
	// Lead is how many updates a node may be ahead of the slowest node still in service: updates come
	// as releases rolling over the fleet, so every node gets several. FreeRunning drops the limit:
	// every node asks again as soon as it is back, which shows the operator's admission order (by
	// name) letting the low names starve the rest.
	Lead        int
	FreeRunning bool
	// Faults. Zero durations/counts turn a fault off.
	LeaderKillEvery time.Duration // SIGKILL the lease holder (a new process replaces it)
	// LeaderCutEvery partitions the lease holder from the API server (its process lives) for
	// LeaderCutFor, longer than the lease; what it sent meanwhile is delivered when the cut heals.
	LeaderCutEvery time.Duration
	LeaderCutFor   time.Duration
	// ReregisterEvery deletes the Node of a machine in its cycle; its kubelet registers it again
	// under the same name (a new UID) 1-3 s later, or when the machine is back from its reboot.
	ReregisterEvery time.Duration
	AgentKillEvery  time.Duration // kill the agent of a node in its cycle for 1-4 s
	// UpgradeFrom, when set, is the commit whose update-operator and update-agent the run starts with
	// ("previous": PreviousRelease); once UpgradeAt cycles are done and a node is in its cycle, both are rolled
	// to this tree's build (upgrade.go). The agents then run as processes, not in this one.
	UpgradeFrom    string
	UpgradeAt      int
	UERestartEvery time.Duration // restart update_engine on an idle node
	APIRestarts    int           // kube-apiserver restarts, spread over the run's progress
	EtcdRestarts   int           // etcd SIGKILLed and restarted (the API server stays up), spread likewise
	NeverBack      bool          // one machine does not come back from its next reboot
	// DeleteLostNode: once the lost machine is marked stalled, its Node is deleted (what an autoscaler
	// or a machine health check does) before a person resumes its release, which must stay held.
	DeleteLostNode bool
	PDBBlock       time.Duration // a PDB blocks the drain of two nodes this long, then is relaxed
	RebootTimeout  time.Duration // the operators' --reboot-timeout (marks the lost machine stalled)
	// OperatorMaxUnavailable, if set, is the operators' --max-unavailable instead of MaxUnavailable
	// (the checker keeps MaxUnavailable): a deliberately wrong operator, to see the checker catch it.
	OperatorMaxUnavailable int
	// OperatorArgs are appended to the operators' command line (a flag given again wins), e.g. to run a
	// deliberately unsafe drain policy and see the checker catch it.
	OperatorArgs []string
	// CanaryNodes and CanaryBake are the operators' --canary-nodes and --canary-bake (0: off). Each
	// node's k-th update is release 4500.k.0, so releases roll over the fleet and each one's canaries
	// go first; the referee judges that no more than CanaryNodes took a release before they proved it.
	// A person (the scenario) resumes the lost machine's release once it is marked stalled.
	CanaryNodes int
	CanaryBake  time.Duration
	// Pools: RebootPolicies by name with their maxUnavailable; the nodes are spread over them round
	// robin by the kubelet label PoolLabel, and the referee judges each pool's budget once no operator of
	// a release before pools runs (nil: none).
	Pools map[string]int
	// VersionEditEvery: about this often one pool denies the release a node stages next, lifted 2-6 s
	// later (pools.go versionEditor); the referee checks no node rebooted into a version denied at its
	// admission (0: off).
	VersionEditEvery time.Duration
	SettleTimeout    time.Duration // after the target: how long everything may take to settle
	ProgressEvery    time.Duration
	Seed             uint64
	Out              io.Writer // progress lines (nil: none)
	// Dir is the scratch directory (logs of every component). Empty: a new temporary one, removed
	// after a clean run unless Keep.
	Dir  string
	Keep bool
}

// Full is `make chaos`.
func Full() Config {
	return Config{Nodes: 24, MaxUnavailable: 3, Cycles: 200, Duration: 25 * time.Minute,
		RebootDelay: time.Second, StageDelay: 4 * time.Second, Lead: 2,
		LeaderKillEvery: 20 * time.Second, AgentKillEvery: 5 * time.Second, UERestartEvery: 7 * time.Second,
		LeaderCutEvery: 45 * time.Second, LeaderCutFor: 8 * time.Second, ReregisterEvery: 15 * time.Second,
		UpgradeFrom: "previous", UpgradeAt: 30,
		APIRestarts: 2, EtcdRestarts: 2, NeverBack: true, DeleteLostNode: true, PDBBlock: 45 * time.Second, RebootTimeout: 30 * time.Second,
		CanaryNodes: 1, CanaryBake: 3 * time.Second, Pools: map[string]int{"a": 1, "b": 2}, VersionEditEvery: 20 * time.Second,
		SettleTimeout: 3 * time.Minute, ProgressEvery: 10 * time.Second}
}

// Short is the quick version (`go test`, `make chaos`, or `go run ./cmd/chaos -short` in e2e/): fewer nodes and cycles,
// every kind of fault at least once. Usually 1.5-2 minutes; the cap leaves room for the one known
// slow path: an eviction that times out across the API server restart leaves its pod in the PDB's
// status.disruptedPods, and the disruption controller lets that block the PDB for its 2-minute
// timeout (Kubernetes behaviour; the operator just retries). A leader SIGKILLed while its eviction
// requests are in flight does the same (the API server counts the disruption, the client is gone
// before the pod is deleted), which is why the short run kills the leader less often.
func Short() Config {
	return Config{Nodes: 8, MaxUnavailable: 3, Cycles: 30, Duration: 6 * time.Minute,
		RebootDelay: 300 * time.Millisecond, StageDelay: 2 * time.Second, Lead: 2,
		LeaderKillEvery: 30 * time.Second, AgentKillEvery: 6 * time.Second, UERestartEvery: 8 * time.Second,
		LeaderCutEvery: 35 * time.Second, LeaderCutFor: 7 * time.Second, ReregisterEvery: 12 * time.Second,
		UpgradeFrom: "previous", UpgradeAt: 5,
		APIRestarts: 1, EtcdRestarts: 1, NeverBack: true, DeleteLostNode: true, PDBBlock: 15 * time.Second, RebootTimeout: 10 * time.Second,
		CanaryNodes: 1, CanaryBake: 2 * time.Second, Pools: map[string]int{"a": 1, "b": 2}, VersionEditEvery: 12 * time.Second,
		// Settling may meet the slow path above: 2 minutes of a PDB's disruptedPods, plus a drain retry.
		SettleTimeout: 3 * time.Minute, ProgressEvery: 10 * time.Second}
}

// Result is what a run found.
type Result struct {
	Cycles     int // grants that ended after the machine came back (the checker's count)
	Reboots    int // reboots the simulated machines completed
	Staged     int // updates staged
	Violations []referee.Violation
	Faults     map[string]int
	Notes      []string // checks that could not run, and why; other remarks
	Elapsed    time.Duration
	Dir        string // scratch directory with every log (kept when Kept)
	Kept       bool
	// StalledChecked: the operators had --reboot-timeout, so the lost machine had to be marked stalled.
	StalledChecked bool
	// UpgradedFrom: the commit the run started on and upgraded from ("": no upgrade).
	UpgradedFrom string
}

// Fault names, in the order progress lines show them.
var faultNames = []string{"operator-upgraded", "agent-upgraded", "leader-kill", "leader-cut", "node-reregistered", "canary-replaced", "agent-kill", "apiserver-restart", "etcd-restart", "ue-restart", "pdb-block", "never-back", "failed-node-deleted"}

type runner struct {
	cfg     Config
	start   time.Time
	client  kubernetes.Interface
	cp      *testenv.ControlPlane
	check   *referee.Checker
	ops     *operators
	nodes   []*simNode
	faults  sync.Map // name -> *atomic.Int64
	staged  atomic.Int64
	said    int  // violations said so far (progress)
	stalled bool // operators run with --reboot-timeout
	logf    func(format string, args ...interface{})
	bin     string // the update-operator binary (also the person's `resume --version`)
	// The upgrade (UpgradeFrom): the previous release's binaries, this tree's agent, and whether the
	// roll is over (the lost machine waits for it: the previous release cannot keep a halt).
	oldOperator, oldAgent, newAgent string
	upgraded                        atomic.Bool
	agentExits                      atomic.Int64 // agent processes that exited on their own
	versionEdits                    atomic.Int64 // denies the versionEditor put in force
	guarded                         *app
	runCtx                          context.Context
	// neverBack is the index of the machine that will not come back (-1: none chosen yet).
	neverBack atomic.Int32
}

// simNode is a simulated node plus the scenario's bookkeeping for it. mu serializes what the
// scenario does to the node (staging an update, killing its agent, restarting update_engine), so
// that no update is staged into a dead agent's ear and update_engine never restarts mid-reboot.
type simNode struct {
	*simnode.Node
	idx      int
	mu       sync.Mutex
	staged   int       // under mu
	agentUp  time.Time // under mu: when the agent last (re)started
	rebooted chan struct{}
}

func (r *runner) faultCount(name string) int64 {
	if v, ok := r.faults.Load(name); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (r *runner) fault(name string) {
	v, _ := r.faults.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// everyFaultInjected: each fault the configuration turns on has struck at least once (the API server
// as often as configured).
func (r *runner) everyFaultInjected() bool {
	f := r.faultCounts()
	c := r.cfg
	return (c.LeaderKillEvery == 0 || f["leader-kill"] > 0) && (c.AgentKillEvery == 0 || f["agent-kill"] > 0) &&
		(c.LeaderCutEvery == 0 || f["leader-cut"] > 0) && (c.UpgradeFrom == "" || f["agent-upgraded"] > 0 && f["operator-upgraded"] > 0) && (c.ReregisterEvery == 0 || f["node-reregistered"] > 0) &&
		(c.ReregisterEvery == 0 || c.CanaryNodes == 0 || f["canary-replaced"] > 0) &&
		(c.UERestartEvery == 0 || f["ue-restart"] > 0) && f["apiserver-restart"] >= c.APIRestarts && f["etcd-restart"] >= c.EtcdRestarts &&
		(c.PDBBlock == 0 || f["pdb-block"] > 0) && (!c.NeverBack || f["never-back"] > 0) &&
		(!c.NeverBack || !c.DeleteLostNode || f["failed-node-deleted"] > 0)
}

func (r *runner) faultCounts() map[string]int {
	out := map[string]int{}
	for _, n := range faultNames {
		out[n] = 0
	}
	r.faults.Range(func(k, v any) bool { out[k.(string)] = int(v.(*atomic.Int64).Load()); return true })
	return out
}

func (r *runner) say(format string, args ...interface{}) {
	if r.cfg.Out != nil {
		fmt.Fprintf(r.cfg.Out, "[%7.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Run runs the scenario. An error means the scenario itself could not run (setup failed); what
// Slipway did wrong is in Result.Violations.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	r := &runner{cfg: cfg, start: time.Now()}
	r.neverBack.Store(-1)
	res = &Result{Faults: map[string]int{}}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "slipway-chaos-"); err != nil {
			return nil, err
		}
	}
	res.Dir = cfg.Dir
	defer func() {
		res.Elapsed = time.Since(r.start)
		if err != nil || len(res.Violations) > 0 || res.Cycles < cfg.Cycles || cfg.Keep {
			res.Kept = true
			return
		}
		_ = os.RemoveAll(cfg.Dir)
	}()
	logDir := filepath.Join(cfg.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return res, err
	}
	// Agents run in this process: their klog output goes to a file, never to the terminal.
	agentLog, err := os.Create(filepath.Join(logDir, "agents.log"))
	if err != nil {
		return res, err
	}
	defer agentLog.Close()
	testenv.KlogTo(agentLog)
	defer testenv.KlogTo(io.Discard)
	r.say("logs in %s", logDir)

	op, err := operatorproc.Build(ctx, filepath.Join(cfg.Dir, "bin"), "")
	if err != nil {
		return res, err
	}
	bin := op.Path
	r.bin = bin
	if cfg.UpgradeFrom == "previous" {
		prev, err := PreviousRelease(ctx)
		if err != nil {
			// A clone without the history (shallow): the run goes on without the upgrade, and says so.
			res.Notes = append(res.Notes, "NO UPGRADE: "+err.Error())
			r.say("no upgrade in this run: %v", err)
		}
		cfg.UpgradeFrom, r.cfg.UpgradeFrom = prev, prev
	}
	res.UpgradedFrom = cfg.UpgradeFrom
	if cfg.UpgradeFrom != "" {
		r.say("building the previous release %s (update-operator, update-agent) and this tree's update-agent", cfg.UpgradeFrom)
		old, err := operatorproc.Build(ctx, filepath.Join(cfg.Dir, "bin-previous"), cfg.UpgradeFrom)
		if err != nil {
			return res, err
		}
		oldAgent, err := operatorproc.BuildAgent(ctx, filepath.Join(cfg.Dir, "bin-previous-agent"), cfg.UpgradeFrom)
		if err != nil {
			return res, err
		}
		newAgent, err := operatorproc.BuildAgent(ctx, filepath.Join(cfg.Dir, "bin"), "")
		if err != nil {
			return res, err
		}
		bin, r.oldOperator, r.oldAgent, r.newAgent = old.Path, old.Commit[:12], oldAgent.Path, newAgent.Path
	}
	r.stalled, err = operatorproc.SupportsFlag(bin, fmt.Sprintf("--reboot-timeout=%s", cfg.RebootTimeout))
	if err != nil {
		return res, err
	}
	res.StalledChecked = r.stalled && cfg.NeverBack
	if !r.stalled {
		res.Notes = append(res.Notes, "update-operator has no --reboot-timeout flag (flag provided but not defined): ran without it; the never-returning node's stalled mark was NOT checked")
	}

	if os.Getenv("SLIPWAY_CONTROLPLANE_DIR") == "" {
		// One cached build: use it directly (hack/build-controlplane.sh would only say "cached" on
		// the terminal). Otherwise testenv asks the script, which builds what is missing.
		if d, ok := testenv.ControlPlaneBinaries(); ok && d != "" {
			os.Setenv("SLIPWAY_CONTROLPLANE_DIR", d)
			defer os.Unsetenv("SLIPWAY_CONTROLPLANE_DIR")
		}
	}
	r.say("starting etcd, kube-apiserver, kube-controller-manager")
	cp, err := testenv.StartControlPlane(ctx, filepath.Join(cfg.Dir, "cp"), testenv.Options{ControllerManager: true})
	if err != nil {
		return res, err
	}
	r.cp = cp
	defer cp.Stop()
	r.client = cp.Client()
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	r.runCtx = runCtx
	testenv.PodKubelet(runCtx, r.client)

	// The referee watches before anything happens.
	r.check = referee.NewAt(cfg.MaxUnavailable, time.Now)
	r.check.Since(r.start) // violations carry the same clock as the progress lines
	if cfg.CanaryNodes > 0 {
		r.check.Canaries(cfg.CanaryNodes, cfg.CanaryBake)
	}
	select {
	case <-r.check.Watch(runCtx, r.client, Namespace):
	case <-time.After(30 * time.Second):
		return res, errors.New("the checker's watches never synced")
	}
	for _, ns := range []string{Namespace, "slipway-system"} {
		if err := ensureNamespace(ctx, r.client, ns); err != nil {
			return res, err
		}
	}

	// As installed: the API server refuses an admission made in a leadership term that has passed (a
	// cut leader's, delivered when the cut heals).
	if err := testenv.InstallAdmissionFence(ctx, r.client, "slipway-system", "slipway-update-operator"); err != nil {
		return res, err
	}

	poolNames := slices.Sorted(maps.Keys(cfg.Pools))
	if len(poolNames) > 0 {
		if err := r.createPools(ctx, poolNames); err != nil {
			return res, err
		}
	}
	r.say("starting %d simulated Flatcar nodes (dbus-daemon, update_engine + logind stand-ins, update-agent each)", cfg.Nodes)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
	for i := 0; i < cfg.Nodes; i++ {
		name := fmt.Sprintf("chaos-%02d", i)
		delay := time.Duration(float64(cfg.RebootDelay) * (0.5 + rng.Float64()))
		var labels map[string]string
		if len(poolNames) > 0 {
			labels = map[string]string{PoolLabel: poolNames[i%len(poolNames)]}
		}
		sn, err := simnode.New(runCtx, name, simnode.Options{Client: r.client, Dir: filepath.Join(cfg.Dir, "nodes", name),
			Log: klog.Background(), RebootDelay: delay, AgentBinary: r.oldAgent, Kubeconfig: cp.Kubeconfig, Labels: labels})
		if err != nil {
			return res, err
		}
		n := &simNode{Node: sn, idx: i, agentUp: time.Now(), rebooted: make(chan struct{}, 1)}
		sn.OnAgentExit = func(_ *simnode.Node, err error, log string) {
			// A crash the scenario did not cause: reported, and restarted as a DaemonSet's kubelet would.
			r.agentExits.Add(1)
			r.say("the agent of %s exited on its own (%v): %s", name, err, testenv.LogTail(log))
			_ = n.RestartAgentAfter(time.Second)
		}
		sn.OnReboot = func(_ *simnode.Node, boot int) {
			r.check.Rebooted(name, boot)
			select {
			case n.rebooted <- struct{}{}:
			default:
			}
		}
		defer sn.Stop()
		r.nodes = append(r.nodes, n)
	}
	for _, n := range r.nodes {
		if _, err := testenv.WaitNode(ctx, r.client, n.Name, 60*time.Second, func(nd *corev1.Node) bool {
			return nd.Annotations[protocol.BootID] == n.BootID() && nd.Annotations[protocol.Status] != ""
		}); err != nil {
			return res, fmt.Errorf("agent of %s never reported: %w", n.Name, err)
		}
	}

	// Workloads: one web pod per node (its PDB allows as many disruptions as the reboot budget), and
	// a guarded pair on two nodes whose PDB allows no disruption at all until it is relaxed.
	names := make([]string, cfg.Nodes)
	for i, n := range r.nodes {
		names[i] = n.Name
	}
	web, err := createApp(ctx, r.client, "web", names, max(cfg.Nodes-cfg.MaxUnavailable, 1))
	if err != nil {
		return res, fmt.Errorf("web workload: %w", err)
	}
	apps := []*app{web}
	if cfg.PDBBlock > 0 && cfg.Nodes >= 3 {
		if r.guarded, err = createApp(ctx, r.client, "guarded", names[1:3], 2); err != nil {
			return res, fmt.Errorf("guarded workload: %w", err)
		}
		apps = append(apps, r.guarded)
		r.fault("pdb-block")
		r.say("PDB guarded (minAvailable 2 of 2 pods, on %s and %s) blocks their drains for %s", names[1], names[2], cfg.PDBBlock)
	}
	go replicaSets(runCtx, r.client, apps, rand.New(rand.NewPCG(cfg.Seed+1, 1)))

	args := []string{"--kubeconfig=" + cp.Kubeconfig, "--namespace=slipway-system",
		"--lease-duration=4s", "--renew-deadline=3s", "--retry-period=500ms", "--http-address=127.0.0.1:0",
		fmt.Sprintf("--max-unavailable=%d", cmp.Or(cfg.OperatorMaxUnavailable, cfg.MaxUnavailable)),
		"--drain-timeout=30s", "--drain-retry-base=1s", "--drain-retry-max=4s"}
	if r.stalled {
		args = append(args, fmt.Sprintf("--reboot-timeout=%s", cfg.RebootTimeout))
	}
	if cfg.CanaryNodes > 0 {
		args = append(args, fmt.Sprintf("--canary-nodes=%d", cfg.CanaryNodes), fmt.Sprintf("--canary-bake=%s", cfg.CanaryBake))
	}
	args = append(args, cfg.OperatorArgs...)
	r.ops = newOperators(bin, logDir, args)
	if cfg.LeaderCutEvery > 0 {
		r.ops.cp = cp
	}
	opCtx, stopOps := context.WithCancel(runCtx)
	r.ops.run(opCtx, 2)
	defer func() { stopOps(); r.ops.stop() }()
	r.say("2 update-operator processes (leader election, lease 4s): %s", strings.Join(args[1:], " "))

	// Stage updates and inject faults until the target is reached or time is up.
	deadline := r.start.Add(cfg.Duration)
	stageCtx, stopStaging := context.WithCancel(runCtx)
	defer stopStaging()
	faultCtx, stopFaults := context.WithCancel(runCtx)
	defer stopFaults()
	target := int64(cfg.Cycles)
	if cfg.NeverBack {
		target++ // its last update never completes
	}
	var stagers sync.WaitGroup
	for _, n := range r.nodes {
		stagers.Add(1)
		go func(n *simNode) {
			defer stagers.Done()
			r.stager(stageCtx, n, target, rand.New(rand.NewPCG(cfg.Seed+uint64(n.idx)+100, 7)))
		}(n)
	}
	var injectors sync.WaitGroup
	for i, f := range []func(context.Context, *rand.Rand){r.upgrader, r.leaderKiller, r.leaderCutter, r.reregisterer, r.agentKiller, r.ueRestarter, r.apiRestarter, r.etcdRestarter, r.neverBackInjector, r.pdbRelaxer, r.versionEditor} {
		injectors.Add(1)
		go func(f func(context.Context, *rand.Rand), seed uint64) {
			defer injectors.Done()
			f(faultCtx, rand.New(rand.NewPCG(seed, 11)))
		}(f, cfg.Seed+uint64(i)+1000)
	}

	progress := time.NewTicker(cfg.ProgressEvery)
	defer progress.Stop()
	reason := ""
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "interrupted"
		case <-time.After(500 * time.Millisecond):
		case <-progress.C:
			r.progress()
		}
		if _, _, fatal := r.ops.status(); fatal != nil {
			return res, fatal
		}
		switch {
		case !r.everyFaultInjected() && time.Now().Before(deadline):
			// A run that reached its count before every kind of fault happened proved less than it
			// says: the faults go on until each has struck (a faster operator made that happen).
		case r.check.Stats().Cycles >= cfg.Cycles:
			reason = "target reached"
		case r.staged.Load() >= target && r.settled(cfg.NeverBack && r.stalled):
			// Every update staged has been dealt with; the count is what it is.
			reason = "all staged updates done"
		case time.Now().After(deadline):
			reason = fmt.Sprintf("time cap %s reached", cfg.Duration)
		}
	}
	stopStaging()
	stopFaults()
	injectors.Wait()
	stagers.Wait()
	if r.guarded != nil {
		r.guarded.replicas.Store(3) // relaxed, if it was not yet
	}
	r.progress()
	r.say("%s; letting every node settle (up to %s)", reason, cfg.SettleTimeout)
	settleStart := time.Now()
	lastWhy := ""
	for {
		ok, why := r.check.Settled(res.StalledChecked)
		if ok {
			r.say("settled after %s", time.Since(settleStart).Round(100*time.Millisecond))
			break
		}
		if time.Since(settleStart) > cfg.SettleTimeout || ctx.Err() != nil {
			res.Notes = append(res.Notes, "did not settle within "+cfg.SettleTimeout.String()+": "+why)
			break
		}
		if why != lastWhy {
			r.say("settling: waiting for %s", why)
			lastWhy = why
		}
		time.Sleep(500 * time.Millisecond)
	}
	judged := r.check.VersionGrants()
	r.check.Final(res.StalledChecked)
	if cfg.VersionEditEvery > 0 && len(cfg.Pools) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("version edits (a pool denying a release a node stages next, lifted 2-6 s later): %d; grants judged by the generation their node was admitted under: %d", r.versionEdits.Load(), judged))
	}

	st := r.check.Stats()
	res.Cycles = st.Cycles
	for _, n := range r.nodes {
		res.Reboots += n.Boots()
	}
	res.Staged = int(r.staged.Load())
	res.Violations = r.check.Violations()
	res.Faults = r.faultCounts()
	res.Notes = append(res.Notes, r.check.Notes()...)
	res.Notes = append(res.Notes, r.spread())
	for _, n := range r.nodes {
		if c := r.check.CyclesOf(n.Name); c != n.Boots() {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the machine rebooted %d times, the checker counted %d cycles", n.Name, n.Boots(), c))
		}
	}
	if n := fenced(logDir); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("admissions the API server's fence refused (made in a leadership term that had passed): %d", n))
	}
	started, exits, _ := r.ops.status()
	res.Notes = append(res.Notes, fmt.Sprintf("update-operator processes started: %d; exits not caused by the scenario: %d %v", started, len(exits), exits))
	if x := r.agentExits.Load(); x > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("update-agent processes that exited on their own (crashes; restarted): %d", x))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("peak unavailable %d (budget %d); checker relists (watch gaps) %d", st.Peak, cfg.MaxUnavailable, st.Relists))
	if len(cfg.Pools) > 0 {
		var peaks []string
		for _, name := range slices.Sorted(maps.Keys(cfg.Pools)) {
			peaks = append(peaks, fmt.Sprintf("%s %d (budget %d)", name, r.check.PoolPeaks()[name], cfg.Pools[name]))
		}
		res.Notes = append(res.Notes, "peak unavailable per pool while judged: "+strings.Join(peaks, ", "))
	}
	if res.Faults["apiserver-restart"] < cfg.APIRestarts {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d API server restarts happened", res.Faults["apiserver-restart"], cfg.APIRestarts))
	}
	if res.Faults["etcd-restart"] < cfg.EtcdRestarts {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d etcd restarts happened", res.Faults["etcd-restart"], cfg.EtcdRestarts))
	}
	return res, nil
}

// mayStage: n's next update is at most Lead ahead of the slowest node still in service.
func (r *runner) mayStage(n *simNode) bool {
	if r.cfg.FreeRunning || r.cfg.Lead <= 0 {
		return true
	}
	slowest := -1
	for _, m := range r.nodes {
		if int32(m.idx) == r.neverBack.Load() {
			continue
		}
		if b := m.Boots(); slowest < 0 || b < slowest {
			slowest = b
		}
	}
	n.mu.Lock()
	next := n.staged + 1
	n.mu.Unlock()
	return next <= slowest+r.cfg.Lead
}

// spread says how evenly the reboots fell on the nodes (the lost machine aside).
func (r *runner) spread() string {
	lo, hi := -1, -1
	var parts []string
	for _, n := range r.nodes {
		if int32(n.idx) == r.neverBack.Load() {
			continue
		}
		b := n.Boots()
		if lo < 0 || b < r.nodes[lo].Boots() {
			lo = n.idx
		}
		if hi < 0 || b > r.nodes[hi].Boots() {
			hi = n.idx
		}
		parts = append(parts, fmt.Sprintf("%s=%d", n.Name[len(n.Name)-2:], b))
	}
	if lo < 0 {
		return "no nodes"
	}
	return fmt.Sprintf("reboots per node: fewest %d (%s), most %d (%s); %s", r.nodes[lo].Boots(), r.nodes[lo].Name, r.nodes[hi].Boots(), r.nodes[hi].Name, strings.Join(parts, " "))
}

func (r *runner) settled(requireStalled bool) bool {
	ok, _ := r.check.Settled(requireStalled)
	return ok
}

func (r *runner) progress() {
	st := r.check.Stats()
	f := r.faultCounts()
	var fs []string
	for _, n := range faultNames {
		fs = append(fs, fmt.Sprintf("%s=%d", n, f[n]))
	}
	boots := 0
	for _, n := range r.nodes {
		boots += n.Boots()
	}
	r.say("cycles %d/%d  reboots %d  staged %d  unavailable %d (peak %d, budget %d)  faults: %s  violations %d",
		st.Cycles, r.cfg.Cycles, boots, r.staged.Load(), st.Unavailable, st.Peak, r.cfg.MaxUnavailable, strings.Join(fs, " "), st.Violations)
	// A violation is said when it is found, beside the faults around it, not only at the end.
	vs := r.check.Violations()
	for _, v := range vs[min(r.said, len(vs)):] {
		r.say("VIOLATION %v", v)
	}
	r.said = len(vs)
}

// stager stages one update at a time on n: after a random pause, update_engine (mostly the
// stand-in's full AttemptUpdate, sometimes locksmithctl's send-need-reboot signal) says a reboot is
// needed; then it waits for the machine to come back before staging the next. It stops staging once
// target updates were staged in all and every fault has struck (or the time cap passed).
func (r *runner) stager(ctx context.Context, n *simNode, target int64, rng *rand.Rand) {
	for {
		pause := r.cfg.StageDelay/10 + time.Duration(rng.Int64N(int64(r.cfg.StageDelay)))
		if testenv.WaitCtx(ctx, pause) != nil {
			return
		}
		for !r.mayStage(n) {
			if testenv.WaitCtx(ctx, 200*time.Millisecond) != nil {
				return
			}
		}
		// Past the target, staging goes on while a fault has not struck yet (before the time cap):
		// some faults need a node in its cycle (node-reregistered), and a fast roll-out can reach its
		// count before they had one.
		if r.staged.Add(1) > target && (r.everyFaultInjected() || time.Now().After(r.start.Add(r.cfg.Duration))) {
			r.staged.Add(-1)
			return
		}
		n.mu.Lock()
		before := n.Boots()
		n.staged++
		r.check.Staged(n.Name)
		// The signal alone is only heard by a running agent that is listening: use it only when the
		// agent has been up a while. update_engine's own status survives agent restarts.
		var err error
		// Each update is a release of its own (4500.k.0): the canary check and the referee's one
		// reboot per (Node UID, version) judge by it.
		n.UE.NewVersion = release(n.staged)
		if rng.IntN(4) == 0 && time.Since(n.agentUp) > 5*time.Second {
			err = n.SendNeedReboot()
		} else {
			n.UE.AttemptUpdate()
		}
		if err != nil {
			n.UE.AttemptUpdate()
		}
		n.mu.Unlock()
		for n.Boots() == before {
			select {
			case <-ctx.Done():
				return
			case <-n.rebooted:
			case <-time.After(time.Second):
			}
		}
		n.mu.Lock()
		n.agentUp = time.Now()
		n.mu.Unlock()
	}
}

// inCycle lists the nodes the operator is working on (granted or cordoned), from a fresh LIST.
func (r *runner) inCycle(ctx context.Context) []*simNode {
	l, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []*simNode
	for _, nd := range l.Items {
		if nd.Annotations[protocol.RebootOK] == protocol.True || nd.Spec.Unschedulable {
			for _, n := range r.nodes {
				if n.Name == nd.Name && int32(n.idx) != r.neverBack.Load() {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func every(ctx context.Context, d time.Duration, rng *rand.Rand, f func()) {
	if d <= 0 {
		return
	}
	for {
		jitter := time.Duration(float64(d) * (0.8 + 0.4*rng.Float64()))
		if testenv.WaitCtx(ctx, jitter) != nil {
			return
		}
		f()
	}
}

// leaderKiller SIGKILLs the lease holder; the supervisor starts a new process in its place.
func (r *runner) leaderKiller(ctx context.Context, rng *rand.Rand) {
	every(ctx, r.cfg.LeaderKillEvery, rng, func() {
		if id := leaseHolder(ctx, r.client, "slipway-system", "slipway-update-operator"); id != "" && r.ops.kill(id) {
			r.fault("leader-kill")
			r.say("killed the leader %s (SIGKILL)", id)
		}
	})
}

// leaderCutter partitions the lease holder from the API server for LeaderCutFor and heals the cut:
// the process lives on (it must stop acting once its lease could have passed), and what it sent during
// the cut reaches the API server after a successor took over.
func (r *runner) leaderCutter(ctx context.Context, rng *rand.Rand) {
	every(ctx, r.cfg.LeaderCutEvery, rng, func() {
		// The lease may still name a leader just killed: try until a live one holds it.
		var id string
		var px *testenv.Proxy
		for ok := false; !ok; {
			if id = leaseHolder(ctx, r.client, "slipway-system", "slipway-update-operator"); id != "" {
				px, ok = r.ops.cut(id)
			}
			if !ok && testenv.WaitCtx(ctx, 500*time.Millisecond) != nil {
				return
			}
		}
		r.say("cut the leader %s off from the API server for %s (its process lives)", id, r.cfg.LeaderCutFor)
		before := px.Held()
		err := testenv.WaitCtx(ctx, r.cfg.LeaderCutFor)
		held := px.Held() - before
		px.Heal()
		if err != nil || held == 0 {
			// The run ended first, or the leader sent nothing (it was on its way out): no cut to count.
			r.say("the cut of %s held nothing or was cut short: not counted", id)
			return
		}
		r.fault("leader-cut")
		r.say("healed the cut of %s (%d chunks and connections held): what it sent meanwhile is delivered now", id, held)
	})
}

// reregisterer deletes the Node of a machine in its cycle; its kubelet registers it again under the
// same name. The operator must end the old object's cycle (replaced) and never act on the new object
// with what it computed for the old one; the machine reboots once per update all the same.
func (r *runner) reregisterer(ctx context.Context, rng *rand.Rand) {
	last := map[string]time.Time{}
	every(ctx, r.cfg.ReregisterEvery, rng, func() {
		if r.cfg.UpgradeFrom != "" && !r.upgraded.Load() {
			// Not while the previous release runs: it predates the fix that counts a canary replaced in
			// its cycle as a failure of its version (77b51df), so the referee would judge a bug of the
			// release being upgraded from, not of this tree (a TestChaosShort run did, once the first
			// re-registration came before the roll).
			return
		}
		// Not the same machine again soon: a node whose drain is held (a PDB) would otherwise be the
		// only one in a cycle each time, its cycle begun anew over and over.
		var c []*simNode
		for _, n := range r.inCycle(ctx) {
			if time.Since(last[n.Name]) > 3*r.cfg.ReregisterEvery {
				c = append(c, n)
			}
		}
		if len(c) == 0 {
			return
		}
		n := c[rng.IntN(len(c))]
		// Until a canary granted its reboot has been replaced once (what the operator must count as a
		// failure of its version), prefer a granted node, waiting a few seconds for one.
		if r.cfg.CanaryNodes > 0 && r.faultCount("canary-replaced") == 0 {
			if g := r.granted(ctx, c, 3*time.Second); g != nil {
				n = g
			}
		}
		last[n.Name] = time.Now()
		if !n.mu.TryLock() {
			return // being staged or its agent being killed
		}
		defer n.mu.Unlock()
		var uid types.UID
		if nd, err := r.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			uid = nd.UID
		}
		gap := time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
		now, err := n.Reregister(ctx, gap)
		if err != nil {
			r.say("re-registering %s failed: %v", n.Name, err)
			return
		}
		r.fault("node-reregistered")
		if uid != "" && r.cfg.CanaryNodes > 0 {
			go r.replacedCanary(n, uid)
		}
		if now {
			r.say("deleted the Node of %s in its cycle; its kubelet registered it again %s later (new UID)", n.Name, gap.Round(100*time.Millisecond))
		} else {
			r.say("deleted the Node of %s while the machine was down; its kubelet registers it when back", n.Name)
		}
	})
}

// granted picks a node of c whose reboot is granted (reboot-ok), waiting up to wait for one (nil: none).
func (r *runner) granted(ctx context.Context, c []*simNode, wait time.Duration) *simNode {
	for deadline := time.Now().Add(wait); ; {
		for _, n := range c {
			if r.check.Annotation(n.Name, referee.KeyRebootOK) == protocol.True {
				return n
			}
		}
		if time.Now().After(deadline) || testenv.WaitCtx(ctx, 200*time.Millisecond) != nil {
			return nil
		}
	}
}

// replacedCanary follows a Node deleted in its cycle: deleted after its grant, the operator records a
// failure of the version the grant pinned (reason replaced; or, when it had stalled first, its stall),
// which holds that version's canary place until a person resumes it. Once the record shows it (the
// evidence that the operator looked; the previous release's operator records none) and while it still
// counts (no resume since), the referee holds the version when a single canary runs -- a cycle started
// for it now is a violation -- and a person resumes it 5 s later, retrying until the resume lands (the
// API server may be restarting). Deleted before its grant, nothing is recorded.
func (r *runner) replacedCanary(n *simNode, uid types.UID) {
	var v string
	var at time.Time
	var rec fleetrecord.Record
	for deadline := time.Now().Add(30 * time.Second); v == "" && time.Now().Before(deadline); {
		if testenv.WaitCtx(r.runCtx, 300*time.Millisecond) != nil {
			return
		}
		cm, err := r.client.CoreV1().ConfigMaps("slipway-system").Get(r.runCtx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if rec, err = fleetrecord.Decode(cm.Data[fleetrecord.Key]); err != nil {
			continue
		}
		for _, f := range rec.Failures {
			if f.UID == string(uid) && f.Version != "" && !f.Budget && (f.Reason == fleetrecord.ReasonReplaced || f.Reason == fleetrecord.ReasonStalled) {
				v, at = f.Version, f.At
			}
		}
	}
	if v == "" {
		return // before its grant, or the previous release led: nothing held
	}
	if r.cfg.CanaryNodes == 1 && !at.Before(rec.ResumedAt(v)) {
		// An admission decided just before the operator learned of the deletion may land (and be seen
		// by the referee's watch) a moment later; from then on none may start.
		if testenv.WaitCtx(r.runCtx, 2*time.Second) != nil {
			return
		}
		r.check.Halted(v)
	}
	r.fault("canary-replaced")
	r.say("%s's Node was deleted after its grant for %s: recorded as a failure of %s, held until a person resumes it", n.Name, v, v)
	if testenv.WaitCtx(r.runCtx, 5*time.Second) != nil {
		return
	}
	r.resumeRelease(n, v)
}

// agentKiller kills the agent of a node in its cycle and restarts it 1-4 s later (same boot).
func (r *runner) agentKiller(ctx context.Context, rng *rand.Rand) {
	var wg sync.WaitGroup
	defer wg.Wait()
	every(ctx, r.cfg.AgentKillEvery, rng, func() {
		c := r.inCycle(ctx)
		if len(c) == 0 {
			return
		}
		n := c[rng.IntN(len(c))]
		down := time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		if !n.mu.TryLock() {
			return // being staged or already being killed
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer n.mu.Unlock()
			if err := n.RestartAgentAfter(down); err == nil {
				n.agentUp = time.Now()
				r.fault("agent-kill")
			}
		}()
	})
}

// ueRestarter restarts update_engine on a node with no update pending (so no reboot can happen
// while it is away, which the stand-in's restart would not survive).
func (r *runner) ueRestarter(ctx context.Context, rng *rand.Rand) {
	every(ctx, r.cfg.UERestartEvery, rng, func() {
		// Nodes are idle only between a reboot and their next update: try them all, in random order.
		for _, i := range rng.Perm(len(r.nodes)) {
			n := r.nodes[i]
			if int32(n.idx) == r.neverBack.Load() || !n.mu.TryLock() {
				continue
			}
			if n.staged != n.Boots() || n.Down() {
				n.mu.Unlock()
				continue
			}
			err := n.RestartUpdateEngine(time.Second)
			n.mu.Unlock()
			if err != nil {
				r.say("restarting update_engine on %s failed: %v", n.Name, err)
				return
			}
			r.fault("ue-restart")
			return
		}
	})
}

// apiRestarter restarts kube-apiserver APIRestarts times, spread evenly over the run's progress.
func (r *runner) apiRestarter(ctx context.Context, _ *rand.Rand) {
	r.restarts(ctx, "apiserver-restart", "kube-apiserver", r.cfg.APIRestarts, func(k int) int {
		return r.cfg.Cycles * k / (r.cfg.APIRestarts + 1)
	}, r.cp.RestartAPIServer)
}

// etcdRestarter SIGKILLs and restarts etcd EtcdRestarts times, spread over the run's progress between the
// API server's restarts: every write in flight fails, every watch is cut, the leader's renewals fail
// until etcd is back (a lease shorter than the outage passes on).
func (r *runner) etcdRestarter(ctx context.Context, _ *rand.Rand) {
	r.restarts(ctx, "etcd-restart", "etcd", r.cfg.EtcdRestarts, func(k int) int {
		return r.cfg.Cycles * (2*k - 1) / (2 * (r.cfg.EtcdRestarts + 1))
	}, r.cp.RestartEtcd)
}

// restarts runs restart n times, the k-th once at(k) cycles are done, counting each as fault.
func (r *runner) restarts(ctx context.Context, fault, what string, n int, at func(k int) int, restart func(context.Context) error) {
	for k := 1; k <= n; k++ {
		for r.check.Stats().Cycles < at(k) {
			if testenv.WaitCtx(ctx, 500*time.Millisecond) != nil {
				return
			}
		}
		t0 := time.Now()
		if err := restart(ctx); err != nil {
			r.say("%s restart failed: %v", what, err)
			continue
		}
		r.fault(fault)
		r.say("restarted %s (SIGKILL + start, %s until the API server was ready)", what, time.Since(t0).Round(100*time.Millisecond))
	}
}

// neverBackInjector picks the last node and, once it is not granted, makes its next reboot one it
// never returns from.
func (r *runner) neverBackInjector(ctx context.Context, _ *rand.Rand) {
	if !r.cfg.NeverBack {
		return
	}
	for r.check.Stats().Cycles < r.cfg.Cycles/5 || r.cfg.UpgradeFrom != "" && !r.upgraded.Load() {
		if testenv.WaitCtx(ctx, 500*time.Millisecond) != nil {
			return
		}
	}
	n := r.nodes[len(r.nodes)-1]
	for ctx.Err() == nil {
		nd, err := r.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && nd.Annotations[protocol.RebootOK] != protocol.True && !n.Down() {
			r.neverBack.Store(int32(n.idx))
			r.check.NeverBack(n.Name)
			n.NeverComeBack()
			r.fault("never-back")
			r.say("%s will not come back from its next reboot", n.Name)
			go r.watchLost(n)
			return
		}
		_ = testenv.WaitCtx(ctx, 200*time.Millisecond)
	}
}

// release is the OS version of a node's k-th update.
func release(k int) string { return fmt.Sprintf("4500.%d.0", k) }

// deleteLost deletes the lost machine's Node, as an autoscaler or a machine health check would, and keeps
// its release held for a while: the referee reports any node that starts a cycle for that release
// before the person resumes it (the fleet record remembers the failure, not the Node).
func (r *runner) deleteLost(n *simNode, v string) {
	if r.cfg.CanaryNodes > 0 && v != "" {
		r.check.Halted(v)
	}
	if err := r.client.CoreV1().Nodes().Delete(r.runCtx, n.Name, metav1.DeleteOptions{}); err != nil {
		r.say("deleting the lost machine's Node %s failed: %v", n.Name, err)
		return
	}
	r.fault("failed-node-deleted")
	r.say("deleted the lost machine's Node %s (its release %s stays held until a person resumes it)", n.Name, v)
	_ = testenv.WaitCtx(r.runCtx, 5*time.Second) // long enough for waiting nodes to be looked at again
}

// resumeRelease is the person who looked at the lost machine: its release's canaries and halts
// count it as a failure until someone runs `kubectl slipway resume --version` (here through the
// operator binary, the same code).
// A resume that fails (the API server restarting) is tried again, as a person would, every 3 s for a
// minute.
func (r *runner) resumeRelease(n *simNode, v string) {
	if r.cfg.CanaryNodes == 0 || v == "" {
		return
	}
	r.check.Resumed(v)
	for attempt := 1; ; attempt++ {
		out, err := exec.CommandContext(r.runCtx, r.bin, "resume", "--version", v, "--kubeconfig", r.cp.Kubeconfig, "-n", "slipway-system").CombinedOutput()
		if err == nil {
			r.say("a person resumed release %s after looking at %s: %s", v, n.Name, strings.TrimSpace(string(out)))
			return
		}
		r.say("resume --version %s failed (attempt %d): %v: %s", v, attempt, err, out)
		if attempt == 20 || testenv.WaitCtx(r.runCtx, 3*time.Second) != nil {
			return
		}
	}
}

// watchLost says when the lost machine was granted its last reboot and when it was marked stalled.
func (r *runner) watchLost(n *simNode) {
	granted := false
	for r.runCtx.Err() == nil {
		if !granted && r.check.Annotation(n.Name, referee.KeyRebootOK) == "true" && n.Down() {
			granted = true
			r.say("%s was granted its reboot and is gone", n.Name)
		}
		if v := r.check.Annotation(n.Name, referee.KeyStalled); granted && v != "" {
			r.say("%s marked %s=%s", n.Name, referee.KeyStalled, v)
			release := r.check.Annotation(n.Name, "update.slipway.dev/reboot-version")
			if r.cfg.DeleteLostNode {
				r.deleteLost(n, release)
			}
			r.resumeRelease(n, release)
			return
		}
		_ = testenv.WaitCtx(r.runCtx, 200*time.Millisecond)
	}
}

// pdbRelaxer lets the guarded workload grow from 2 to 3 pods after PDBBlock: one eviction allowed.
func (r *runner) pdbRelaxer(ctx context.Context, _ *rand.Rand) {
	if r.guarded == nil {
		return
	}
	if testenv.WaitCtx(ctx, r.cfg.PDBBlock) != nil {
		return
	}
	r.guarded.replicas.Store(3)
	r.say("PDB guarded relaxed: a third pod lets one eviction through at a time")
}

// fenced counts the operators' logged admissions that the admission fence (deploy/base/fence-policy.yaml)
// refused.
func fenced(logDir string) int {
	logs, _ := filepath.Glob(filepath.Join(logDir, "op-*.log"))
	n := 0
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err == nil {
			n += bytes.Count(b, []byte("slipway-admission-fence: refused"))
		}
	}
	return n
}
