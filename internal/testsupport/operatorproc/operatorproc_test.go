package operatorproc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fast tier builds no binaries: under -short Build refuses instead of compiling.
func TestBuildRefusedUnderShort(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks the -short guard; run with -short (make unit)")
	}
	if _, err := Build(context.Background(), t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "under -short") {
		t.Fatalf("Build under -short: %v, want a refusal", err)
	}
}

// The binary the tools measure is the one `make build` makes; a process that refuses its flags is told
// apart from one that ran and exited, and a running one is killed and reaped.
func TestBuildStartAndEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds update-operator; not in the fast tier")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	b, err := Build(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.TrimSuffix(b.Commit, "+dirty")) != 40 {
		t.Errorf("commit %q, want a full hash", b.Commit)
	}

	p, err := Start(b.Path, []string{"--version"}, filepath.Join(dir, "version.log"))
	if err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 || p.RefusedFlags() {
		t.Fatalf("--version: exit %d, refused %v; log: %s", code, p.RefusedFlags(), read(t, p.Log()))
	}
	if p.Alive() == nil {
		t.Error("Alive() is nil after the exit")
	}
	if strings.TrimSpace(read(t, p.Log())) == "" {
		t.Error("--version printed nothing")
	}

	p, err = Start(b.Path, []string{"--no-such-flag"}, filepath.Join(dir, "refused.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.RefusedFlags() {
		t.Errorf("an unknown flag: exit %d, not told apart as refused; log: %s", p.ExitCode(), read(t, p.Log()))
	}
	if ok, err := SupportsFlag(b.Path, "--no-such-flag"); ok || err != nil {
		t.Errorf("SupportsFlag(--no-such-flag) = %v, %v", ok, err)
	}
	if ok, err := SupportsFlag(b.Path, "--max-unavailable=1"); !ok || err != nil {
		t.Errorf("SupportsFlag(--max-unavailable=1) = %v, %v", ok, err)
	}

	// An API server that refuses connections: the operator keeps asking for its Lease, so it is still
	// running (its log says it tries) when killed.
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = Start(b.Path, []string{"--kubeconfig=" + kc, "--namespace=x", "--http-address="}, filepath.Join(dir, "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(read(t, p.Log()), "leader lease") {
		if p.Alive() != nil {
			t.Fatalf("the operator ended on its own: %v", p.Alive())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no attempt at the Lease in the log: %s", read(t, p.Log()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.Kill()
	if code := p.ExitCode(); code != -1 {
		t.Errorf("killed process: exit %d, want -1 (signal); log: %s", code, read(t, p.Log()))
	}
	p.Stop(time.Second) // on an ended process: returns at once
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
