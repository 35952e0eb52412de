// Package e2e holds Slipway's end-to-end suites (sigs.k8s.io/e2e-framework). They run against:
//
//	E2E_PROVIDER=local (default)  the local QEMU cluster of e2e/harness: real VMs that really reboot
//	E2E_PROVIDER=kind             a kind cluster: skipped with a message where no Docker engine answers
//	E2E_PROVIDER=kubeconfig       any cluster with Slipway installed, E2E_KUBECONFIG=path (e.g. Flatcar
//	                              from terraform/); checks that need a shell in the VM are skipped
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/slipway-dev/slipway/e2e/harness"
)

var (
	testEnv    env.Environment
	cluster    *harness.Cluster // the local QEMU cluster, nil for other providers
	skipReason string
	timeline   *harness.Timeline
	image      = envOr("E2E_IMAGE", "docker.io/library/slipway:e2e")
	hookImage  = envOr("E2E_HOOK_IMAGE", "docker.io/library/slipway-e2e-hook:e2e")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	cfg := envconf.New()
	testEnv = env.NewWithConfig(cfg)
	provider := envOr("E2E_PROVIDER", "local")
	if os.Getenv("SLIPWAY_E2E") != "1" {
		// `go test ./...` must stay quick: VMs boot only when asked for (make e2e sets this).
		skipReason = "e2e suites run only with SLIPWAY_E2E=1 (make e2e)"
		provider = "none"
	}
	switch provider {
	case "none":
	case "local":
		for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "mmdebstrap", "mkfs.ext4"} {
			if _, err := exec.LookPath(tool); err != nil {
				skipReason = fmt.Sprintf("local provider: %s missing; run hack/install-e2e-deps.sh (or make e2e, which does)", tool)
			}
		}
		if skipReason == "" {
			testEnv.Setup(upLocal)
			testEnv.AfterEachTest(restoreAfterFailure)
			testEnv.Finish(downLocal)
		}
	case "kind":
		if err := exec.Command("docker", "info").Run(); err != nil {
			skipReason = "E2E_PROVIDER=kind needs a Docker engine and none answers here (`docker info` fails); kind nodes also cannot really reboot, so only the local QEMU provider proves reboots"
		} else {
			skipReason = "E2E_PROVIDER=kind: kind nodes have no update_engine or logind to reboot through; use the local QEMU provider or a real Flatcar cluster (E2E_PROVIDER=kubeconfig)"
		}
	case "kubeconfig":
		kc := os.Getenv("E2E_KUBECONFIG")
		if kc == "" {
			skipReason = "E2E_PROVIDER=kubeconfig needs E2E_KUBECONFIG=path to a cluster with Slipway installed"
		} else {
			cfg.WithKubeconfigFile(kc)
			testEnv.Setup(startTimeline)
			testEnv.Finish(printTimeline)
		}
	default:
		skipReason = fmt.Sprintf("unknown E2E_PROVIDER %q (local, kind or kubeconfig)", provider)
	}
	if skipReason != "" {
		fmt.Println("e2e: skipping:", skipReason)
	}
	os.Exit(testEnv.Run(m))
}

func upLocal(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		root, _ := filepath.Abs("..")
		dir = filepath.Join(root, "e2e-artifacts", time.Now().UTC().Format("20060102-150405"))
	}
	// Two nodes prove every scenario (budget 1 with a second node queued behind it; the PDB's pod
	// moving to the other node; one node fired through AttemptUpdate, one locksmithctl-style). On two
	// cores under TCG a third VM slows every guest by a third and adds a reboot that proves nothing
	// new: E2E_NODES=3 for a bigger run.
	nodes := 2
	if v := os.Getenv("E2E_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			return ctx, fmt.Errorf("E2E_NODES=%q: want a number of nodes, at least 2 (the scenarios fire one node through AttemptUpdate and another locksmithctl-style)", v)
		}
		nodes = n
	}
	fmt.Printf("e2e: local QEMU cluster of %d nodes; artifacts (serial consoles, operator log, timeline) in %s\n", nodes, dir)
	c, err := harness.Up(ctx, harness.Config{Nodes: nodes, Dir: dir, Log: func(f string, a ...interface{}) { fmt.Printf("e2e: "+f+"\n", a...) }})
	if err != nil {
		return ctx, err
	}
	cluster = c
	cfg.WithKubeconfigFile(c.Kubeconfig)
	if err := c.StartOperator(); err != nil {
		return ctx, err
	}
	return startTimeline(ctx, cfg)
}

func downLocal(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	ctx, err := printTimeline(ctx, cfg)
	if cluster != nil {
		_ = os.WriteFile(filepath.Join(cluster.Dir, "timeline.txt"), []byte(timeline.String()), 0o644)
		cluster.Down()
	}
	return ctx, err
}

func startTimeline(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	c, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	timeline, err = harness.WatchTimeline(context.Background(), c)
	return ctx, err
}

func printTimeline(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if timeline != nil {
		timeline.Stop()
		fmt.Printf("\ne2e: per-node timeline (seconds after each node's signal)\n%s\n", timeline)
	}
	return ctx, nil
}
