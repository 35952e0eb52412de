package fleetsim

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"context"
	"fmt"
	"github.com/slipway-dev/slipway/api/v1alpha1"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Config is one fleet size's measurement.
type Config struct {
	Nodes  int           // simulated nodes
	Need   int           // nodes needing a reboot in the rolling run
	K      int           // the operator's --max-unavailable in the rolling run
	Reboot time.Duration // how long each simulated machine is down
	// Settle is the operator's --settle-time in the rolling run (0: none); the ideal counts it once
	// between each wave and the next.
	Settle time.Duration

	// The latency run: LatencyNeed nodes (others than the rolling run's) signalled at once with
	// --max-unavailable=LatencyK, so none waits for the budget. LatencyNeed 0: skipped.
	LatencyNeed, LatencyK int
	// The latency run while nodes are rolling: LatencyNeed background nodes are signalled at once and
	// granted first; while they are in their reboot, LatencyNeed further nodes are signalled one after
	// another, evenly over LatencySpread (less than Reboot), and only those are measured. Budget
	// LatencyK + LatencyNeed, so the background never holds a measured node back (0: skipped). The
	// background's reboots last until every measured node was granted (Sim.Hold), Reboot at least.
	LatencySpread time.Duration

	Idle time.Duration // idle window after the rolling run (0: skipped)
	// CPUProfile is the length of the operator's CPU profile taken from the start of the rolling run
	// (0: none; at most 25 s, the operator's HTTP write timeout). HeapProfile: take one at the end.
	CPUProfile  time.Duration
	HeapProfile bool

	// Policies > 0: that many RebootPolicies over the nodes (PoolLabel, round robin), each with
	// maxUnavailable 100%: what selecting, nesting and publishing pools cost, not a tighter budget.
	Policies int

	OperatorBin string
	// OperatorArgs are appended to the operator's command line (a flag given again wins), e.g.
	// --kube-api-qps=1000 to see what client-side throttling costs.
	OperatorArgs []string
	Dir          string // scratch directory (control plane, operator logs)
	ProfileDir   string // where profiles go (default Dir)
	Workers      int    // simulator workers (default 32)

	Say  func(format string, args ...interface{}) // progress lines (nil: none)
	Logf func(format string, args ...interface{}) // per-node lines, timestamped like Say's (nil: none)
	// ProgressEvery: how often a progress line is printed while waiting (default 10 s).
	ProgressEvery time.Duration
}

// Result is one fleet size's figures; JSON as written to bench-results/fleet.json.
type Result struct {
	Nodes   int     `json:"nodes"`
	Need    int     `json:"need"`
	K       int     `json:"k"`
	RebootS float64 `json:"reboot_s"`

	SetupS           float64 `json:"setup_s"`            // node registration to every agent reported
	OperatorStartS   float64 `json:"operator_start_s"`   // operator start to leading, synced and quiet
	TotalS           float64 `json:"total_s"`            // first signal to the last node done
	IdealS           float64 `json:"ideal_s"`            // ceil(need/k) x reboot, plus the settle between waves
	Ratio            float64 `json:"ratio"`              // total / ideal
	MaxUnavailable   int     `json:"max_unavailable"`    // peak unavailable at one instant, own watch
	RebootsExactOnce bool    `json:"reboots_exact_once"` // every needing node rebooted once, no other node
	Operator         ProcMem `json:"operator_mem"`       // the rolling run's operator, at the end of the idle window
	RSSMiB           float64 `json:"rss_mib"`            // its VmHWM in MiB

	// BenchCPUS is the CPU time this process (simulator and the benchmark's watch) used during the
	// rolling run, to show that the simulator leaves the cores to the API server and the operator.
	BenchCPUS float64 `json:"bench_process_cpu_s_rolling"`

	Requests RequestFigures `json:"requests"`
	Idle     *IdleFigures   `json:"idle,omitempty"`
	Latency  *LatencyRun    `json:"latency,omitempty"`
	// LatencyRolling is the latency run while LatencyNeed other nodes are rolling (Config.LatencySpread).
	LatencyRolling *LatencyRun `json:"latency_rolling,omitempty"`

	Profiles []string `json:"profiles,omitempty"`
	Problems []string `json:"problems,omitempty"` // what went wrong or was not measured
	LogDir   string   `json:"log_dir,omitempty"`
}

// RequestFigures are the rolling run's API requests, first signal to last node done.
type RequestFigures struct {
	// Operator: the operator's own client-go count (slipway_operator_kube_api_requests_total) by
	// method; per cycle = total / need.
	Operator         Requests `json:"operator_by_method"`
	OperatorPerCycle float64  `json:"operator_per_cycle"`
	// APIServer: apiserver_request_total deltas (resource requests) by verb and resource, all clients;
	// Simulator: this process's own count (simulated agents and kubelets, the benchmark's watch).
	APIServer Requests `json:"apiserver_by_resource"`
	Simulator Requests `json:"simulator_by_verb"`
	// OthersPerCycle = (API server total - simulator total) / need: the operator plus the control
	// plane's own background (its leases and endpoints, kube-controller-manager).
	OthersPerCycle float64 `json:"apiserver_minus_simulator_per_cycle"`
	// Writes per cycle by the operator, from the API server's side (mutating requests minus the
	// simulator's, leases and endpoints left out).
	OperatorWritesPerCycle float64  `json:"operator_writes_per_cycle"`
	Throttle               Throttle `json:"operator_client_throttling"`
}

