package fleetsim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// operatorProc is one real update-operator process serving its metrics and pprof on ports of its
// own.
type operatorProc struct {
	*operatorproc.Proc
	addr     string // host:port of --http-address
	profAddr string // host:port serving /debug/pprof/: --profiling-address, or addr for an operator built before it
}

func startOperator(bin, logPath string, args []string) (*operatorProc, error) {
	free := func() (string, error) {
		port, err := testenv.FreePort()
		return fmt.Sprintf("127.0.0.1:%d", port), err
	}
	addr, err := free()
	if err != nil {
		return nil, err
	}
	args = append(args, "--http-address="+addr, "--profiling")
	profAddr := addr
	// An operator from an older revision (fleetbench -operator-rev) served pprof on --http-address and
	// knows no --profiling-address.
	if help, _ := exec.Command(bin, "--help").CombinedOutput(); bytes.Contains(help, []byte("-profiling-address")) {
		if profAddr, err = free(); err != nil {
			return nil, err
		}
		args = append(args, "--profiling-address="+profAddr)
	}
	p, err := operatorproc.Start(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	return &operatorProc{Proc: p, addr: addr, profAddr: profAddr}, nil
}

func (o *operatorProc) stop() { o.Stop(15 * time.Second) }

func (o *operatorProc) url(path string) string { return "http://" + o.addr + path }

// fetch saves what the operator serves at path (a pprof profile) to file.
func (o *operatorProc) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.profAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitLeading waits until the operator leads, its cache holds all nodes (slipway_operator_nodes, read
// from its lister, adds up to nodes) and it has gone quiet: under 5% of a core over a second, so the
// start-up pass over every Node is not part of what is measured next. The CPU is read from /proc, with
// no scrape in that second: serving /metrics (a node_info series per node) costs ~60-100 ms of CPU at
// 5,000 nodes, which alone would keep a once-a-second poll above the bar.
func (o *operatorProc) waitLeading(ctx context.Context, nodes int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := o.Alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("update-operator not leading and quiet after %s; log %s: %s", timeout, o.Log(), testenv.LogTail(o.Log()))
		}
		ready := false
		if fams, err := scrape(ctx, o.url("/metrics"), ""); err == nil {
			leader, _ := gauge(fams, "slipway_operator_is_leader")
			ready = leader == 1 && int(sumGauge(fams, "slipway_operator_nodes")) == nodes
		}
		if ready {
			before, err := procCPU(o.Pid())
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			after, err := procCPU(o.Pid())
			if err != nil {
				return err
			}
			if after-before < 0.05 {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
