package main

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/docs"

	"github.com/slipway-dev/slipway/internal/flagenv"
)

func TestFleetLockFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "fcos-1")
	o, _, err := parseFleetLock(nil, new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	if o.node != "fcos-1" || o.listen != DefaultFleetLockListen || o.central || o.namespace != "slipway-system" {
		t.Errorf("defaults: %+v", o)
	}
	if o, _, err := parseFleetLock([]string{"--central", "--listen=:8081"}, new(strings.Builder)); err != nil || !o.central || o.node != "" {
		t.Errorf("--central: %+v %v", o, err)
	}
	// Each refused with a message that names what is wrong.
	for name, c := range map[string]struct {
		env  string
		args []string
		says string
	}{
		"no node":                  {"", nil, "NODE_NAME"},
		"all interfaces":           {"fcos-1", []string{"--listen=:495"}, "loopback"},
		"a node address":           {"fcos-1", []string{"--listen=10.0.0.7:495"}, "loopback"},
		"a host name":              {"fcos-1", []string{"--listen=localhost:495"}, "loopback"},
		"no port":                  {"fcos-1", []string{"--listen=127.0.0.1"}, "127.0.0.1:PORT"},
		"central with a node":      {"", []string{"--central", "--node=fcos-1"}, "--node"},
		"an unprivileged port":     {"fcos-1", []string{"--listen=127.0.0.1:8495"}, "below 1024"},
		"port zero":                {"fcos-1", []string{"--listen=127.0.0.1:0"}, "below 1024"},
		"unknown flag":             {"fcos-1", []string{"--address=127.0.0.1:1"}, "address"},
		"stray argument":           {"fcos-1", []string{"serve"}, "serve"},
		"zero qps":                 {"fcos-1", []string{"--kube-api-qps=0"}, "kube-api-qps"},
		"environment, not a value": {"fcos-1", []string{"--central=maybe"}, "central"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NODE_NAME", c.env)
			var stderr strings.Builder
			_, _, err := parseFleetLock(c.args, &stderr)
			if err == nil {
				t.Fatalf("%v accepted", c.args)
			}
			if msg := err.Error() + stderr.String(); !strings.Contains(msg, c.says) {
				t.Errorf("%v: %q does not say %q", c.args, msg, c.says)
			}
		})
	}
	// The whole command: a refused flag exits 2 before any client is built.
	var stderr strings.Builder
	if code := fleetlockCmd([]string{"--listen=0.0.0.0:495", "--node=fcos-1"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "loopback") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
}

func TestREADMEListsEveryFleetLockFlag(t *testing.T) {
	readme := []byte(docs.All(t, "../../.."))
	t.Setenv("NODE_NAME", "n")
	_, fs, _ := parseFleetLock(nil, new(strings.Builder))
	if missing := flagenv.Undocumented(fs, string(readme)); len(missing) > 0 {
		t.Errorf("README does not document update-agent fleetlock's %v", missing)
	}
}
