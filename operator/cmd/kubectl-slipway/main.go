// Command kubectl-slipway is the `kubectl slipway` plugin: with it on PATH, `kubectl slipway status`
// shows the fleet's reboot state, `kubectl slipway pause|resume` flips the fleet switch. It needs only
// a kubeconfig. This file only wires; the behaviour lives in package status (also reachable as
// `update-operator status`).
package main

import (
	"os"

	"github.com/slipway-dev/slipway/operator/status"
)

func main() {
	os.Exit(status.Main("kubectl slipway", os.Args[1:], os.Stdout, os.Stderr))
}
