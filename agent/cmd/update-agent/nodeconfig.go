package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/ignition/v2/config/v3_6/types"

	"github.com/slipway-dev/slipway/internal/nodeconfig"
)

const nodeConfigUsage = `update-agent node-config apply: bring this running node in line with an Ignition config
(stable spec 3.0.0 to 3.6.0, e.g. butane/snippets/flatcar-slipway.ign): make its files, directories
and links with Ignition's semantics inside --root (what they replace is kept beside them as
<name>.slipway-backup-<time>), write its unit files, mask/stop, enable/start or disable/stop its
units. Idempotent: a second run changes nothing. Run it as root on the node, or over SSH:
  ssh core@node sudo /opt/bin/update-agent node-config apply --config - < flatcar-slipway.ign

Flags:
`

type nodeConfigOptions struct {
	config, root string
	dryRun, hold bool
}

func parseNodeConfig(args []string, stderr io.Writer) (*nodeConfigOptions, *flag.FlagSet, error) {
	o := &nodeConfigOptions{}
	fs := flag.NewFlagSet("update-agent node-config apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), nodeConfigUsage); fs.PrintDefaults() }
	fs.StringVar(&o.config, "config", "", "the Ignition config to apply; - reads standard input")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the changes (with file diffs) and change nothing")
	fs.StringVar(&o.root, "root", "/", "where the node's filesystem is (units are always the running systemd's)")
	fs.BoolVar(&o.hold, "hold", false, "when done (applied, or nothing to do), wait until SIGTERM or SIGINT and exit 0: a DaemonSet's pod then stays Running (deploy/node-prep); a failure exits at once, and so does --dry-run on a node not in line (exit 1)")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if o.config == "" {
		return nil, fs, fmt.Errorf("--config is required: an Ignition file such as butane/snippets/flatcar-slipway.ign, or - for standard input")
	}
	return o, fs, nil
}

type systemdConnector func(ctx context.Context) (nodeconfig.Systemd, func(), error)

func realSystemd(ctx context.Context) (nodeconfig.Systemd, func(), error) {
	s, err := nodeconfig.NewSystemd(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

// nodeConfig is `update-agent node-config apply`. Exit 0: in line (or dry run); 1: failed; 2: bad
// usage or a config it will not apply (nothing changed).
func nodeConfig(args []string, stdin io.Reader, stdout, stderr io.Writer, connect systemdConnector) int {
	// Signals first: a DaemonSet's pod may be stopped while it parses (--hold), and an unhandled
	// SIGTERM to PID 1 is ignored until the grace period ends.
	signalled, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 || args[0] != "apply" {
		fmt.Fprint(stderr, nodeConfigUsage)
		fmt.Fprintln(stderr, "\nupdate-agent node-config: the only subcommand is apply")
		return 2
	}
	o, _, err := parseNodeConfig(args[1:], stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply:", err)
		return 2
	}
	var raw []byte
	if o.config == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(o.config)
	}
	if err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply: reading the config:", err)
		return 2
	}
	cfg, warnings, err := nodeconfig.Parse(raw)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "update-agent node-config apply: Ignition's parser:", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply:", err)
		return 2
	}
	code := applyConfig(signalled, o, cfg, stdout, stderr, connect)
	if code == 0 && o.hold {
		fmt.Fprintln(stdout, "holding until stopped (--hold)")
		<-signalled.Done()
	}
	return code
}

// applyConfig computes the plan of cfg on this node and applies it (or prints it, --dry-run), within
// 5 minutes.
func applyConfig(signalled context.Context, o *nodeConfigOptions, cfg types.Config, stdout, stderr io.Writer, connect systemdConnector) int {
	ctx, cancel := context.WithTimeout(signalled, 5*time.Minute)
	defer cancel()
	sd, closeSD, err := connect(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply:", err)
		return 1
	}
	defer closeSD()
	plan, err := nodeconfig.Compute(ctx, cfg, o.root, sd, time.Now())
	if err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply:", err)
		return 2
	}
	fmt.Fprint(stdout, plan.String())
	if o.dryRun && o.hold && len(plan.Steps) > 0 {
		// deploy/node-prep's check: a pod that holds is a node in line; this one is not.
		fmt.Fprintf(stderr, "update-agent node-config apply: not in line (%d step(s) above); --dry-run --hold holds only a node in line\n", len(plan.Steps))
		return 1
	}
	if o.dryRun || len(plan.Steps) == 0 {
		if o.dryRun && len(plan.Steps) > 0 {
			fmt.Fprintln(stdout, "dry run: nothing changed")
		}
		return 0
	}
	if err := plan.Apply(ctx); err != nil {
		fmt.Fprintln(stderr, "update-agent node-config apply:", err)
		fmt.Fprintln(stderr, "the steps before it were applied; fix the cause and run it again (it is idempotent)")
		return 1
	}
	fmt.Fprintln(stdout, "applied")
	return 0
}
