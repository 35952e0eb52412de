// Command fleetbench is `make bench-fleet` (and the second half of `make bench`): for each fleet size,
// a real control plane, that many simulated Flatcar nodes (package e2e/fleetsim: the agent's protocol
// and a kubelet's boot ID, in this one process) and a real update-operator process built from this
// repository. It measures a rolling reboot (-need nodes, --max-unavailable=-k, -reboot each), the
// signal→reboot-ok latency with -latency-need nodes signalled at once and, separately, with as many
// signalled one by one over -latency-spread while -latency-need others are rolling, API requests per node cycle,
// idle writes per minute, and the operator's memory, and prints one line per size:
//
//	rolling nodes=N need=M k=K total_s=T ideal_s=I ratio=R max_unavailable=U rss_mib=S
//
// followed by its latency, latency-rolling, requests and idle lines. Everything, with the operator's pprof profiles,
// goes to -out (bench-results/fleet.json, heap-N.pb.gz, heap-N.top.txt, and with -cpu-profile cpu-N.pb.gz). It exits 1 when
// a budget was exceeded or a node did not reboot exactly once.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/e2e/fleetsim"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Report is bench-results/fleet.json.
type Report struct {
	Started        time.Time          `json:"started"`
	WallS          float64            `json:"wall_s"`
	Machine        Machine            `json:"machine"`
	OperatorCommit string             `json:"operator_commit"`
	Args           []string           `json:"args"`
	Results        []*fleetsim.Result `json:"results"`
}

// Machine says what the figures were measured on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
}

func main() { os.Exit(run()) }

