package fluomodule

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// AgentBinary is FLUO v0.9.0's own update-agent, built from its module (its go.mod's dependencies,
// downloaded through the module proxy on first use) into cacheDir, which keeps it for later runs.
// Without the module proxy the test is skipped, saying so; a module that downloads but does not
// build fails it.
func AgentBinary(t testing.TB, cacheDir string) string {
	t.Helper()
	// Keyed by FLUO's release, the toolchain that builds it (the go on PATH) and the platform.
	gover, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	_, release, _ := strings.Cut(Module, "@")
	bin := filepath.Join(cacheDir, fmt.Sprintf("fluo-update-agent-%s-%s-%s-%s", release, strings.TrimSpace(string(gover)), runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := dir(t, Module)
	// The module cache is read-only and FLUO's vendor/ holds only modules.txt: build a writable copy
	// in module mode.
	work := t.TempDir()
	if out, err := exec.Command("cp", "-r", src+"/.", work).CombinedOutput(); err != nil {
		t.Fatalf("copying FLUO's module: %v\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", work).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v\n%s", err, out)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("building FLUO v0.9.0's update-agent from its module (first use: its dependencies come from the module proxy, ~2 min)")
	start := time.Now()
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid()) // concurrent builders each write their own
	// As FLUO's Makefile builds it: its version package refuses to start without a semver stamped in.
	const repo = "github.com/flatcar/flatcar-linux-update-operator"
	cmd := exec.Command("go", "build", "-o", tmp, "-ldflags", "-X "+repo+"/pkg/version.Version="+strings.TrimPrefix(release, "v")+" -X "+repo+"/pkg/version.Commit="+release, "./cmd/update-agent")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		// Without a module proxy the dependencies cannot come: say so and skip, as dir does.
		if _, perr := exec.Command("go", "mod", "download", "-json", "k8s.io/client-go@v0.24.1").Output(); perr != nil {
			t.Skipf("FLUO's dependencies are not in the module cache and the module proxy did not serve them (%v): FLUO's agent is not built", perr)
		}
		t.Fatalf("building FLUO's update-agent: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built FLUO's update-agent in %s", time.Since(start).Round(time.Second))
	return bin
}
