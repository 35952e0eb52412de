package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/fluoflags"
	"github.com/slipway-dev/slipway/internal/testsupport/fluomodule"
)

// TestMain lets a test start this binary's main: the test binary re-executed with
// SLIPWAY_TEST_MAIN=1 is update-agent, so its exit code and log are the real ones.
func TestMain(m *testing.M) {
	if os.Getenv("SLIPWAY_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// runAgent starts update-agent with args and env (on top of an environment without cluster or
// UPDATE_AGENT_* settings) and returns its exit code and stderr.
func runAgent(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "NODE_NAME" || strings.HasPrefix(k, "KUBERNETES_") || strings.HasPrefix(k, "UPDATE_AGENT_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(append(cmd.Env, "SLIPWAY_TEST_MAIN=1"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running update-agent: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// Every flag FLUO v0.9.0's update-agent accepted is defined, and the binary given all of them (FLUO's
// single dash, a value FLUO accepted) gets past its flags to where it needs a cluster, warning about
// each one that means nothing here.
func TestFLUOFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "n")
	_, fs, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if missing := fluoflags.Undefined(fs, fluoFlags); len(missing) > 0 {
		t.Errorf("FLUO's flags %v are not defined", missing)
	}
	for _, i := range fluoIgnored {
		if fs.Lookup(i.Name) == nil {
			t.Errorf("ignored flag %s is not defined", i.Name)
		}
	}

	var args []string
	for _, f := range fluoFlags {
		args = append(args, "-"+f.Name+"="+f.Example)
	}
	code, stderr := runAgent(t, nil, args...)
	if strings.Contains(stderr, "flag provided but not defined") || code != 1 ||
		!strings.Contains(stderr, "no Kubernetes client configuration") {
		t.Fatalf("update-agent %s: exit %d, want 1 at the Kubernetes client; stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	for _, i := range fluoIgnored {
		if !warned(stderr, i.Warning()) {
			t.Errorf("no warning (klog severity W) %q in:\n%s", i.Warning(), stderr)
		}
	}

	t.Run("warning from the environment", func(t *testing.T) {
		_, stderr := runAgent(t, []string{"UPDATE_AGENT_GRACE_PERIOD=600"}, "-node=n")
		if !warned(stderr, fluoIgnored[0].Warning()) {
			t.Errorf("UPDATE_AGENT_GRACE_PERIOD set: no warning in:\n%s", stderr)
		}
	})
	t.Run("no warning unless given", func(t *testing.T) {
		_, stderr := runAgent(t, nil, "-node=n")
		if strings.Contains(stderr, "has no effect in Slipway") {
			t.Errorf("warned without FLUO flags:\n%s", stderr)
		}
	})
	t.Run("refused as FLUO refused it", func(t *testing.T) {
		code, stderr := runAgent(t, nil, "-node=n", "-grace-period=10m")
		if code != 2 || !strings.Contains(stderr, "grace-period") {
			t.Errorf("-grace-period=10m: exit %d, stderr:\n%s", code, stderr)
		}
	})
	// FLUO's examples/deploy/update-agent.yaml: command /bin/update-agent, no args, the node from
	// UPDATE_AGENT_NODE, POD_NAMESPACE set.
	t.Run("FLUO's DaemonSet", func(t *testing.T) {
		code, stderr := runAgent(t, []string{"UPDATE_AGENT_NODE=node-1", "POD_NAMESPACE=reboot-coordinator"})
		if code != 1 || !strings.Contains(stderr, "no Kubernetes client configuration") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
	// klog's flags are klog's: its log goes where -log_file says, not to stderr.
	t.Run("klog's flags mean what they meant", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "agent.log")
		_, stderr := runAgent(t, nil, "-node=n", "-grace-period=30", "-logtostderr=false", "-log_file="+file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (stderr:\n%s)", err, stderr)
		}
		if !strings.Contains(string(b), fluoIgnored[0].Warning()) || !strings.Contains(string(b), "no Kubernetes client configuration") {
			t.Errorf("log file:\n%s", b)
		}
	})
}

// warned says whether log holds msg on a line of klog's warning severity.
func warned(log, msg string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "W") && strings.Contains(l, msg) {
			return true
		}
	}
	return false
}

// fluoFlags is exactly the flags FLUO v0.9.0's update-agent defines, as its own source in the module cache
// says (its main.go and the klog its go.mod pins), besides FLUO v0.10's -force-drain: the hand-kept list cannot drift.
func TestFLUOFlagsFromItsModule(t *testing.T) {
	var ours []string
	for _, f := range fluoFlags {
		if !slices.Contains([]string{"force-drain"}, f.Name) {
			ours = append(ours, f.Name)
		}
	}
	slices.Sort(ours)
	if theirs := fluomodule.Flags(t, "update-agent"); !slices.Equal(ours, theirs) {
		t.Errorf("FLUO v0.9.0's update-agent defines %v;\nfluoFlags lists %v", theirs, ours)
	}
}