func run() int {
	sizes := flag.String("nodes", "1000,5000", "fleet sizes, comma-separated; each runs on a fresh control plane")
	need := flag.Int("need", 100, "nodes needing a reboot in the rolling run")
	k := flag.Int("k", 10, "the operator's --max-unavailable in the rolling run")
	reboot := flag.Duration("reboot", 5*time.Second, "how long each simulated reboot takes")
	settle := flag.Duration("settle", 0, "the operator's --settle-time in the rolling run; the ideal adds it between waves")
	latNeed := flag.Int("latency-need", 100, "nodes signalled at once in the latency run, and the size of each set of the latency-rolling run (0: skip both)")
	latK := flag.Int("latency-k", 100, "the operator's --max-unavailable in the latency run (the latency-rolling run adds -latency-need for its background)")
	latSpread := flag.Duration("latency-spread", 3*time.Second, "the latency-rolling run: -latency-need nodes rolling, then -latency-need more signalled one by one over this long, less than -reboot (0: skip it)")
	idle := flag.Duration("idle", time.Minute, "idle window after the rolling run in which writes are counted (0: skip)")
	cpu := flag.Duration("cpu-profile", 0, "CPU profile of the operator from the start of the rolling run (at most 25s; 0: none). It maps much of the binary's symbol tables into the operator, so rss_mib then holds the profiler's footprint (~8 MiB): the memory figure is measured unprofiled by default. When set, each latency run is profiled too, for -reboot plus 2s")
	out := flag.String("out", "", "directory for fleet.json and the profiles (default <repo>/bench-results)")
	policies := flag.Int("policies", 0, "RebootPolicies over the nodes (each maxUnavailable 100%): what pools cost; 0 none")
	opArgs := flag.String("operator-args", "", "extra update-operator flags, space-separated (a flag given again wins), e.g. \"--kube-api-qps=1000 --kube-api-burst=2000\"")
	rev := flag.String("operator-rev", "", "build the operator from this commit (git archive) instead of the working tree, e.g. HEAD")
	keep := flag.Bool("keep", false, "keep the scratch directory (control-plane and operator logs) after a clean run")
	verbose := flag.Bool("v", false, "print a line for every simulated node event")
	flag.Parse()

	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleetbench: -nodes %q: want positive counts separated by commas\n", *sizes)
			return 2
		}
		ns = append(ns, n)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		return 2
	}
	if *out == "" {
		*out = filepath.Join(root, "bench-results")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		return 2
	}
	scratch, err := os.MkdirTemp("", "slipway-fleetbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		return 2
	}
	start := time.Now()
	say := func(format string, args ...interface{}) { fmt.Printf(format+"\n", args...) }

	// client-go logs through klog; in this process that goes to a file, never to the terminal.
	klogFile, err := os.Create(filepath.Join(scratch, "fleetbench-klog.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		return 2
	}
	defer klogFile.Close()
	testenv.KlogTo(klogFile)
	defer testenv.KlogTo(io.Discard)

	if os.Getenv("SLIPWAY_CONTROLPLANE_DIR") == "" {
		if d, ok := testenv.ControlPlaneBinaries(); ok && d != "" {
			os.Setenv("SLIPWAY_CONTROLPLANE_DIR", d)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	say("fleetbench: building update-operator (%s)", map[bool]string{true: "working tree", false: "commit " + *rev}[*rev == ""])
	op, err := operatorproc.Build(ctx, filepath.Join(scratch, "bin"), *rev)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		return 2
	}
	rep := &Report{Started: start.UTC(), Machine: machine(), OperatorCommit: op.Commit, Args: os.Args[1:]}
	say("fleetbench: operator %s; sizes %v, need %d, k %d, reboot %s; scratch %s", op.Commit, ns, *need, *k, *reboot, scratch)

	failed := false
	for _, n := range ns {
		ln, runs := *latNeed, fleetsim.LatencySets(*latSpread)
		if n < *need+runs*ln {
			// A small fleet: the latency runs share the nodes the rolling run leaves.
			ln = max(n-*need, 0) / runs
			say("fleetbench: %d nodes: each latency run signals %d nodes (the rest of the fleet)", n, ln)
		}
		cfg := fleetsim.Config{Nodes: n, Need: *need, K: *k, Reboot: *reboot, Settle: *settle, LatencyNeed: ln, LatencyK: max(*latK, 1), LatencySpread: *latSpread,
			Idle: *idle, CPUProfile: *cpu, HeapProfile: true, OperatorBin: op.Path, OperatorArgs: strings.Fields(*opArgs), Policies: *policies,
			Dir: filepath.Join(scratch, strconv.Itoa(n)), ProfileDir: *out, Say: say}
		if *verbose {
			cfg.Logf = say
		}
		res, err := fleetsim.Run(ctx, cfg)
		if res != nil {
			rep.Results = append(rep.Results, res)
			for _, p := range res.Profiles {
				if strings.Contains(filepath.Base(p), "heap-") {
					topHeap(p)
				}
			}
			if len(res.Problems) > 0 {
				failed = true
			}
		}
		rep.WallS = time.Since(start).Seconds()
		writeReport(filepath.Join(*out, "fleet.json"), rep)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleetbench: %d nodes: %v\nfleetbench: logs kept in %s\n", n, err, scratch)
			return 2
		}
	}
	for _, r := range rep.Results {
		fmt.Println(r.Line())
	}
	for _, r := range rep.Results {
		for _, l := range r.Lines() {
			fmt.Println(l)
		}
		for _, p := range r.Problems {
			fmt.Printf("problem nodes=%d: %s\n", r.Nodes, p)
		}
	}
	fmt.Printf("fleetbench: wall %s; results in %s\n", time.Since(start).Round(time.Second), filepath.Join(*out, "fleet.json"))
	if failed || *keep {
		fmt.Println("fleetbench: logs kept in", scratch)
	} else {
		_ = os.RemoveAll(scratch)
	}
	if failed {
		return 1
	}
	return 0
}

func writeReport(path string, rep *Report) {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench: writing", path+":", err)
	}
}

// topHeap writes the ten largest in-use allocation sites of a heap profile beside it (.top.txt).
func topHeap(profile string) {
	txt := strings.TrimSuffix(profile, ".pb.gz") + ".top.txt"
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=10", "-sample_index=inuse_space", profile).CombinedOutput()
	if err != nil {
		out = append(out, []byte("\ngo tool pprof failed: "+err.Error()+"\n")...)
	}
	_ = os.WriteFile(txt, out, 0o644)
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}