// Throttle is what the operator's client-side rate limiter (--kube-api-qps/--kube-api-burst) cost
// in a run: slipway_operator_kube_api_rate_limiter_wait_seconds.
type Throttle struct {
	Requests int     `json:"requests"`  // requests that passed the limiter
	WaitS    float64 `json:"wait_s"`    // their waits added up
	Waited   int     `json:"waited_1s"` // requests that waited more than 1 s
}

// IdleFigures are the writes in the idle window after the rolling run.
type IdleFigures struct {
	WindowS      float64  `json:"window_s"`
	WritesPerMin float64  `json:"writes_per_min"` // mutating, leases and endpoints left out, simulator's subtracted
	ByResource   Requests `json:"apiserver_writes_by_resource"`
	Simulator    Requests `json:"simulator_by_verb"`
	// SettleS: from the roll's end until the operator had published what the roll left it to write
	// (rollPublished), when the window opened. Unsettled: what it still had not after idleSettleMax
	// (an operator that defers or names things otherwise, fleetbench -operator-rev); "" normally.
	SettleS   float64 `json:"settle_s"`
	Unsettled string  `json:"unsettled,omitempty"`
}

// LatencyRun is a run where Need nodes are signalled at once (SpreadS 0) or evenly over SpreadS
// seconds while Background other nodes are in their cycle.
type LatencyRun struct {
	Need           int     `json:"need"`
	K              int     `json:"k"`
	SpreadS        float64 `json:"spread_s"`
	Background     int     `json:"background"`
	P50ms          float64 `json:"p50_ms"`
	P99ms          float64 `json:"p99_ms"`
	Maxms          float64 `json:"max_ms"`
	TotalS         float64 `json:"total_s"`
	MaxUnavailable int     `json:"max_unavailable"`
	// MinUnavailableAtGrant: the fewest nodes unavailable, itself included, that the benchmark's watch
	// saw as any measured node got reboot-ok. Background+1 or more: every measured node was granted
	// while the whole background was in its cycle, as the latency-rolling run holds it (Sim.Hold).
	MinUnavailableAtGrant int `json:"min_unavailable_at_grant"`
	// BackgroundHeld: background nodes whose reboot lasted longer than Reboot because a measured node
	// was not granted yet (0 on a machine fast enough that the background was still down anyway).
	BackgroundHeld int     `json:"background_held,omitempty"`
	Operator       ProcMem `json:"operator_mem"`
	// The operator's own requests in this run, per cycle, and its client-side throttling.
	OperatorPerCycle float64  `json:"operator_requests_per_cycle"`
	Throttle         Throttle `json:"operator_client_throttling"`
}

// Line is the rolling run in the one-line form `make bench` prints.
func (r *Result) Line() string {
	return fmt.Sprintf("rolling nodes=%d need=%d k=%d total_s=%.1f ideal_s=%.1f ratio=%.2f max_unavailable=%d rss_mib=%.1f",
		r.Nodes, r.Need, r.K, r.TotalS, r.IdealS, r.Ratio, r.MaxUnavailable, r.RSSMiB)
}

// Lines are the other figures of the size, one line each.
func (r *Result) Lines() []string {
	var out []string
	if l := r.Latency; l != nil {
		out = append(out, fmt.Sprintf("latency nodes=%d rolling=%d k=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f total_s=%.1f max_unavailable=%d",
			r.Nodes, l.Need, l.K, l.P50ms, l.P99ms, l.Maxms, l.TotalS, l.MaxUnavailable))
	}
	if l := r.LatencyRolling; l != nil {
		out = append(out, fmt.Sprintf("latency-rolling nodes=%d background=%d asking=%d spread_s=%.1f k=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f total_s=%.1f max_unavailable=%d min_unavailable_at_grant=%d background_held=%d",
			r.Nodes, l.Background, l.Need, l.SpreadS, l.K, l.P50ms, l.P99ms, l.Maxms, l.TotalS, l.MaxUnavailable, l.MinUnavailableAtGrant, l.BackgroundHeld))
	}
	out = append(out, fmt.Sprintf("requests nodes=%d per_cycle_operator=%.1f per_cycle_apiserver_minus_sim=%.1f operator_writes_per_cycle=%.1f",
		r.Nodes, r.Requests.OperatorPerCycle, r.Requests.OthersPerCycle, r.Requests.OperatorWritesPerCycle))
	if i := r.Idle; i != nil {
		out = append(out, fmt.Sprintf("idle nodes=%d window_s=%.1f writes_per_min=%.1f", r.Nodes, i.WindowS, i.WritesPerMin))
	}
	return out
}

