// Package operatorproc builds the real update-operator binary (and update-agent, for its FleetLock
// server) and runs it as a separate process, for the tests and tools that need a process to SIGKILL,
// a lease to lose, an exit status or a resident set to measure: the operator package's leader tests,
// the chaos run, the fleet bench, the VM harness and deploy's FleetLock confinement test. One build recipe and one process wrapper, so that what they measure is the binary `make
// build` and the image ship.
package operatorproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Binary is a built update-operator.
type Binary struct {
	Path   string
	Commit string // the commit it was built from; "+dirty" when the working tree's operator sources differ
}

// Build builds update-operator into dir, as `make build` does (static, -trimpath, stripped; the
// compile steps are shared with it through the Go build cache): from the working tree when rev is "",
// else from commit rev alone (git archive into dir/src, so edits in the working tree do not leak into a
// measurement of an older commit). Refused under -short, like every real part.
func Build(ctx context.Context, dir, rev string) (Binary, error) {
	return build(ctx, dir, rev, "update-operator")
}

// BuildAgent builds update-agent the same way (from the working tree when rev is "", else from commit
// rev alone), for tests that run it as a real process: its subcommands (update-agent fleetlock), or
// the agent itself on a simulated node (chaos's upgrade); Start and Proc serve it as well.
func BuildAgent(ctx context.Context, dir, rev string) (Binary, error) {
	return build(ctx, dir, rev, "update-agent")
}

// build builds command name (update-operator or update-agent) from its cmd/ package.
func build(ctx context.Context, dir, rev, name string) (Binary, error) {
	pkg := map[string]string{"update-operator": "./operator/cmd/update-operator", "update-agent": "./agent/cmd/update-agent"}[name]
	if err := testenv.RefuseUnderShort("go build of " + name); err != nil {
		return Binary{}, err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return Binary{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	head := "HEAD"
	if rev != "" {
		head = rev
	}
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", head).Output()
	if err != nil {
		return Binary{}, fmt.Errorf("git rev-parse %s: %w", head, err)
	}
	b := Binary{Path: filepath.Join(dir, name), Commit: strings.TrimSpace(string(out))}
	src := root
	if rev != "" {
		src = filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return Binary{}, err
		}
		archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, b.Commit, src)
		if out, err := archive.CombinedOutput(); err != nil {
			return Binary{}, fmt.Errorf("git archive %s: %v: %s", b.Commit, err, out)
		}
	} else if dirty, _ := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--", "operator", "agent", "internal", "go.mod", "go.sum").Output(); len(dirty) > 0 {
		b.Commit += "+dirty"
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.Path, pkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return b, nil
}

// SupportsFlag asks the binary whether it knows flag (Go's flag package says "flag provided but not
// defined" and exits 2 otherwise): an older commit measured by the bench may predate a flag.
func SupportsFlag(bin, flag string) (bool, error) {
	out, err := exec.Command(bin, flag, "--version").CombinedOutput()
	if strings.Contains(string(out), "flag provided but not defined") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s --version: %v: %s", bin, flag, err, out)
	}
	return true, nil
}

// Proc is one running update-operator process, its output appended to a log file. It dies with the
// process that started it (Pdeathsig), so a crashed test leaves no operator behind.
type Proc struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
	ended   time.Time
	done    chan struct{}
	err     error
}

// Start runs bin with args, appending its output to logPath.
func Start(bin string, args []string, logPath string) (*Proc, error) {
	return StartEnv(bin, args, nil, logPath)
}

// StartEnv is Start with env added to this process's environment (an agent's
// DBUS_SYSTEM_BUS_ADDRESS, say).
func StartEnv(bin string, args, env []string, logPath string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &Proc{log: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	p.started = time.Now()
	go func() { p.err = p.cmd.Wait(); p.ended = time.Now(); f.Close(); close(p.done) }()
	return p, nil
}

// StartT is Start for a test: the log in t's temporary directory (named name.log), the process
// SIGKILLed when t ends, and its log printed then if t failed.
func StartT(t testing.TB, bin string, args []string, name string) *Proc {
	t.Helper()
	p, err := Start(bin, args, filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.Log())
			t.Logf("log of %s:\n%s", name, b)
		}
	})
	return p
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Log is the path of the process's log.
func (p *Proc) Log() string { return p.log }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit (nil for status 0); valid once Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// ExitCode is the process's exit status, -1 when it was killed by a signal; waits for the exit.
func (p *Proc) ExitCode() int {
	var ee *exec.ExitError
	if err := p.Err(); err == nil {
		return 0
	} else if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// RefusedFlags says whether the process exited at once with status 2: Go's flag package refusing its
// command line. Restarting it would not help. Waits for the exit.
func (p *Proc) RefusedFlags() bool {
	<-p.done
	return p.ExitCode() == 2 && p.ended.Sub(p.started) < 5*time.Second
}

// Alive is nil while the process runs, else says how it ended with the tail of its log.
func (p *Proc) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); log %s: %s", filepath.Base(p.cmd.Path), p.err, p.log, testenv.LogTail(p.log))
	default:
		return nil
	}
}

// Kill SIGKILLs the process (no lease release, as a crash or a node loss would) and waits for it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to end (SIGTERM: it releases its Lease) and SIGKILLs it after grace.
func (p *Proc) Stop(grace time.Duration) {
	if p.Alive() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}
