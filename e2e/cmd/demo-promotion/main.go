// Command demo-promotion is `make demo-promotion`: promotion from staging to production, shown to a
// person in under two minutes. Two real control planes on loopback (staging and production), each
// with the real update-operator and simulated Flatcar nodes (dbus-daemon, update_engine and logind
// stand-ins, the real update-agent), and a real Prometheus scraping staging's operator with the label
// cluster="staging". Production's operator requires staging's proof of a version and a soak
// (--require-proof-selector, --require-proof-soak). Production's nodes stage the new version first and
// wait; staging rolls it; production waits out the soak, then rolls. It prints the timeline and exits
// 0 when production's first admission came no earlier than staging's proof plus the soak.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/operator/blocker"
)

var start = time.Now()

func say(format string, args ...interface{}) {
	fmt.Printf("[%6.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	soak := flag.Duration("soak", 10*time.Second, "production's --require-proof-soak")
	timeout := flag.Duration("timeout", 4*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*soak, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "demo-promotion failed:", err)
		os.Exit(1)
	}
}

const version = "4600.1.0"

// cluster is one side: its control plane, nodes and operator.
type cluster struct {
	name   string
	cp     *testenv.ControlPlane
	client kubernetes.Interface
	nodes  []*simnode.Node
	op     *operatorproc.Proc
}