// ParseLine reads a line printed by Line (or Lines) into its key=value fields; kind is its first word.
func ParseLine(line string) (kind string, fields map[string]float64, err error) {
	parts := strings.Fields(line)
	if len(parts) < 2 {
		return "", nil, fmt.Errorf("not a result line: %q", line)
	}
	fields = map[string]float64{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return "", nil, fmt.Errorf("%q: %q is not key=value", line, p)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return "", nil, fmt.Errorf("%q: %s: %v", line, k, err)
		}
		fields[k] = f
	}
	return parts[0], fields, nil
}

// Namespace holds the operator's Lease and fleet ConfigMap.
const Namespace = "slipway-system"

type bench struct {
	cfg     Config
	res     *Result
	start   time.Time
	cp      *testenv.ControlPlane
	sim     *Sim
	rec     *Recorder
	phase   string
	phaseM  sync.Mutex
	lastSay time.Time
	mu      sync.Mutex // res.Problems and res.Profiles
	// rollNames, latNames, bgNames and spreadNames are the nodes each run signals.
	rollNames, latNames, bgNames, spreadNames []string
	// progress returns the details of the phase for the progress line.
	progress func() string
}

func (b *bench) say(format string, args ...interface{}) {
	b.phaseM.Lock()
	b.lastSay = time.Now()
	b.phaseM.Unlock()
	if b.cfg.Say != nil {
		b.cfg.Say("[%6.1fs] %d nodes: %s", time.Since(b.start).Seconds(), b.cfg.Nodes, fmt.Sprintf(format, args...))
	}
}

func (b *bench) setPhase(name string, details func() string) {
	b.phaseM.Lock()
	b.phase, b.progress = name, details
	b.phaseM.Unlock()
	b.say("%s", name)
}

func (b *bench) problem(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	b.mu.Lock()
	b.res.Problems = append(b.res.Problems, msg)
	b.mu.Unlock()
	b.say("problem: %s", msg)
}

// Run measures one fleet size on a control plane of its own. An error means the measurement could not
// be made; what the operator did wrong (budget exceeded, a node not rebooted exactly once) is in
// Result.Problems.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Nodes < cfg.Need+LatencySets(cfg.LatencySpread)*cfg.LatencyNeed || cfg.Need < 1 || cfg.K < 1 || cfg.Reboot <= 0 ||
		cfg.LatencySpread < 0 || cfg.LatencySpread >= cfg.Reboot {
		return nil, fmt.Errorf("need nodes >= need + latency need (three times with a spread), need >= 1, k >= 1, reboot > 0, 0 <= spread < reboot (got nodes %d need %d latency need %d spread %s k %d reboot %s)",
			cfg.Nodes, cfg.Need, cfg.LatencyNeed, cfg.LatencySpread, cfg.K, cfg.Reboot)
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 10 * time.Second
	}
	if cfg.ProfileDir == "" {
		cfg.ProfileDir = cfg.Dir
	}
	if cfg.CPUProfile > 25*time.Second {
		cfg.CPUProfile = 25 * time.Second
	}
	b := &bench{cfg: cfg, start: time.Now(), res: &Result{Nodes: cfg.Nodes, Need: cfg.Need, K: cfg.K, RebootS: cfg.Reboot.Seconds(),
		LogDir: filepath.Join(cfg.Dir, "logs")}}
	if err := os.MkdirAll(b.res.LogDir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.ticker(ctx)

	b.setPhase("starting etcd, kube-apiserver, kube-controller-manager", nil)
	cp, err := testenv.StartControlPlane(ctx, filepath.Join(cfg.Dir, "cp"), testenv.Options{ControllerManager: true})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	b.cp = cp
	admin := cp.Client()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var logf func(string, ...interface{})
	if cfg.Logf != nil {
		logf = func(format string, args ...interface{}) {
			cfg.Logf("[%6.1fs]   %s", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	if b.sim, err = NewSim(SimConfig{Rest: cp.RestConfig(), Prefix: "sim", RebootDelay: cfg.Reboot, Workers: cfg.Workers, Logf: logf, Pools: cfg.Policies}); err != nil {
		return nil, err
	}
	if cfg.Policies > 0 {
		if err := createPolicies(ctx, cp, cfg.Policies); err != nil {
			return nil, err
		}
		b.say("%d RebootPolicies over the nodes (label %s, maxUnavailable 100%% each)", cfg.Policies, PoolLabel)
	}
	if err := b.sim.Start(ctx); err != nil {
		return nil, err
	}
	recClient, err := kubernetes.NewForConfig(b.sim.Counter.Config(cp.RestConfig()))
	if err != nil {
		return nil, err
	}
	if b.rec, err = NewRecorder(ctx, recClient); err != nil {
		return nil, err
	}

	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	b.choose()
	if err := b.rolling(ctx); err != nil {
		return b.res, err
	}
	if cfg.LatencyNeed > 0 {
		if b.res.Latency, err = b.latency(ctx, "latency", b.latNames, 0, nil); err != nil {
			return b.res, err
		}
		if cfg.LatencySpread > 0 {
			if b.res.LatencyRolling, err = b.latencyRolling(ctx); err != nil {
				return b.res, err
			}
		}
	}
	b.checkReboots()
	b.setPhase("done", nil)
	return b.res, nil
}

// createPolicies installs the RebootPolicy CRD as the installs ship it and n RebootPolicies p0..p<n-1>.
func createPolicies(ctx context.Context, cp *testenv.ControlPlane, n int) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if err := testenv.InstallCRDs(ctx, cp.RestConfig(), filepath.Join(root, "deploy/base/crd")); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "RebootPolicy",
			"metadata": map[string]interface{}{"name": name},
			"spec": map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{PoolLabel: name}},
				"maxUnavailable": "100%"}}}
		if _, err := dyn.Resource(v1alpha1.Resource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating RebootPolicy %s: %w", name, err)
		}
	}
	return nil
}

