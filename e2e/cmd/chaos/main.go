// Command chaos is `make chaos`: the chaos scenario of package e2e/chaos on a local control plane
// (simulated Flatcar nodes with real agents, two real update-operator processes, faults injected),
// judged by the independent invariant checker. It ends with exactly one line
// `chaos: cycles=N violations=V` followed by one line per violation, and exits non-zero on any
// violation or when fewer cycles than -cycles completed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/e2e/chaos"
)

func main() {
	short := flag.Bool("short", false, "the quick scenario (8 nodes, 30 cycles, every fault at least once)")
	cycles := flag.Int("cycles", 0, "node cycles to complete (default 200; 30 with -short)")
	nodes := flag.Int("nodes", 0, "simulated nodes (default 24; 8 with -short)")
	maxUnavailable := flag.Int("max-unavailable", 0, "the operators' --max-unavailable (default 3)")
	duration := flag.Duration("duration", 0, "cap on the whole run (default 25m; 4m with -short)")
	opMax := flag.Int("operator-max-unavailable", 0, "give the operators this --max-unavailable while the checker keeps -max-unavailable: a deliberately wrong operator, to see the checker catch it")
	opArgs := flag.String("operator-args", "", "extra update-operator flags, space-separated (a flag given again wins), e.g. \"--drain-failure-policy=force --drain-timeout=5s\" to see the checker catch an unsafe drain")
	free := flag.Bool("free-running", false, "every node asks for its next update as soon as it is back (default: updates roll over the fleet as releases, a node at most 2 ahead of the slowest)")
	seed := flag.Uint64("seed", 0, "random seed (default: from the clock; printed)")
	upgradeFrom := flag.String("upgrade-from", "previous", "start with the update-operator and update-agent of this commit and roll both to this tree's build mid-run (\"previous\": the last release tag, or wave 3's main while there is none; \"\": no upgrade)")
	keep := flag.Bool("keep", false, "keep the scratch directory with every log even after a clean run")
	flag.Parse()

	cfg := chaos.Full()
	if *short {
		cfg = chaos.Short()
	}
	if *cycles > 0 {
		cfg.Cycles = *cycles
	}
	if *nodes > 0 {
		cfg.Nodes = *nodes
	}
	if *maxUnavailable > 0 {
		cfg.MaxUnavailable = *maxUnavailable
	}
	if *duration > 0 {
		cfg.Duration = *duration
	}
	cfg.OperatorMaxUnavailable = *opMax
	cfg.FreeRunning = *free
	cfg.OperatorArgs = strings.Fields(*opArgs)
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	cfg.Keep = *keep
	cfg.UpgradeFrom = *upgradeFrom
	cfg.Out = os.Stdout
	fmt.Printf("chaos: %d nodes, budget %d, target %d cycles, cap %s, seed %d\n", cfg.Nodes, cfg.MaxUnavailable, cfg.Cycles, cfg.Duration, cfg.Seed)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: the scenario could not run:", err)
		if res != nil && res.Dir != "" {
			fmt.Fprintln(os.Stderr, "chaos: logs kept in", res.Dir)
		}
		os.Exit(2)
	}
	fmt.Printf("chaos: runtime %s, reboots %d, updates staged %d, faults %v\n", res.Elapsed.Round(100*time.Millisecond), res.Reboots, res.Staged, res.Faults)
	for _, n := range res.Notes {
		fmt.Println("chaos: note:", n)
	}
	if res.Kept {
		fmt.Println("chaos: logs kept in", res.Dir)
	}
	if res.Cycles < cfg.Cycles {
		fmt.Printf("chaos: only %d of %d cycles completed\n", res.Cycles, cfg.Cycles)
	}
	fmt.Printf("chaos: cycles=%d violations=%d\n", res.Cycles, len(res.Violations))
	for _, v := range res.Violations {
		fmt.Println(v)
	}
	if len(res.Violations) > 0 || res.Cycles < cfg.Cycles {
		os.Exit(1)
	}
}
