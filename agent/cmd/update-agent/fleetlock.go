package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/internal/fleetlock"
	"github.com/slipway-dev/slipway/internal/kubeclient"
	"github.com/slipway-dev/slipway/internal/version"
)

const fleetlockUsage = `update-agent fleetlock: answer the FleetLock protocol for Fedora CoreOS nodes, whose Zincati asks
before it reboots (POST /v1/pre-reboot, /v1/steady-state). It writes what the agent would write for
the node (reboot-needed, and after the reboot the flags reset); the update-operator does the rest.

Usage:
  update-agent fleetlock [--listen 127.0.0.1:495] [--node NAME]
      per node (deploy/fleetlock: a hostNetwork DaemonSet on enrolled nodes): answers only for the
      Node it runs on, on a loopback address and a port below 1024 (only root may take it);
      Zincati's base_url is http://127.0.0.1:495/
  update-agent fleetlock --central --listen :8081
      one server for every enrolled node (deploy/fleetlock-central, opt-in): trusts whoever reaches
      its port and knows a node's id, which is derived from the node's machine ID

Every flag can also be set as UPDATE_AGENT_FLEETLOCK_<FLAG>.

Flags:
`

// DefaultFleetLockListen is the per-node server's address, and Zincati's base_url on every node.
const DefaultFleetLockListen = "127.0.0.1:495"

type fleetlockOptions struct {
	listen, node, namespace, kubeconfig string
	central                             bool
	limits                              kubeclient.Limits
}

func parseFleetLock(args []string, stderr io.Writer) (*fleetlockOptions, *flag.FlagSet, error) {
	o := &fleetlockOptions{}
	fs := flag.NewFlagSet("update-agent fleetlock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), fleetlockUsage); fs.PrintDefaults() }
	fs.StringVar(&o.listen, "listen", DefaultFleetLockListen, "address to serve FleetLock on; per node, a loopback IP and a port below 1024")
	fs.StringVar(&o.node, "node", "", "the Node this server answers for (default $NODE_NAME); not with --central")
	fs.BoolVar(&o.central, "central", false, "answer for every enrolled node from one address (opt-in: see --help)")
	fs.StringVar(&o.namespace, "namespace", "slipway-system", "namespace of the fleet switch ConfigMap slipway-fleet, whose pauses replies name; empty: none")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster config (or $KUBECONFIG)")
	o.limits.AddFlags(fs, kubeclient.AgentLimits)
	kubeclient.AddLogFlags(fs)
	if err := flagenv.Parse(fs, args, "UPDATE_AGENT_FLEETLOCK"); err != nil {
		return nil, fs, err
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fs, err
	}
	if o.central {
		if o.node != "" {
			return nil, fs, fmt.Errorf("--node names the one node a per-node server answers for; --central answers for every enrolled node: use one or the other")
		}
		return o, fs, nil
	}
	if o.node == "" {
		o.node = os.Getenv("NODE_NAME")
	}
	if strings.TrimSpace(o.node) == "" {
		return nil, fs, fmt.Errorf("node name is empty: set --node or NODE_NAME (downward API spec.nodeName), or --central for one server for every node")
	}
	if err := fleetlock.LoopbackOnly(o.listen); err != nil {
		return nil, fs, fmt.Errorf("--listen: %v; --central serves every node from one address", err)
	}
	// Zincati trusts whatever answers on its base_url: a process that took the port while this server
	// restarts could answer "reboot now" with no drain. Below 1024 only root (or CAP_NET_BIND_SERVICE)
	// may bind.
	if _, p, _ := net.SplitHostPort(o.listen); !privileged(p) {
		return nil, fs, fmt.Errorf("--listen %s: the per-node server listens on a port below 1024, which only root or CAP_NET_BIND_SERVICE may bind, so that no unprivileged process on the node can take the port over while the server restarts and answer Zincati itself", o.listen)
	}
	return o, fs, nil
}

func privileged(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 1024
}

func fleetlockCmd(args []string, stderr io.Writer) int {
	o, _, err := parseFleetLock(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "update-agent fleetlock:", err)
		return 2
	}
	log := klog.Background().WithName("fleetlock")
	client, ok := newClient(o.kubeconfig, "slipway-fleetlock", o.limits, log)
	if !ok {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.central {
		_, err = fleetlock.Serve(ctx, o.listen, client, o.namespace, log)
	} else {
		_, err = fleetlock.ServeNode(ctx, o.listen, client, o.node, o.namespace, log)
	}
	if err != nil {
		log.Error(err, "serving FleetLock", "address", o.listen)
		return 1
	}
	log.Info("started", "version", version.String())
	<-ctx.Done()
	return 0
}