func (b *bench) ticker(ctx context.Context) {
	// Quiet: a line only when nothing was said for ProgressEvery.
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.phaseM.Lock()
			phase, details, last := b.phase, b.progress, b.lastSay
			b.phaseM.Unlock()
			if time.Since(last) < b.cfg.ProgressEvery-500*time.Millisecond {
				continue
			}
			if details != nil {
				b.say("%s: %s", phase, details())
			} else {
				b.say("%s", phase)
			}
		}
	}
}

// setup registers the fleet and waits until every agent has reported in its boot.
func (b *bench) setup(ctx context.Context) error {
	var created int64
	var mu sync.Mutex
	b.setPhase(fmt.Sprintf("registering %d nodes", b.cfg.Nodes), func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d registered, %d reported by their agents", created, b.rec.Ready())
	})
	t0 := time.Now()
	if err := b.sim.CreateNodes(ctx, b.cfg.Nodes, 64, func(n int) { mu.Lock(); created = int64(n); mu.Unlock() }); err != nil {
		return err
	}
	deadline := time.Now().Add(2*time.Minute + time.Duration(b.cfg.Nodes)*20*time.Millisecond)
	for b.rec.Ready() < b.cfg.Nodes {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d nodes reported by their agents", b.rec.Ready(), b.cfg.Nodes)
		}
		if err := testenv.WaitCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	b.res.SetupS = time.Since(t0).Seconds()
	b.say("%d nodes registered and reported in %.1fs", b.cfg.Nodes, b.res.SetupS)
	return nil
}

// choose picks the rolling run's nodes spread evenly over the fleet, and the latency run's spread
// evenly over the rest, so no node is signalled twice.
func (b *bench) choose() {
	names := b.sim.Names()
	b.rollNames = spread(names, b.cfg.Need)
	taken := map[string]bool{}
	for _, n := range b.rollNames {
		taken[n] = true
	}
	var rest []string
	for _, n := range names {
		if !taken[n] {
			rest = append(rest, n)
		}
	}
	if b.cfg.LatencyNeed > 0 {
		// With a spread, the rest is dealt out to the three sets (burst, background, asking while
		// the background rolls), each then spread evenly.
		sets := make([][]string, LatencySets(b.cfg.LatencySpread))
		for i, n := range rest {
			sets[i%len(sets)] = append(sets[i%len(sets)], n)
		}
		b.latNames = spread(sets[0], b.cfg.LatencyNeed)
		if len(sets) == 3 {
			b.bgNames, b.spreadNames = spread(sets[1], b.cfg.LatencyNeed), spread(sets[2], b.cfg.LatencyNeed)
		}
	}
}

// LatencySets is how many sets of LatencyNeed nodes the latency runs signal: the burst, and with a
// spread the background and the nodes asking while it rolls.
func LatencySets(spread time.Duration) int {
	if spread > 0 {
		return 3
	}
	return 1
}

func spread(names []string, n int) []string {
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, names[i*len(names)/n])
	}
	return out
}

func (b *bench) startOperator(ctx context.Context, name string, k int) (*operatorProc, error) {
	args := []string{"--kubeconfig=" + b.cp.Kubeconfig, "--namespace=" + Namespace,
		"--lease-name=fleetbench-" + name, "--identity=fleetbench-" + name,
		fmt.Sprintf("--max-unavailable=%d", k)}
	if name == "rolling" && b.cfg.Settle > 0 {
		args = append(args, "--settle-time="+b.cfg.Settle.String())
	}
	args = append(args, b.cfg.OperatorArgs...)
	op, err := startOperator(b.cfg.OperatorBin, filepath.Join(b.res.LogDir, "operator-"+name+".log"), args)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	b.setPhase(fmt.Sprintf("update-operator --max-unavailable=%d starting", k), nil)
	if err := op.waitLeading(ctx, b.cfg.Nodes, 3*time.Minute); err != nil {
		op.stop()
		return nil, err
	}
	if name == "rolling" {
		b.res.OperatorStartS = time.Since(t0).Seconds()
	}
	b.say("update-operator leading, synced and quiet after %.1fs", time.Since(t0).Seconds())
	return op, nil
}