func run(soak, timeout time.Duration) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	defer cancelTimeout()
	dir, err := os.MkdirTemp("", "slipway-demo-promotion-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "slipway.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	testenv.KlogTo(logFile)

	say("building update-operator from this tree (go build: ~1 min the first time, then from Go's cache)")
	bin, err := operatorproc.Build(ctx, filepath.Join(dir, "bin"), "")
	if err != nil {
		return err
	}
	stagingPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	var prom *testenv.Prometheus
	defer func() {
		if prom != nil {
			prom.Stop()
		}
	}()
	var clusters []*cluster
	for _, name := range []string{"staging", "production"} {
		say("%s: starting etcd and kube-apiserver, 2 simulated Flatcar nodes", name)
		c := &cluster{name: name}
		if c.cp, err = testenv.StartControlPlane(ctx, filepath.Join(dir, name), testenv.Options{}); err != nil {
			return err
		}
		defer c.cp.Stop()
		c.client = c.cp.Client()
		for i := 0; i < 2; i++ {
			sn, err := simnode.New(ctx, fmt.Sprintf("%s-%d", name, i), simnode.Options{Client: c.client, Dir: filepath.Join(dir, name+"-node", fmt.Sprint(i)),
				Log: klog.Background(), RebootDelay: time.Second})
			if err != nil {
				return err
			}
			defer sn.Stop()
			c.nodes = append(c.nodes, sn)
		}
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slipway-system"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		args := []string{"--kubeconfig=" + c.cp.Kubeconfig, "--namespace=slipway-system", "--identity=" + name + "-operator",
			"--max-unavailable=1", "--drain-timeout=1m", "--drain-retry-base=1s", "--drain-retry-max=5s"}
		if name == "staging" {
			args = append(args, fmt.Sprintf("--http-address=127.0.0.1:%d", stagingPort))
			if err := os.MkdirAll(filepath.Join(dir, "prometheus"), 0o755); err != nil {
				return err
			}
			if prom, err = testenv.StartPrometheusWith(filepath.Join(dir, "prometheus"), testenv.PrometheusConfig{
				Targets: []testenv.ScrapeTarget{{Job: "slipway", Address: fmt.Sprintf("127.0.0.1:%d", stagingPort), Labels: map[string]string{"cluster": "staging"}}}}); err != nil {
				if errors.Is(err, testenv.ErrNoPrometheus) {
					return fmt.Errorf("%w: make demo-promotion installs it (make deps)", err)
				}
				return err
			}
			say("a real Prometheus (%s) scrapes staging's operator every second, with the label cluster=\"staging\"", prom.URL)
		} else {
			args = append(args, "--http-address=", "--proof-url="+prom.URL, `--require-proof-selector=cluster="staging"`,
				"--require-proof-min-cycles=2", "--require-proof-soak="+soak.String())
		}
		if c.op, err = operatorproc.Start(bin.Path, args, logPath); err != nil {
			return err
		}
		defer c.op.Stop(10 * time.Second)
		say("%s: update-operator running %v", name, args[1:])
		clusters = append(clusters, c)
	}
	staging, prod := clusters[0], clusters[1]

	say("production's nodes stage %s first (update_engine says UPDATE_STATUS_UPDATED_NEED_REBOOT)", version)
	for _, sn := range prod.nodes {
		if err := sn.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: version}); err != nil {
			return err
		}
	}
	if _, _, err := waitAll(ctx, prod, "held for the proof", func(n *corev1.Node) bool { return n.Annotations[protocol.BlockedBy] != "" }); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	say("staging's nodes stage %s; staging rolls it one node at a time", version)
	for _, sn := range staging.nodes {
		if err := sn.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: version}); err != nil {
			return err
		}
	}
	_, _, err = waitAll(ctx, staging, "rebooted into "+version, func(n *corev1.Node) bool {
		return n.Labels[protocol.Version] == version && n.Annotations[protocol.RebootNeeded] == protocol.False && !n.Spec.Unschedulable
	})
	if err != nil {
		return err
	}
	say("staging: both nodes on %s (production requires 2 finished cycles there, then the soak from the moment it was proven)", version)
	admitted, _, err := waitAll(ctx, prod, "admitted", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != "" || n.Labels[protocol.Version] == version
	})
	if err != nil {
		return err
	}
	if _, _, err := waitAll(ctx, prod, "rebooted into "+version, func(n *corev1.Node) bool {
		return n.Labels[protocol.Version] == version && n.Annotations[protocol.RebootNeeded] == protocol.False && !n.Spec.Unschedulable
	}); err != nil {
		return err
	}
	// When staging proved it, as production's gate reads it (whole seconds).
	src, err := blocker.NewProofSource(blocker.ProofSourceConfig{URL: prom.URL})
	if err != nil {
		return err
	}
	series, err := src.Series(ctx, version, `cluster="staging"`)
	if err != nil || len(series) != 1 || series[0].ProvenSince.IsZero() {
		return fmt.Errorf("staging's proof of %s as Prometheus has it: %+v, %v", version, series, err)
	}
	provenAt := series[0].ProvenSince
	say("timeline: staging proved %s at %s (slipway_version_proven_since_seconds); soak %s; production's first node admitted %s (%.1fs after)", version,
		provenAt.Local().Format("15:04:05"), soak, admitted.Format("15:04:05.0"), admitted.Sub(provenAt).Seconds())
	if admitted.Add(time.Second).Before(provenAt.Add(soak)) {
		return fmt.Errorf("production was admitted before staging's proof plus the soak")
	}
	say("done: production rebooted into %s only after staging proved it and it soaked", version)
	return nil
}

// waitAll watches c's nodes (polling every 200 ms), prints every change of blocked-by, and returns
// when cond held for all of them: the moments the first and the last of them met it.
func waitAll(ctx context.Context, c *cluster, what string, cond func(*corev1.Node) bool) (first, last time.Time, err error) {
	seen := map[string]string{}
	for {
		l, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			done := 0
			for i := range l.Items {
				n := &l.Items[i]
				if b := n.Annotations[protocol.BlockedBy]; b != seen[n.Name] {
					if b != "" {
						say("%s/%s: blocked-by %s", c.name, n.Name, b)
					}
					seen[n.Name] = b
				}
				if cond(n) {
					done++
					if first.IsZero() {
						first = time.Now()
						say("%s/%s: %s", c.name, n.Name, what)
					}
				}
			}
			if done == len(l.Items) && done > 0 {
				return first, time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return first, time.Time{}, fmt.Errorf("%s: not every node %s: %w", c.name, what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
