package fleetsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// BuildOperator builds the real update-operator binary into dir: from the working tree when rev is
// "", else from the commit rev alone (git archive into dir/src, so edits in the working tree do not
// leak into the measurement). It returns the binary's path and the commit measured.
func BuildOperator(ctx context.Context, rev, dir string) (bin, commit string, err error) {
	if err := testenv.RefuseUnderShort("go build of update-operator"); err != nil {
		return "", "", err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	src := root
	head := "HEAD"
	if rev != "" {
		head = rev
	}
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", head).Output()
	if err != nil {
		return "", "", fmt.Errorf("git rev-parse %s: %w", head, err)
	}
	commit = strings.TrimSpace(string(out))
	if rev != "" {
		src = filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", "", err
		}
		archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, src)
		if b, err := archive.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("git archive %s: %v: %s", commit, err, b)
		}
	} else if dirty, _ := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--", "operator", "internal", "go.mod", "go.sum").Output(); len(dirty) > 0 {
		commit += "+dirty"
	}
	// Built as `make build` and the image build it (static, stripped): its RSS includes the mapped
	// binary. Profiles stay symbolized (-s -w keep Go's own function table).
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "update-operator"), "./operator/cmd/update-operator")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building update-operator: %v\n%s", err, b)
	}
	return filepath.Join(dir, "update-operator"), commit, nil
}

// operatorProc is one real update-operator process, its log in a file.
type operatorProc struct {
	cmd    *exec.Cmd
	addr   string // host:port of --http-address
	log    string
	exited chan struct{}
	err    error
}

func startOperator(bin, logPath string, args []string) (*operatorProc, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	o := &operatorProc{addr: fmt.Sprintf("127.0.0.1:%d", port), log: logPath, exited: make(chan struct{})}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(bin, append(args, "--http-address="+o.addr, "--profiling")...)
	o.cmd.Stdout, o.cmd.Stderr = f, f
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting update-operator: %w", err)
	}
	go func() { o.err = o.cmd.Wait(); f.Close(); close(o.exited) }()
	return o, nil
}

func (o *operatorProc) pid() int { return o.cmd.Process.Pid }

func (o *operatorProc) alive() error {
	select {
	case <-o.exited:
		return fmt.Errorf("update-operator exited (%v); log %s: %s", o.err, o.log, testenv.LogTail(o.log))
	default:
		return nil
	}
}

// stop asks the process to end (SIGTERM: it releases its Lease) and kills it if it does not.
func (o *operatorProc) stop() {
	if o.alive() != nil {
		return
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
	case <-time.After(15 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.exited
	}
}

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
		if err := o.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("update-operator not leading and quiet after %s; log %s: %s", timeout, o.log, testenv.LogTail(o.log))
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