// roll signals names (at once, or one after another evenly over spread) and waits until every one of
// them was granted, rebooted and finished. Background nodes, if any, are signalled at once before, and
// names only once every background node was granted; start is then when names began. The background
// is held in its reboot (Sim.Hold) until every node of names was granted, so it is in its cycle while
// each of them is granted, by construction and not by timing: held is how many of it had to wait.
func (b *bench) roll(ctx context.Context, what string, names []string, op *operatorProc, spread time.Duration, background []string) (start time.Time, held int, err error) {
	all := append(append([]string{}, background...), names...)
	if err := b.sim.Hold(background...); err != nil {
		return time.Now(), 0, err
	}
	holding := len(background) > 0
	defer func() {
		if holding {
			b.sim.Release(background...)
		}
	}()
	b.rec.StartRoll(all)
	b.setPhase(what, func() string {
		granted, done, unavailable, peak := b.rec.Progress()
		return fmt.Sprintf("granted %d, done %d of %d, unavailable now %d, peak %d, reboots %d", granted, done, len(all), unavailable, peak, b.sim.TotalReboots())
	})
	for _, n := range background {
		if err := b.sim.Signal(n); err != nil {
			return time.Now(), 0, err
		}
	}
	for t0 := time.Now(); len(background) > 0; {
		if granted, _, _, _ := b.rec.Progress(); granted == len(background) {
			break
		}
		if err := op.Alive(); err != nil {
			return time.Now(), 0, err
		}
		if time.Since(t0) > 5*time.Minute {
			return time.Now(), 0, fmt.Errorf("%s: the background was not granted within 5 min; operator log %s", what, op.Log())
		}
		if err := testenv.WaitCtx(ctx, 5*time.Millisecond); err != nil {
			return time.Now(), 0, err
		}
	}
	start = time.Now()
	for i, n := range names {
		if spread > 0 {
			if err := testenv.WaitCtx(ctx, time.Until(start.Add(spread*time.Duration(i)/time.Duration(len(names))))); err != nil {
				return start, held, err
			}
		}
		if err := b.sim.Signal(n); err != nil {
			return start, held, err
		}
	}
	ideal := time.Duration(math.Ceil(float64(len(names))/float64(b.cfg.K))) * b.cfg.Reboot
	deadline := start.Add(spread + 10*ideal + 5*time.Minute)
	for {
		granted, done, _, _ := b.rec.Progress()
		if holding && granted == len(all) {
			held, holding = b.sim.Release(background...), false
		}
		if done == len(all) {
			return start, held, nil
		}
		if err := op.Alive(); err != nil {
			return start, held, err
		}
		if time.Now().After(deadline) {
			granted, done, unavailable, _ := b.rec.Progress()
			also := ""
			if holding {
				also = "; the background is held in its reboot until every node is granted"
			}
			return start, held, fmt.Errorf("%s: only %d of %d nodes done after %s (granted %d, unavailable now %d%s); operator log %s",
				what, done, len(all), time.Since(start).Round(time.Second), granted, unavailable, also, op.Log())
		}
		if err := testenv.WaitCtx(ctx, 50*time.Millisecond); err != nil {
			return start, held, err
		}
	}
}

func (b *bench) scrapeAPIServer(ctx context.Context) (Requests, error) {
	fams, err := scrape(ctx, b.cp.URL+"/metrics", b.cp.Token)
	if err != nil {
		return nil, err
	}
	return apiserverRequests(fams)
}

func simRequests(c *Counter) Requests {
	out := Requests{}
	for k, v := range c.Snapshot() {
		out[k] = float64(v)
	}
	return out
}

