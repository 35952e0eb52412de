package testenv

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Under -short (make unit) every starter refuses, so a test that forgets to skip fails instead of
// starting real parts; the guard is what makes "the fast tier starts nothing" a checked claim.
func TestShortRefusesRealParts(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks the -short guard; run with -short (make unit)")
	}
	if !Short() {
		t.Fatal("Short() is false under -short")
	}
	dir := t.TempDir()
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "under -short") {
			t.Errorf("%s under -short: %v, want a refusal", what, err)
		}
	}
	_, err := StartControlPlane(context.Background(), dir, Options{})
	refused("StartControlPlane", err)
	_, err = BinDir()
	refused("BinDir", err)
	_, err = StartBus(dir)
	refused("StartBus", err)
	_, err = StartPrometheus(dir, "")
	refused("StartPrometheus", err)
	refused("GoBuild", GoBuild(context.Background(), dir, "-o", dir, "./nothing"))
	s := &Shared{Name: "guard"}
	defer s.Close()
	_, err = s.Get()
	refused("Shared.Get", err)
	ran := false
	t.Run("Need", func(t *testing.T) {
		defer func() { ran = true }()
		s.Need(t)
		t.Error("Shared.Need did not skip under -short")
	})
	if !ran {
		t.Error("the Need subtest did not run")
	}
}

// Short reads the flag without panicking before flag.Parse and outside tests; in a test binary run
// with -test.short it is true.
func TestShortInAChildProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("the parent of this check runs without -short")
	}
	out, err := exec.Command(os.Args[0], "-test.run=^TestShortRefusesRealParts$", "-test.short", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestShortRefusesRealParts") {
		t.Fatalf("the guard under -short: %v\n%s", err, out)
	}
}
