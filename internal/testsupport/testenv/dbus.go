package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// Bus is a private dbus-daemon (Debian package "dbus") with a permissive policy: one per simulated
// node, so stand-ins on it can own the well-known system names without touching the host's bus.
type Bus struct {
	Address string
	cmd     *exec.Cmd
	dir     string
}

// busConfig lets any connection own any name and send to anyone, like a system bus whose policy
// files allow update_engine and logind (real policy is not what these tests are about).
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`

// StartBus starts dbus-daemon in dir and waits until it accepts connections.
func StartBus(dir string) (*Bus, error) {
	if err := RefuseUnderShort("dbus-daemon"); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		return nil, fmt.Errorf("dbus-daemon not found: install Debian's dbus-daemon package (make test does): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(busConfig, sock)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if logFile, err := os.Create(filepath.Join(dir, "dbus-daemon.log")); err == nil {
		cmd.Stderr = logFile
		defer logFile.Close()
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting dbus-daemon: %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		l, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(l)
		_, _ = r.WriteTo(discard{})
	}()
	select {
	case addr := <-lines:
		if addr == "" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("dbus-daemon exited without printing its address (config %s)", conf)
		}
		return &Bus{Address: addr, cmd: cmd, dir: dir}, nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("dbus-daemon did not start within 10s")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Connect opens a new private connection to the bus. It is a sysbus.Dialer.
func (b *Bus) Connect(opts ...dbus.ConnOption) (*dbus.Conn, error) {
	return DialBus(b.Address, opts...)
}

// DialBus opens a new private, authenticated connection to the bus at address.
func DialBus(address string, opts ...dbus.ConnOption) (*dbus.Conn, error) {
	conn, err := dbus.Dial(address, opts...)
	if err != nil {
		return nil, err
	}
	if err := conn.Auth(nil); err != nil {
		conn.Close()
		return nil, err
	}
	if err := conn.Hello(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// Stop kills the daemon.
func (b *Bus) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	}
}

// WaitCtx is a helper for polling loops in tests and tools: it sleeps d or returns ctx's error.
func WaitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
