package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"
	"github.com/slipway-dev/slipway/internal/testsupport/syncbuf"

	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/internal/nodeconfig"
)

// unitTable is a systemd that only remembers unit states; the real one is exercised in the e2e VM.
type unitTable map[string][2]string

func (u unitTable) UnitState(_ context.Context, n string) (nodeconfig.UnitState, error) {
	return nodeconfig.UnitState{File: u[n][0], Active: u[n][1]}, nil
}
func (u unitTable) set(n string, i int, v string) error      { s := u[n]; s[i] = v; u[n] = s; return nil }
func (u unitTable) Reload(context.Context) error             { return nil }
func (u unitTable) Mask(_ context.Context, n string) error   { return u.set(n, 0, "masked") }
func (u unitTable) Unmask(_ context.Context, n string) error { return u.set(n, 0, "disabled") }
func (u unitTable) Enable(_ context.Context, n string) error { return u.set(n, 0, "enabled") }
func (u unitTable) Disable(_ context.Context, n string) error {
	return u.set(n, 0, "disabled")
}
func (u unitTable) Start(_ context.Context, n string) error { return u.set(n, 1, "active") }
func (u unitTable) Stop(_ context.Context, n string) error  { return u.set(n, 1, "inactive") }

func connectTo(u unitTable) systemdConnector {
	return func(context.Context) (nodeconfig.Systemd, func(), error) { return u, func() {}, nil }
}

func TestNodeConfigApplyDryRunThenApplyThenNothing(t *testing.T) {
	root := t.TempDir()
	units := unitTable{"locksmithd.service": {"enabled", "active"}, "update-engine.service": {"enabled", "active"}}
	snippet := "../../../butane/snippets/flatcar-slipway.ign"
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := nodeConfig(append([]string{"apply", "--root", root, "--config", snippet}, args...), strings.NewReader(""), &out, &errOut, connectTo(units))
		return code, out.String(), errOut.String()
	}
	conf := filepath.Join(root, "etc/flatcar/update.conf")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("GROUP=beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run("--dry-run")
	if code != 0 || !strings.Contains(out, "mask locksmithd.service") || strings.Contains(out, "update.conf") || !strings.Contains(out, "dry run: nothing changed") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if units["locksmithd.service"][0] != "enabled" {
		t.Fatal("dry run changed the node")
	}
	if code, out, errOut := run(); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if units["locksmithd.service"] != [2]string{"masked", "inactive"} {
		t.Fatalf("locksmithd %v", units["locksmithd.service"])
	}
	if b, err := os.ReadFile(conf); err != nil || string(b) != "GROUP=beta\n" {
		t.Fatalf("the node's update.conf changed: %q %v", b, err)
	}
	if code, out, _ := run(); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("second apply: exit %d\n%s", code, out)
	}
}

func TestNodeConfigBadUsage(t *testing.T) {
	units := unitTable{}
	for name, args := range map[string][]string{
		"no subcommand":  {},
		"unknown verb":   {"remove"},
		"no config":      {"apply"},
		"missing file":   {"apply", "--config", "/nonexistent.ign"},
		"not ignition":   {"apply", "--config", "../../../butane/snippets/flatcar-slipway.bu"},
		"spec 2 config":  {"apply", "--config", "../../../butane/snippets/flatcar-slipway.clc.ign"},
		"unknown flag":   {"apply", "--config", "x", "--force"},
		"stray argument": {"apply", "--config", "x", "now"},
	} {
		var out, errOut strings.Builder
		if code := nodeConfig(args, strings.NewReader(""), &out, &errOut, connectTo(units)); code != 2 || errOut.Len() == 0 {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut.String())
		}
		if len(units) != 0 {
			t.Fatalf("%s touched systemd", name)
		}
	}
	// Standard input works too.
	var out, errOut strings.Builder
	if code := nodeConfig([]string{"apply", "--config", "-", "--dry-run", "--root", t.TempDir()}, strings.NewReader(`{"ignition":{"version":"3.4.0"}}`), &out, &errOut, connectTo(units)); code != 0 || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("stdin: exit %d %s%s", code, out.String(), errOut.String())
	}
}

func TestREADMEListsEveryNodeConfigFlag(t *testing.T) {
	readme := []byte(docs.All(t, "../../.."))
	_, fs, _ := parseNodeConfig(nil, new(strings.Builder))
	if missing := flagenv.Undocumented(fs, string(readme)); len(missing) > 0 {
		t.Errorf("README does not document node-config apply's %v", missing)
	}
}

// Ignition's own warnings reach the user: a spec older than 3.6.0 ignores setuid/setgid/sticky.
func TestNodeConfigShowsIgnitionWarnings(t *testing.T) {
	var out, errOut strings.Builder
	cfg := `{"ignition":{"version":"3.4.0"},"storage":{"directories":[{"path":"/shared","mode":1023}]}}`
	code := nodeConfig([]string{"apply", "--config", "-", "--dry-run", "--root", t.TempDir()}, strings.NewReader(cfg), &out, &errOut, connectTo(unitTable{}))
	if code != 0 || !strings.Contains(errOut.String(), "older than 3.6.0") || !strings.Contains(out.String(), "create directory /shared (mode 0777") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
}

// --hold (deploy/node-prep's pods): after applying, it stays until SIGTERM and then exits 0, so the
// DaemonSet's pod stays Running with its result in the log; a config it refuses still exits at once.
func TestNodeConfigHold(t *testing.T) {
	units := unitTable{"locksmithd.service": {"enabled", "active"}, "update-engine.service": {"enabled", "active"}}
	snippet := filepath.Join("..", "..", "..", "butane", "snippets", "flatcar-slipway.ign")
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- nodeConfig([]string{"apply", "--hold", "--root", t.TempDir(), "--config", snippet}, strings.NewReader(""), &out, &errOut, connectTo(units))
	}()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(out.String(), "holding until stopped") {
		select {
		case code := <-done:
			t.Fatalf("returned %d before holding:\n%s%s", code, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("not holding after 30s:\n%s%s", out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !strings.Contains(out.String(), "applied") || units["locksmithd.service"][0] != "masked" {
		t.Fatalf("held without applying:\n%s", out.String())
	}
	select {
	case code := <-done:
		t.Fatalf("--hold returned %d without a signal", code)
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("stopped with SIGTERM: exit %d, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still holding 30s after SIGTERM")
	}

	var out2, errOut2 bytes.Buffer
	code := nodeConfig([]string{"apply", "--hold", "--root", t.TempDir(), "--config", "-"}, strings.NewReader(`{"ignition":{"version":"9.9.9"}}`), &out2, &errOut2, connectTo(units))
	if code != 2 || strings.Contains(out2.String(), "holding") {
		t.Errorf("a refused config with --hold: exit %d, output %q, want 2 at once", code, out2.String())
	}
	// --dry-run --hold (the DaemonSet's second container) holds only a node in line.
	drifted := unitTable{"locksmithd.service": {"enabled", "active"}, "update-engine.service": {"enabled", "active"}}
	var out3, errOut3 bytes.Buffer
	code = nodeConfig([]string{"apply", "--dry-run", "--hold", "--root", t.TempDir(), "--config", snippet}, strings.NewReader(""), &out3, &errOut3, connectTo(drifted))
	if code != 1 || strings.Contains(out3.String(), "holding") || !strings.Contains(errOut3.String(), "not in line") {
		t.Errorf("--dry-run --hold on a drifted node: exit %d, %q %q; want 1 at once, saying not in line", code, out3.String(), errOut3.String())
	}
	if drifted["locksmithd.service"][0] != "enabled" {
		t.Error("--dry-run changed a unit")
	}
}