// rolling is the rolling reboot with --max-unavailable=K, then the idle window and the profiles.
func (b *bench) rolling(ctx context.Context) error {
	op, err := b.startOperator(ctx, "rolling", b.cfg.K)
	if err != nil {
		return err
	}
	defer op.stop()
	names := b.rollNames
	opFams, err := scrape(ctx, op.url("/metrics"), "")
	if err != nil {
		return err
	}
	opBefore := clientRequests(opFams, "slipway_operator_kube_api_requests_total")
	thBefore := throttle(opFams)
	apiBefore, err := b.scrapeAPIServer(ctx)
	if err != nil {
		return err
	}
	simBefore := simRequests(b.sim.Counter)
	cyclesBefore, err := b.publishedCycles(ctx)
	if err != nil {
		return err
	}

	profWG := b.cpuProfile(ctx, op, fmt.Sprintf("cpu-%d.pb.gz", b.cfg.Nodes), b.cfg.CPUProfile)
	cpu0 := processCPU()
	start, _, err := b.roll(ctx, fmt.Sprintf("rolling reboot of %d nodes, --max-unavailable=%d", len(names), b.cfg.K), names, op, 0, nil)
	if err != nil {
		return err
	}
	b.res.BenchCPUS = processCPU() - cpu0
	tracks, last := b.rec.Roll()
	simAfter := simRequests(b.sim.Counter)
	apiAfter, err := b.scrapeAPIServer(ctx)
	if err != nil {
		return err
	}
	if opFams, err = scrape(ctx, op.url("/metrics"), ""); err != nil {
		return err
	}
	opAfter := clientRequests(opFams, "slipway_operator_kube_api_requests_total")
	thAfter := throttle(opFams)

	r := b.res
	r.TotalS = last.Sub(start).Seconds()
	waves := math.Ceil(float64(b.cfg.Need) / float64(b.cfg.K))
	r.IdealS = waves*b.cfg.Reboot.Seconds() + (waves-1)*b.cfg.Settle.Seconds()
	r.Ratio = r.TotalS / r.IdealS
	_, _, _, r.MaxUnavailable = b.rec.Progress()
	if r.MaxUnavailable > b.cfg.K {
		b.problem("rolling run: %d nodes unavailable at one instant, budget %d", r.MaxUnavailable, b.cfg.K)
	}
	for n, t := range tracks {
		if t.OKCount != 1 {
			b.problem("rolling run: %s got reboot-ok %d times", n, t.OKCount)
		}
	}
	need := float64(b.cfg.Need)
	rq := &r.Requests
	rq.Operator = opAfter.Sub(opBefore)
	rq.OperatorPerCycle = rq.Operator.Total(nil) / need
	rq.APIServer = apiAfter.Sub(apiBefore)
	rq.Simulator = simAfter.Sub(simBefore)
	rq.OthersPerCycle = (rq.APIServer.Total(nil) - rq.Simulator.Total(nil)) / need
	simWrites := rq.Simulator["PATCH"] + rq.Simulator["POST"] + rq.Simulator["PUT"] + rq.Simulator["DELETE"]
	rq.OperatorWritesPerCycle = (rq.APIServer.Total(func(k string) bool { return Mutating(k) && NotBookkeeping(k) }) - simWrites) / need
	rq.Throttle = thAfter.sub(thBefore)
	b.say("rolling reboot done in %.1fs (ideal %.1fs), peak unavailable %d; %.1f operator requests per cycle", r.TotalS, r.IdealS, r.MaxUnavailable, rq.OperatorPerCycle)
	profWG.Wait()

	if b.cfg.Idle > 0 {
		if err := b.idle(ctx, op, cyclesBefore, last); err != nil {
			return err
		}
	}
	// Memory before the heap profile: serving a profile symbolizes every allocation site, which maps
	// much of the binary's symbol tables (pclntab) -- the profiler's footprint, not the operator's.
	if err := op.Alive(); err != nil {
		return err
	}
	if r.Operator, err = procMem(op.Pid()); err != nil {
		return err
	}
	r.RSSMiB = float64(r.Operator.HWMKiB) / 1024
	if b.cfg.HeapProfile {
		file := filepath.Join(b.cfg.ProfileDir, fmt.Sprintf("heap-%d.pb.gz", b.cfg.Nodes))
		if err := op.fetch(ctx, "/debug/pprof/heap?gc=1", file); err != nil {
			b.problem("heap profile: %v", err)
		} else {
			b.mu.Lock()
			r.Profiles = append(r.Profiles, file)
			b.mu.Unlock()
		}
	}
	return op.Alive()
}

