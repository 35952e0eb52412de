// Command update-agent runs on every Flatcar node (as a DaemonSet pod): it reports update_engine's
// status on its Node and reboots the node through logind when the update-operator grants reboot-ok.
// This file only wires; the behaviour lives in package agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/agent"
	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/internal/fluoflags"
	"github.com/slipway-dev/slipway/internal/kubeclient"
	"github.com/slipway-dev/slipway/internal/logformat"
	"github.com/slipway-dev/slipway/internal/login1"
	"github.com/slipway-dev/slipway/internal/sysbus"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/internal/version"
)

const usage = `update-agent: reports update_engine's status on this node's Node object and reboots the
node through logind when the update-operator sets reboot-ok.

Usage:
  update-agent [flags]            run the agent
  update-agent send-need-reboot   emit what 'locksmithctl send-need-reboot' emits, then exit
  update-agent node-config apply  bring this node in line with an Ignition snippet (see node-config apply --help)
  update-agent fleetlock          answer Zincati's FleetLock requests for this node (see fleetlock --help)
  update-agent version            print the version

Every flag can also be set as UPDATE_AGENT_<FLAG> (e.g. UPDATE_AGENT_NODE).

Flags:
`

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "version", "--version", "-version":
			fmt.Println(version.String())
			return
		case "send-need-reboot":
			os.Exit(sendNeedReboot())
		case "node-config":
			os.Exit(nodeConfig(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, realSystemd))
		case "fleetlock":
			code := fleetlockCmd(os.Args[2:], os.Stderr)
			klog.Flush()
			os.Exit(code)
		}
	}
	code := run()
	klog.Flush() // with -logtostderr=false (FLUO's klog flags) the last lines sit in a buffer
	os.Exit(code)
}

func sendNeedReboot() int {
	conn, err := sysbus.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-agent send-need-reboot:", err)
		return 1
	}
	defer conn.Close()
	if err := updateengine.SendNeedReboot(conn); err != nil {
		fmt.Fprintln(os.Stderr, "update-agent send-need-reboot:", err)
		return 1
	}
	return 0
}

type options struct {
	node, kubeconfig, hostRoot, bootIDFile, rebootRequired string
	filePoll                                               time.Duration
	printVersion                                           bool
	logFormat                                              string
	limits                                                 kubeclient.Limits
}

func parse(args []string) (*options, *flag.FlagSet, error) {
	o := &options{}
	fs := flag.NewFlagSet("update-agent", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	fs.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "name of this node's Node object (default $NODE_NAME)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster config (or $KUBECONFIG)")
	o.limits.AddFlags(fs, kubeclient.AgentLimits)
	fs.StringVar(&o.hostRoot, "host-root", "/", "where the host's /etc and /usr are mounted (the DaemonSet mounts them under /host)")
	fs.StringVar(&o.bootIDFile, "boot-id-file", "/proc/sys/kernel/random/boot_id", "file holding this boot's ID")
	fs.StringVar(&o.rebootRequired, "reboot-required-file", "/run/reboot-required", "file whose existence means a reboot is needed (Flatcar >= 3067 writes it); empty disables")
	fs.DurationVar(&o.filePoll, "reboot-required-poll", 10*time.Second, "how often to check --reboot-required-file")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	kubeclient.AddLogFlags(fs)
	logformat.AddFlag(fs, &o.logFormat)
	addFLUOFlags(fs)
	if err := flagenv.Parse(fs, args, "UPDATE_AGENT"); err != nil {
		return nil, fs, err
	}
	if err := logformat.Check(o.logFormat); err != nil {
		return nil, fs, err
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fs, err
	}
	if o.printVersion {
		return o, fs, nil
	}
	if strings.TrimSpace(o.node) == "" {
		return nil, fs, fmt.Errorf("node name is empty: set --node or NODE_NAME (downward API spec.nodeName)")
	}
	if o.filePoll <= 0 {
		return nil, fs, fmt.Errorf("reboot-required-poll %s must be positive", o.filePoll)
	}
	return o, fs, nil
}

func run() int {
	o, fs, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-agent:", err)
		return 2
	}
	if o.printVersion {
		fmt.Println(version.String())
		return 0
	}
	if err := logformat.Apply(o.logFormat, fs, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "update-agent:", err)
		return 2
	}
	for _, w := range fluoflags.Warnings(fs, fluoIgnored) {
		klog.Warning(w)
	}
	for _, w := range flagenv.Shadowed(fs, os.Args[1:], "UPDATE_AGENT") {
		klog.Warning(w)
	}
	log := klog.Background().WithName("update-agent")
	bootID, err := os.ReadFile(o.bootIDFile)
	if err != nil || strings.TrimSpace(string(bootID)) == "" {
		log.Error(err, "cannot read this boot's ID", "file", o.bootIDFile)
		return 1
	}
	client, ok := newClient(o.kubeconfig, "slipway-update-agent", o.limits, log)
	if !ok {
		return 1
	}
	a, err := agent.New(agent.Config{
		NodeName: o.node,
		Client:   client,
		Status: func(ctx context.Context, out chan<- updateengine.Status, problems func(error)) {
			updateengine.Watch(ctx, sysbus.Connect, out, problems)
		},
		Rebooter:           systemRebooter{},
		CheckForUpdate:     checkForUpdate,
		BootID:             strings.TrimSpace(string(bootID)),
		HostRoot:           o.hostRoot,
		RebootRequiredPath: o.rebootRequired,
		FilePoll:           o.filePoll,
		Version:            version.String(),
		Log:                log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-agent:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Error(err, "agent failed")
		return 1
	}
	return 0
}

// newClient is the API client of either command (the agent, its FleetLock server), named userAgent
// in the API server's logs; failures are logged and reported as false.
func newClient(kubeconfig, userAgent string, lim kubeclient.Limits, log klog.Logger) (kubernetes.Interface, bool) {
	cfg, err := kubeclient.RestConfig(kubeconfig, userAgent+"/"+version.String(), lim)
	if err != nil {
		log.Error(err, "no Kubernetes client configuration")
		return nil, false
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "building Kubernetes client")
		return nil, false
	}
	return client, true
}

// checkForUpdate asks update_engine to check now, over a connection of its own (rare: only after
// update.conf changed).
func checkForUpdate(ctx context.Context) error {
	conn, err := sysbus.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	return updateengine.NewClient(conn).AttemptUpdate(ctx)
}

// systemRebooter dials the system bus for every attempt, so a restarted dbus-daemon does not leave
// the agent holding a dead connection.
type systemRebooter struct{}

func (systemRebooter) Reboot(ctx context.Context) error {
	conn, err := sysbus.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	return login1.NewRebooter(conn).Reboot(ctx)
}
