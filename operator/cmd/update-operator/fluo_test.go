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
// SLIPWAY_TEST_MAIN=1 is update-operator, so its exit code and log are the real ones.
func TestMain(m *testing.M) {
	if os.Getenv("SLIPWAY_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// runOperator starts update-operator with args and env (on top of an environment without cluster,
// POD_* or UPDATE_OPERATOR_* settings) and returns its exit code and stderr.
func runOperator(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || strings.HasPrefix(k, "POD_") || strings.HasPrefix(k, "KUBERNETES_") || strings.HasPrefix(k, "UPDATE_OPERATOR_") {
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
		t.Fatalf("running update-operator: %v", err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// Every flag FLUO v0.9.0's update-operator accepted is defined, and the binary given all of them
// (FLUO's single dash, a value FLUO accepted) gets past its flags and their validation to where it
// needs a cluster.
func TestFLUOFlags(t *testing.T) {
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

	// FLUO's examples/deploy/update-operator.yaml sets POD_NAMESPACE (downward API) and no args.
	fluoEnv := []string{"POD_NAMESPACE=reboot-coordinator"}
	var args []string
	for _, f := range fluoFlags {
		args = append(args, "-"+f.Name+"="+f.Example)
	}
	code, stderr := runOperator(t, fluoEnv, args...)
	if strings.Contains(stderr, "flag provided but not defined") || code != 1 ||
		!strings.Contains(stderr, "no Kubernetes client configuration") {
		t.Fatalf("update-operator %s: exit %d, want 1 at the Kubernetes client; stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	for _, i := range fluoIgnored {
		if !warned(stderr, i.Warning()) {
			t.Errorf("no warning (klog severity W) %q in:\n%s", i.Warning(), stderr)
		}
	}
	if strings.Contains(stderr, "has no effect in Slipway") && len(fluoIgnored) == 0 {
		t.Errorf("warned about a flag that means something:\n%s", stderr)
	}

	t.Run("FLUO's Deployment", func(t *testing.T) {
		code, stderr := runOperator(t, fluoEnv)
		if code != 1 || !strings.Contains(stderr, "no Kubernetes client configuration") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
	// klog's flags are klog's: its log goes where -log_file says, not to stderr.
	t.Run("klog's flags mean what they meant", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "operator.log")
		_, stderr := runOperator(t, fluoEnv, "-logtostderr=false", "-log_file="+file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (stderr:\n%s)", err, stderr)
		}
		if !strings.Contains(string(b), "no Kubernetes client configuration") {
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

// fluoFlags is exactly the flags FLUO v0.9.0's update-operator defines, as its own source in the module cache
// says (its main.go and the klog its go.mod pins): the hand-kept list cannot drift.
func TestFLUOFlagsFromItsModule(t *testing.T) {
	var ours []string
	for _, f := range fluoFlags {
		if !slices.Contains([]string{}, f.Name) {
			ours = append(ours, f.Name)
		}
	}
	slices.Sort(ours)
	if theirs := fluomodule.Flags(t, "update-operator"); !slices.Equal(ours, theirs) {
		t.Errorf("FLUO v0.9.0's update-operator defines %v;\nfluoFlags lists %v", theirs, ours)
	}
}