// idle counts the writes in a window after the roll, with no node needing a reboot. The window opens
// once the operator has published what the roll left it to write (rollPublished), known by what is
// stored, not after a pause: a pause a slow machine outlasts, and the operator defers some of it by
// design, up to fleetLazyEvery, which a window opened earlier would count as idle writes.
func (b *bench) idle(ctx context.Context, op *operatorProc, cyclesBefore int, lastDone time.Time) error {
	var mu sync.Mutex
	missing := "?"
	b.setPhase(fmt.Sprintf("idle: waiting until the operator has published the roll, then counting writes for %s", b.cfg.Idle), func() string {
		mu.Lock()
		defer mu.Unlock()
		return "not yet published: " + missing
	})
	s0 := time.Now()
	for {
		m, err := b.rollPublished(ctx, cyclesBefore, lastDone)
		if err != nil {
			return err
		}
		mu.Lock()
		missing = m
		mu.Unlock()
		if m == "" || time.Since(s0) > idleSettleMax {
			break
		}
		if err := op.Alive(); err != nil {
			return err
		}
		if err := testenv.WaitCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	settleS := time.Since(lastDone).Seconds()
	if missing != "" {
		b.setPhase(fmt.Sprintf("idle: after %s the operator still has not published %s; counting writes for %s anyway", idleSettleMax, missing, b.cfg.Idle), nil)
	} else {
		b.setPhase(fmt.Sprintf("idle: the operator published the roll %.1fs after it ended; counting writes for %s", settleS, b.cfg.Idle), nil)
	}
	// The window runs from the start of one scrape to the start of the next: the API server reads
	// its counters at about the same point of each.
	t0 := time.Now()
	before, err := b.scrapeAPIServer(ctx)
	if err != nil {
		return err
	}
	simBefore := simRequests(b.sim.Counter)
	if err := testenv.WaitCtx(ctx, t0.Add(b.cfg.Idle).Sub(time.Now())); err != nil {
		return err
	}
	window := time.Since(t0)
	after, err := b.scrapeAPIServer(ctx)
	if err != nil {
		return err
	}
	sim := simRequests(b.sim.Counter).Sub(simBefore)
	writes := Requests{}
	for k, v := range after.Sub(before) {
		if Mutating(k) {
			writes[k] = v
		}
	}
	simWrites := sim["PATCH"] + sim["POST"] + sim["PUT"] + sim["DELETE"]
	n := writes.Total(NotBookkeeping) - simWrites
	b.res.Idle = &IdleFigures{WindowS: window.Seconds(), WritesPerMin: n / window.Minutes(), ByResource: writes, Simulator: sim,
		SettleS: settleS, Unsettled: missing}
	b.say("idle: %.1f writes/min (%s)", b.res.Idle.WritesPerMin, describe(writes))
	return op.Alive()
}

// fleetLazyEvery is the operator's operator.DefaultFleetLazyEvery: how long it may defer news only the
// status view reads (the cycle durations in the fleet Status, the proofs in the fleet record).
const fleetLazyEvery = 30 * time.Second

// idleSettleMax bounds the wait for rollPublished: what the operator defers is due fleetLazyEvery
// after the roll's first cycle finished, at the latest.
const idleSettleMax = fleetLazyEvery + 90*time.Second

// rollPublished is what the operator has not yet stored of the rolling run ("" once all is): the
// RebootCompleted Event of every node (a node's Events are posted in order, after the PATCH they tell
// of, so the last of its cycle says the others are stored), its proof in the fleet record, and the
// cycle durations in the fleet Status. The operator defers the last two, up to fleetLazyEvery after
// the first cycle finished, then writes both in one fleet sync, the record first. With more cycles
// than the Status keeps (fleetswitch.MaxCycleSamples; fleetbench sizes, never the test's) its length
// tells nothing, and fleetLazyEvery after the last node was done stands in for it.
func (b *bench) rollPublished(ctx context.Context, cyclesBefore int, lastDone time.Time) (string, error) {
	c := b.cp.Client()
	names := b.rollNames
	count := func(in map[string]bool) int {
		n := 0
		for _, name := range names {
			if in[name] {
				n++
			}
		}
		return n
	}
	var missing []string
	evs, err := c.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=RebootCompleted"})
	if err != nil {
		return "", err
	}
	completed := map[string]bool{}
	for _, e := range evs.Items {
		completed[e.InvolvedObject.Name] = true
	}
	if n := count(completed); n < len(names) {
		missing = append(missing, fmt.Sprintf("the RebootCompleted Events of %d nodes", len(names)-n))
	}
	proved := map[string]bool{}
	cm, err := c.CoreV1().ConfigMaps(Namespace).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
	switch {
	case err == nil:
		rec, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
		if err != nil {
			return "", fmt.Errorf("the fleet record: %w", err)
		}
		for _, p := range rec.Proofs {
			proved[p.Node] = true
		}
	case !apierrors.IsNotFound(err):
		return "", err
	}
	if n, want := count(proved), min(len(names), fleetrecord.MaxProofs); n < want {
		missing = append(missing, fmt.Sprintf("the proofs of %d nodes in the fleet record", want-n))
	}
	cycles, err := b.publishedCycles(ctx)
	if err != nil {
		return "", err
	}
	if want := cyclesBefore + len(names); want <= fleetswitch.MaxCycleSamples {
		if cycles < want {
			missing = append(missing, fmt.Sprintf("%d cycle durations in the fleet Status", want-cycles))
		}
	} else if wait := fleetLazyEvery - time.Since(lastDone); wait > 0 {
		missing = append(missing, fmt.Sprintf("the cycle durations in the fleet Status (%s more)", wait.Round(time.Second)))
	}
	return strings.Join(missing, ", "), nil
}

// publishedCycles is how many cycle durations the fleet Status the operator published holds.
func (b *bench) publishedCycles(ctx context.Context) (int, error) {
	cm, err := b.cp.Client().CoreV1().ConfigMaps(Namespace).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, _ := fleetswitch.ReadStatus(cm)
	return len(st.CycleSeconds), nil
}

func describe(r Requests) string {
	if len(r) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, r[k]))
	}
	return strings.Join(parts, ", ")
}

