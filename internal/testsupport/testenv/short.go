package testenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The fast tier (`make unit`: `go test -short` in every module) runs every pure test and nothing
// real: no etcd, kube-apiserver or kube-controller-manager, no dbus-daemon, no Prometheus, no `go
// build` of binaries. A test that needs one of them calls NeedRealParts (or a helper that does, like
// Shared.Need), which skips it under -short; the starters below refuse under -short, so a test that
// forgets to skip fails instead of quietly making the fast tier slow.

// Short reports whether this process is a test binary run with -short. Unlike testing.Short it is
// safe anywhere: false outside tests (the demo, chaos and bench commands use the same starters), and
// correct before the testing flags are parsed (a TestMain that starts something before m.Run).
func Short() bool {
	if !testing.Testing() {
		return false
	}
	if f := flag.Lookup("test.short"); f != nil && flag.Parsed() {
		return f.Value.String() == "true"
	}
	for _, a := range os.Args[1:] {
		switch strings.TrimLeft(a, "-") {
		case "test.short", "test.short=true", "short", "short=true":
			return true
		}
	}
	return false
}

// NeedRealParts skips t under -short, saying which real parts it needs (e.g. "a control plane",
// "dbus-daemon", "go build of update-operator").
func NeedRealParts(t testing.TB, what string) {
	t.Helper()
	if Short() {
		t.Skipf("-short: needs %s", what)
	}
}

// RefuseUnderShort is the guard the starters call: an error under -short naming what was about to
// start, so a test that should have called NeedRealParts fails in the fast tier.
func RefuseUnderShort(what string) error {
	if Short() {
		return fmt.Errorf("testenv: refusing to start %s under -short (the fast tier starts no real parts): "+
			"the test must call testenv.NeedRealParts (or Shared.Need) first", what)
	}
	return nil
}
