package fleetsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// operatorProc is one real update-operator process serving its metrics and pprof on a port of its
// own.
type operatorProc struct {
	*operatorproc.Proc
	addr string // host:port of --http-address
}

func startOperator(bin, logPath string, args []string) (*operatorProc, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := operatorproc.Start(bin, append(args, "--http-address="+addr, "--profiling"), logPath)
	if err != nil {
		return nil, err
	}
	return &operatorProc{Proc: p, addr: addr}, nil
}

func (o *operatorProc) stop() { o.Stop(15 * time.Second) }

func (o *operatorProc) url(path string) string { return "http://" + o.addr + path }

// fetch saves what the operator serves at path (a pprof profile) to file.
func (o *operatorProc) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url(path), nil)
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
// start-up pass over every Node is not part of what is measured next.
func (o *operatorProc) waitLeading(ctx context.Context, nodes int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	lastCPU := -1.0
	for {
		if err := o.Alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("update-operator not leading and quiet after %s; log %s: %s", timeout, o.Log(), testenv.LogTail(o.Log()))
		}
		if fams, err := scrape(ctx, o.url("/metrics"), ""); err == nil {
			leader, _ := gauge(fams, "slipway_operator_is_leader")
			cpu, _ := gauge(fams, "process_cpu_seconds_total")
			if leader == 1 && int(sumGauge(fams, "slipway_operator_nodes")) == nodes {
				if lastCPU >= 0 && cpu-lastCPU < 0.05 {
					return nil
				}
				lastCPU = cpu
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