// latencyRolling measures signal→reboot-ok for LatencyNeed nodes asking one by one over
// LatencySpread while LatencyNeed background nodes are in their cycle (granted, rebooting).
// cpuProfile fetches a CPU profile of the operator lasting d (none when d is 0) into file in the
// profile directory; wait on the result for it to land.
func (b *bench) cpuProfile(ctx context.Context, op *operatorProc, file string, d time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	if d <= 0 {
		return &wg
	}
	file = filepath.Join(b.cfg.ProfileDir, file)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := op.fetch(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(d/time.Second), 1)), file); err != nil {
			b.problem("CPU profile: %v", err)
			return
		}
		b.mu.Lock()
		b.res.Profiles = append(b.res.Profiles, file)
		b.mu.Unlock()
	}()
	return &wg
}

func (b *bench) latencyRolling(ctx context.Context) (*LatencyRun, error) {
	return b.latency(ctx, "latency-rolling", b.spreadNames, b.cfg.LatencySpread, b.bgNames)
}

// latency signals names (at once, or evenly over spread, after background) with a budget that holds
// none of them back, and measures, per node of names, signal to reboot-ok=true as the recorder's
// watch delivered it. Each run has an operator of its own (name is its lease and log).
func (b *bench) latency(ctx context.Context, name string, names []string, spread time.Duration, background []string) (*LatencyRun, error) {
	k := b.cfg.LatencyK + len(background)
	op, err := b.startOperator(ctx, name, k)
	if err != nil {
		return nil, err
	}
	defer op.stop()
	fams, err := scrape(ctx, op.url("/metrics"), "")
	if err != nil {
		return nil, err
	}
	opBefore, thBefore := clientRequests(fams, "slipway_operator_kube_api_requests_total"), throttle(fams)
	what := fmt.Sprintf("%s: %d nodes rolling at once, --max-unavailable=%d", name, len(names), k)
	if spread > 0 {
		what = fmt.Sprintf("%s: %d nodes rolling, then %d more signalled one by one over %s, --max-unavailable=%d", name, len(background), len(names), spread, k)
	}
	// The run lasts a few seconds (about -reboot plus the drains): profiled for -reboot plus 2 s.
	prof := b.cpuProfile(ctx, op, fmt.Sprintf("cpu-%d-%s.pb.gz", b.cfg.Nodes, name), min(b.cfg.CPUProfile, b.cfg.Reboot+2*time.Second))
	start, held, err := b.roll(ctx, what, names, op, spread, background)
	prof.Wait()
	if err != nil {
		return nil, err
	}
	if fams, err = scrape(ctx, op.url("/metrics"), ""); err != nil {
		return nil, err
	}
	tracks, last := b.rec.Roll()
	for _, n := range background {
		if t := tracks[n]; t.OKCount != 1 {
			b.problem("%s run: background node %s got reboot-ok %d times", name, n, t.OKCount)
		}
	}
	var lat []time.Duration
	minAt := 0
	for i, n := range names {
		t := tracks[n]
		if t.OKCount != 1 {
			b.problem("%s run: %s got reboot-ok %d times", name, n, t.OKCount)
		}
		lat = append(lat, t.OKAt.Sub(b.sim.SignalledAt(n)))
		if i == 0 || t.UnavailableAtOK < minAt {
			minAt = t.UnavailableAtOK
		}
	}
	l := &LatencyRun{Need: len(names), K: k, SpreadS: spread.Seconds(), Background: len(background), TotalS: last.Sub(start).Seconds(),
		P50ms: ms(percentile(lat, 0.50)), P99ms: ms(percentile(lat, 0.99)), Maxms: ms(percentile(lat, 1)),
		MinUnavailableAtGrant: minAt, BackgroundHeld: held}
	_, _, _, l.MaxUnavailable = b.rec.Progress()
	l.OperatorPerCycle = clientRequests(fams, "slipway_operator_kube_api_requests_total").Sub(opBefore).Total(nil) / float64(len(names)+len(background))
	l.Throttle = throttle(fams).sub(thBefore)
	if l.MaxUnavailable > k {
		b.problem("%s run: %d nodes unavailable at one instant, budget %d", name, l.MaxUnavailable, k)
	}
	if l.Operator, err = procMem(op.Pid()); err != nil {
		return nil, err
	}
	return l, nil
}

// processCPU is the CPU time (user + system) this process used so far, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile is the nearest-rank percentile (p in (0,1]).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// checkReboots: every node signalled rebooted exactly once, every other node never.
func (b *bench) checkReboots() {
	want := map[string]bool{}
	for _, n := range append(append(append(append([]string{}, b.rollNames...), b.latNames...), b.bgNames...), b.spreadNames...) {
		want[n] = true
	}
	ok := true
	for _, n := range b.sim.Names() {
		exp := 0
		if want[n] {
			exp = 1
		}
		if got := b.sim.Reboots(n); got != exp {
			ok = false
			b.problem("%s rebooted %d times, want %d", n, got, exp)
		}
	}
	b.res.RebootsExactOnce = ok
}
