package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/version"
)

// DefaultNamespace is where the operator and its slipway-fleet ConfigMap live (deploy/).
const DefaultNamespace = "slipway-system"

// Exit codes of Main.
const (
	ExitOK    = 0
	ExitError = 1 // the cluster could not be reached or refused
	ExitUsage = 2 // a bad command line; nothing was asked of the cluster
)

const usage = `Usage:
  %[1]s [status] [-o text|wide|json] [--group GROUP] [--policy NAME] [--state STATE] [--all] [-w [--interval D]]
  %[1]s pause [--group GROUP | --policy NAME | --nodes NODES [--except NODES] | --version V] [--reason TEXT]
  %[1]s resume [--group GROUP | --policy NAME | --nodes NODES [--except NODES] | --failures | --version V] [--reason TEXT]
  %[1]s history [NODE] [--since D] [--svg FILE]
  %[1]s versions [-o text|json]
  %[1]s version

Commands:
  status   the fleet's reboot state (default): problems first (with what to do), pause switches,
           reboot windows, blockers, failed reboots, OS versions (with an ETA from the measured
           cycles), the leader's Lease, budgets; per node its cycle state, its place in the
           admission queue, for how long (waiting: since it was first held), budget group, why it
           waits (blocked-by), stalled reason or when it stalls, no agent, last drain or reboot
           error, last reboot
  pause    stop new reboot cycles in the whole fleet, or in one budget group; nodes already in
           their cycle finish it. Records who (the kubeconfig user, else $USER) and when.
           --version V: no node is admitted to reboot into OS version V (blocked-by
           version-halted) until resume --version V; kept in the fleet record with who (the API
           server's view of you), when (its clock) and --reason
  resume   let the fleet (or the group) start cycles again; --failures: clear the pause the
           operator set when --max-failed-reboots was spent and start a new count (a person's
           pause and resume never touch that one); --version V: release OS version V's halt
           (--max-failed-per-version): its failures recorded before now no longer count. Both
           are kept in the fleet record with who (the API server's view of your identity), when
           (the API server's clock) and --reason
  versions every OS version the fleet has seen: when first seen staged, nodes on it, staged,
           held by a version rule or a halt, cycles finished and failed, and which policy's
           rules hold it back (--allow-version, --deny-version, --version-min-age, a
           RebootPolicy's versions) or who halted it
  pause --nodes, resume --nodes
           hold single nodes (FLUO's reboot-paused annotation, with update.slipway.dev/paused-by
           saying who, when and why): pause --nodes all --except node-7 lets one node try an
           update while the others wait; resume --nodes all undoes it, lifting only the pauses
           pause --nodes set (a node paused by hand is named to be resumed). Nodes in their cycle
           are left to finish it; a name that matches no Node changes nothing
%[2]s

Flags:
  -o, --output FORMAT      text (aligned columns cut to the terminal's width, else $COLUMNS, else
                           100), wide (nothing cut) or json (stable shape, see docs/operate.md)
      --group GROUP        status: only this budget group's nodes; pause or resume only this
                           group (the operator's --group-label value, or a FleetLock group)
      --policy NAME        status: only the nodes of this RebootPolicy; pause or resume it
                           (its spec.paused and pausedReason: kubectl get rp shows it too)
      --state STATE        status: only nodes in this state (idle, needs-reboot, before-reboot,
                           draining, rebooting, rebooted, after-reboot)
      --all                status: list idle nodes with nothing to say too (by default one line
                           counts them; rows come problems first, then in cycle, then waiting
                           in the order they will go)
  -w, --watch              status: again every --interval until interrupted (text: the screen is
                           cleared between frames on a terminal; json: one document per frame)
      --interval D         with --watch: how often (default 2s)
      --reason TEXT        why, shown to everyone who looks (pause; resume --failures/--version)
      --nodes NODES        pause or resume these nodes: names, comma-separated, or all
      --except NODES       with --nodes: not these
      --since D            history: how far back (default 24h)
      --svg FILE           history: write the timeline as SVG to FILE instead of the table
      --failures           resume: the failure budget's pause, and a new count of failed reboots
      --version V          pause: halt OS version V; resume: lift its halts (a person's and
                           --max-failed-per-version's), and a new count of its failures
      --kubeconfig PATH    kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the
                           pod's service account)
      --context NAME       kubeconfig context (default: the current one)
  -n, --namespace NS       the operator's namespace, where ConfigMap slipway-fleet lives
                           (default slipway-system)
      --request-timeout D  give up on a request after D (default 30s)
`

type options struct {
	kubeconfig, context, namespace string
	output                         string
	group, reason                  string
	policy                         string
	failures                       bool
	version                        string
	// nodes, except: pause|resume --nodes (names, or "all") and --except (names).
	nodes, except []string
	// all: status lists idle nodes with nothing to say one row each too.
	all bool
	// history: node ("" all), since (how far back) and svg (a file for the timeline, "" none).
	node     string
	since    time.Duration
	svg      string
	state    string
	timeout  time.Duration
	watch    bool
	interval time.Duration
}

// env is what Main takes from the process, replaceable in tests.
type env struct {
	now    func() time.Time
	getenv func(string) string
	zone   *time.Location
	// termWidth is stdout's terminal width (0: not a terminal); nil: none.
	termWidth func() int
	// tty: stdout is a terminal (--watch clears it between frames).
	tty bool
}

// Main runs one command line of the status plugin (args: without the program name) and returns the
// exit code (ExitOK, ExitError, ExitUsage). prog names the program in messages: "kubectl slipway",
// "update-operator".
func Main(prog string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, ok := stdout.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	width := func() int {
		if tty {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil {
				return w
			}
		}
		return 0
	}
	return run(ctx, prog, args, stdout, stderr, env{now: time.Now, getenv: os.Getenv, zone: time.Local, termWidth: width, tty: tty})
}

func run(ctx context.Context, prog string, args []string, stdout, stderr io.Writer, e env) int {
	cmd, o, err := parseArgs(args)
	switch {
	case errors.Is(err, flag.ErrHelp) || cmd == "help":
		fmt.Fprintf(stdout, usage, prog, historyHelp)
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", prog, err, prog)
		return ExitUsage
	case cmd == "version":
		fmt.Fprintln(stdout, version.String())
		return ExitOK
	}
	c, err := connect(o)
	if err == nil {
		switch cmd {
		case "status":
			err = c.status(ctx, stdout, stderr, o, e)
		case "pause":
			err = c.pause(ctx, stdout, o, e)
		case "history":
			err = c.history(ctx, stdout, o, e)
		case "versions":
			err = c.versions(ctx, stdout, o, e)
		case "resume":
			err = c.resume(ctx, stdout, o, e)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, err)
		return ExitError
	}
	return ExitOK
}

// parseArgs reads the command and its flags; flags may come before or after the command, as kubectl
// users type them.
func parseArgs(args []string) (string, options, error) {
	o := options{namespace: DefaultNamespace, output: "text", timeout: 30 * time.Second, interval: 2 * time.Second}
	fs := flag.NewFlagSet("slipway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&o.context, "context", "", "")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "")
	fs.StringVar(&o.namespace, "n", o.namespace, "")
	fs.StringVar(&o.output, "output", o.output, "")
	fs.StringVar(&o.output, "o", o.output, "")
	fs.StringVar(&o.group, "group", "", "")
	fs.StringVar(&o.policy, "policy", "", "")
	fs.StringVar(&o.reason, "reason", "", "")
	fs.BoolVar(&o.failures, "failures", false, "")
	fs.StringVar(&o.version, "version", "", "")
	fs.StringVar(&o.state, "state", "", "")
	var nodesFlag, exceptFlag string
	fs.StringVar(&nodesFlag, "nodes", "", "")
	fs.BoolVar(&o.all, "all", false, "")
	fs.DurationVar(&o.since, "since", 24*time.Hour, "")
	fs.StringVar(&o.svg, "svg", "", "")
	fs.StringVar(&exceptFlag, "except", "", "")
	fs.DurationVar(&o.timeout, "request-timeout", o.timeout, "")
	fs.BoolVar(&o.watch, "watch", false, "")
	fs.BoolVar(&o.watch, "w", false, "")
	fs.DurationVar(&o.interval, "interval", o.interval, "")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", o, err
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	cmd := "status"
	switch {
	case len(pos) == 0:
	case len(pos) == 1:
		cmd = pos[0]
	case len(pos) == 2 && pos[0] == "history":
		cmd, o.node = pos[0], pos[1]
		if bad := validation.IsDNS1123Subdomain(o.node); len(bad) > 0 {
			return "", o, fmt.Errorf("history: node name %q: %s", o.node, strings.Join(bad, "; "))
		}
	default:
		return "", o, fmt.Errorf("unexpected argument %q after %q", pos[len(pos)-1], pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	only := func(name string, cmds ...string) error {
		for _, c := range cmds {
			if c == cmd {
				return nil
			}
		}
		if set[name] {
			dash := "--"
			if len(name) == 1 {
				dash = "-"
			}
			return fmt.Errorf("%s%s is not a flag of %s", dash, name, cmd)
		}
		return nil
	}
	switch cmd {
	case "status", "pause", "resume", "history", "versions", "help", "version":
	default:
		return "", o, fmt.Errorf("unknown command %q: want status, pause, resume, history, versions or version", cmd)
	}
	for _, err := range []error{
		only("o", "status", "versions"), only("output", "status", "versions"),
		only("group", "status", "pause", "resume"), only("policy", "status", "pause", "resume"), only("reason", "pause", "resume"), only("failures", "resume"), only("version", "pause", "resume"),
		only("nodes", "pause", "resume"), only("except", "pause", "resume"),
		only("state", "status"), only("all", "status"), only("watch", "status"), only("since", "history"), only("svg", "history"), only("w", "status"), only("interval", "status"),
	} {
		if err != nil {
			return "", o, err
		}
	}
	switch o.output {
	case "text", "wide", "json":
	default:
		return "", o, fmt.Errorf("unknown output format %q: want text, wide or json", o.output)
	}
	if o.namespace == "" {
		return "", o, errors.New("--namespace must not be empty")
	}
	if o.state != "" && !slices.Contains(states, protocol.State(o.state)) {
		return "", o, fmt.Errorf("--state %q: want one of %v", o.state, states)
	}
	if o.group != "" {
		if bad := validation.IsConfigMapKey(fleetswitch.GroupPausePrefix + o.group); len(bad) > 0 {
			return "", o, fmt.Errorf("--group %q: %s", o.group, strings.Join(bad, "; "))
		}
	}
	if o.since <= 0 {
		return "", o, fmt.Errorf("--since %s: must be positive", o.since)
	}
	if o.timeout <= 0 {
		return "", o, fmt.Errorf("--request-timeout %s: must be positive", o.timeout)
	}
	if o.policy != "" {
		if bad := validation.IsDNS1123Subdomain(o.policy); len(bad) > 0 {
			return "", o, fmt.Errorf("--policy %q: %s", o.policy, strings.Join(bad, "; "))
		}
		if o.group != "" || o.failures || o.version != "" {
			return "", o, errors.New("--policy with --group, --failures or --version: give one of them")
		}
	}
	if set["nodes"] {
		var err error
		if o.nodes, err = parseNodeNames("nodes", nodesFlag); err != nil {
			return "", o, err
		}
		if o.group != "" || o.policy != "" || o.failures || o.version != "" {
			return "", o, errors.New("--nodes with --group, --policy, --failures or --version: give one of them")
		}
	}
	if set["except"] {
		if !set["nodes"] {
			return "", o, errors.New("--except without --nodes: give --nodes all --except NODES")
		}
		var err error
		if o.except, err = parseNodeNames("except", exceptFlag); err != nil {
			return "", o, err
		}
	}
	if cmd == "resume" && o.reason != "" && !o.failures && o.version == "" && o.policy == "" {
		return "", o, errors.New("--reason with resume: only with --failures or --version (kept in the fleet record)")
	}
	if set["interval"] && !o.watch {
		return "", o, errors.New("--interval without --watch: give -w too")
	}
	if o.interval <= 0 {
		return "", o, fmt.Errorf("--interval %s: must be positive", o.interval)
	}
	if o.failures && o.group != "" {
		return "", o, errors.New("--failures and --group: the failure budget pauses the whole fleet; give one of them")
	}
	if set["version"] {
		if o.failures || o.group != "" {
			return "", o, errors.New("--version with --failures or --group: give one of them")
		}
		if err := protocol.ValidVersion(o.version); err != nil {
			return "", o, fmt.Errorf("--version %q: %w", o.version, err)
		}
		raw := o.version
		o.version = protocol.NormalVersion(o.version) // as the operator keeps it: 4593.2.5+dev-1 is 4593.2.5-dev-1
		if strings.Trim(o.version, "._-") == "" {
			return "", o, fmt.Errorf("--version %q names no version", raw)
		}
	}
	return cmd, o, nil
}

// states are the values of --state.
var states = []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining, protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks}

// client is a connection to one cluster.
type client struct {
	cs     kubernetes.Interface
	dyn    dynamic.Interface // RebootPolicies
	host   string
	config clientcmd.ClientConfig
	clock  *serverClock
}

// connect loads the kubeconfig as kubectl does (--kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; inside a pod with none of them, its service account).
func connect(o options) (*client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no kubeconfig: pass --kubeconfig, set $KUBECONFIG or create ~/.kube/config")
	case err != nil:
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = o.timeout
	cfg.UserAgent = "kubectl-slipway/" + version.Version
	clock := &serverClock{}
	cfg.Wrap(clock.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return &client{cs: cs, dyn: dyn, host: cfg.Host, config: cc, clock: clock}, nil
}

// explain turns an API error into what a person can act on.
func (c *client) explain(what string, err error) error {
	var uerr *url.Error
	var nerr net.Error
	switch {
	case errors.As(err, &uerr), errors.As(err, &nerr):
		return fmt.Errorf("cannot reach the API server at %s (%s): %w", c.host, what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: not allowed (%w)", what, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server did not accept the kubeconfig's credentials (%w)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *client) fleetConfigMap(ctx context.Context, ns string) (*corev1.ConfigMap, error) {
	cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, c.explain("reading ConfigMap "+ns+"/"+fleetswitch.ConfigMapName, err)
	}
	return cm, nil
}

// record reads the fleet record (the empty record when there is none yet).
func (c *client) record(ctx context.Context, ns string) (fleetrecord.Record, error) {
	cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fleetrecord.Record{}, nil
	}
	if err != nil {
		return fleetrecord.Record{}, c.explain("reading ConfigMap "+ns+"/"+fleetrecord.ConfigMapName, err)
	}
	rec, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
	if err != nil {
		return fleetrecord.Record{}, fmt.Errorf("ConfigMap %s/%s: %w", ns, fleetrecord.ConfigMapName, err)
	}
	return rec, nil
}

// report reads the Nodes, the ConfigMap and the Lease and builds the report at e.now().
func (c *client) report(ctx context.Context, o options, e env) (Report, error) {
	var nodes []corev1.Node
	// Pages of 500, as kubectl get lists: a fleet of thousands is not one response.
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.cs.CoreV1().Nodes().List(ctx, opts)
	}))
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		nodes = append(nodes, *obj.(*corev1.Node))
		return nil
	})
	if err != nil {
		return Report{}, c.explain("listing Nodes", err)
	}
	cm, err := c.fleetConfigMap(ctx, o.namespace)
	if err != nil {
		return Report{}, err
	}
	now := e.now()
	rec, recErr := c.record(ctx, o.namespace)
	rps, rpErr := c.policies(ctx)
	r := BuildWithPolicies(nodes, cm, rec, rps, o.namespace, now)
	if rpErr != nil {
		r.Fleet.Problems = append([]Problem{{Kind: "policies-unreadable", What: rpErr.Error() + ": nodes are shown without their RebootPolicies",
			Do: "ask for list on rebootpolicies.update.slipway.dev"}}, r.Fleet.Problems...)
	}
	if recErr != nil {
		// The view still shows everything else; this comes first.
		r.Fleet.Problems = append([]Problem{{Kind: "record-unreadable", What: recErr.Error() + ": the operator holds every admission",
			Do: "restore the record from a backup or mend its JSON (docs/troubleshooting.md); never delete it"}}, r.Fleet.Problems...)
	}
	r.WithLease(c.lease(ctx, o.namespace, now))
	r.Nodes = filterNodes(r.Nodes, o.group, o.state)
	if o.policy != "" {
		kept := []Node{}
		for _, n := range r.Nodes {
			if n.Policy == o.policy {
				kept = append(kept, n)
			}
		}
		r.Nodes = kept
	}
	return r, nil
}

// policies lists the RebootPolicies; none when their CRD is not installed.
func (c *client) policies(ctx context.Context) ([]v1alpha1.RebootPolicy, error) {
	l, err := c.dyn.Resource(v1alpha1.Resource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, c.explain("listing RebootPolicies", err)
	}
	var out []v1alpha1.RebootPolicy
	for _, u := range l.Items {
		var rp v1alpha1.RebootPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rp); err != nil {
			return nil, fmt.Errorf("RebootPolicy %s: %w", u.GetName(), err)
		}
		out = append(out, rp)
	}
	return out, nil
}

// pausePolicy sets (or clears) RebootPolicy name's spec.paused and pausedReason.
func (c *client) pausePolicy(ctx context.Context, w io.Writer, o options, paused bool) error {
	spec := map[string]interface{}{"paused": paused, "pausedReason": nil}
	if paused && o.reason != "" {
		spec["pausedReason"] = o.reason
	}
	body, _ := json.Marshal(map[string]interface{}{"spec": spec})
	_, err := c.dyn.Resource(v1alpha1.Resource).Patch(ctx, o.policy, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no RebootPolicy %q (kubectl get rebootpolicies lists them)", o.policy)
	}
	if err != nil {
		return c.explain("patching RebootPolicy "+o.policy, err)
	}
	if paused {
		fmt.Fprintf(w, "policy %s paused: %s\nNo new reboot cycle starts in it; nodes in their cycle finish it. Undo: resume --policy %s.\n", o.policy, orUnsaid(o.reason), o.policy)
	} else {
		fmt.Fprintf(w, "policy %s resumed\n", o.policy)
	}
	return nil
}

// write writes one report in the format of -o.
func write(w io.Writer, r Report, o options, e env) error {
	switch o.output {
	case "json":
		return WriteJSON(w, r)
	case "wide":
		return WriteText(w, r, TextOptions{Location: e.zone, All: o.all})
	}
	width := DefaultWidth
	if e.termWidth != nil {
		if n := e.termWidth(); n > 0 {
			width = n // the terminal's own width: bash does not export $COLUMNS
		}
	}
	if n, err := strconv.Atoi(e.getenv("COLUMNS")); err == nil && n > 0 {
		width = n
	}
	return WriteText(w, r, TextOptions{Width: width, Location: e.zone, All: o.all || o.state != ""})
}

// clearScreen moves the cursor home and clears the terminal (ANSI), between --watch frames.
const clearScreen = "\x1b[H\x1b[2J"

func (c *client) status(ctx context.Context, w, errW io.Writer, o options, e env) error {
	if !o.watch {
		r, err := c.report(ctx, o, e)
		if err != nil {
			return err
		}
		return write(w, r, o, e)
	}
	// --watch: a frame every interval until ctx ends (Ctrl-C: exit 0). A frame that cannot be read is
	// said on stderr and the next one tried, but the first must work: nothing else says the command
	// line is right.
	for frame := 0; ; frame++ {
		r, err := c.report(ctx, o, e)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && frame == 0:
			return err
		case err != nil:
			fmt.Fprintf(errW, "%s: %v (next try in %s)\n", e.now().In(zoneOr(e.zone)).Format("15:04:05 MST"), err, o.interval)
		default:
			var b bytes.Buffer // one write per frame: no half-drawn screen
			if o.output != "json" {
				switch {
				case e.tty:
					b.WriteString(clearScreen)
				case frame > 0:
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "Every %s: %s\n\n", o.interval, r.Time.In(zoneOr(e.zone)).Format("2006-01-02 15:04:05 MST"))
			}
			if err := write(&b, r, o, e); err != nil {
				return err
			}
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
		}
		t := time.NewTimer(o.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func zoneOr(l *time.Location) *time.Location {
	if l == nil {
		return time.UTC
	}
	return l
}

// LeaseName is the operator's leader-election Lease (its --lease-name default).
const LeaseName = "slipway-update-operator"

// lease reads the operator's leader Lease; nil when it is missing or not readable (the view then
// says the leader is as last published).
func (c *client) lease(ctx context.Context, ns string, now time.Time) *Lease {
	l, err := c.cs.CoordinationV1().Leases(ns).Get(ctx, LeaseName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	out := &Lease{}
	if l.Spec.HolderIdentity != nil {
		out.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil {
		out.Duration = int(*l.Spec.LeaseDurationSeconds)
	}
	if l.Spec.RenewTime != nil {
		t := l.Spec.RenewTime.UTC()
		out.Renewed = &t
		out.Live = out.Holder != "" && now.Sub(t) <= time.Duration(out.Duration)*time.Second
	}
	return out
}

// filterNodes keeps the rows of one budget group and/or one state ("" any).
func filterNodes(nodes []Node, group, state string) []Node {
	if group == "" && state == "" {
		return nodes
	}
	out := []Node{}
	for _, n := range nodes {
		if (group == "" || n.Group == group) && (state == "" || string(n.State) == state) {
			out = append(out, n)
		}
	}
	return out
}

// who pauses: the kubeconfig context's user, else $USER.
func (c *client) who(o options, e env) string {
	if raw, err := c.config.RawConfig(); err == nil {
		name := o.context
		if name == "" {
			name = raw.CurrentContext
		}
		if ctx := raw.Contexts[name]; ctx != nil && ctx.AuthInfo != "" {
			return ctx.AuthInfo
		}
	}
	if u := e.getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func (c *client) pause(ctx context.Context, w io.Writer, o options, e env) error {
	if o.policy != "" {
		return c.pausePolicy(ctx, w, o, true)
	}
	if o.version != "" {
		return c.haltVersion(ctx, w, o, e)
	}
	if len(o.nodes) > 0 {
		return c.pauseNodes(ctx, w, o, e)
	}
	by := c.who(o, e)
	patch := fleetswitch.PausePatch(o.group, o.reason, by, e.now())
	what := "patching ConfigMap " + o.namespace + "/" + fleetswitch.ConfigMapName
	cms := c.cs.CoreV1().ConfigMaps(o.namespace)
	_, err := cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		// No switch yet (the operator creates it when it first publishes): make it.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: o.namespace}, Data: patchData(patch)}
		what = "creating ConfigMap " + o.namespace + "/" + fleetswitch.ConfigMapName
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // created in between: patch it after all
			_, err = cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s does not exist: is Slipway installed there? (see -n)", o.namespace)
		}
	}
	if err != nil {
		return c.explain(what, err)
	}
	if o.group == "" {
		fmt.Fprintf(w, "fleet paused by %s: %s\nNo new reboot cycle starts; nodes in their cycle finish it. Undo: resume.\n", by, orUnsaid(o.reason))
	} else {
		fmt.Fprintf(w, "group %s paused by %s: %s\nNo new reboot cycle starts in it; nodes in their cycle finish it. Undo: resume --group %s.\n", o.group, by, orUnsaid(o.reason), o.group)
	}
	return nil
}

func (c *client) resume(ctx context.Context, w io.Writer, o options, e env) error {
	if o.policy != "" {
		return c.pausePolicy(ctx, w, o, false)
	}
	if len(o.nodes) > 0 {
		return c.resumeNodes(ctx, w, o)
	}
	if o.version != "" || o.failures {
		if err := c.remember(ctx, w, o, e); err != nil {
			return err
		}
		if o.version != "" {
			return nil
		}
	}
	// Read, then write conditionally on what was read: a pause set in between (a person's, or the
	// operator's failure pause) makes the write fail and the decision is made again on the new state --
	// but never to lift a pause the person did not see: a colleague who paused meanwhile keeps it.
	var seen *fleetswitch.Switch
	for attempt := 0; ; attempt++ {
		cm, err := c.fleetConfigMap(ctx, o.namespace)
		if err != nil {
			return err
		}
		sw := fleetswitch.Read(cm)
		if seen == nil {
			seen = &sw
		} else if changed := pauseChanged(*seen, sw, o.group); changed != "" {
			return fmt.Errorf("not resumed: %s since this resume read it; nothing was changed (run resume again if you mean to lift that pause)", changed)
		}
		var patch []byte
		var said []string
		switch {
		case o.failures:
			if !sw.FailuresPaused {
				fmt.Fprintln(w, "the fleet was not paused by the failure budget")
				if sw.Paused {
					fmt.Fprintf(w, "the fleet is still paused by %s: %s (resume)\n", orUnsaid(sw.By), orUnsaid(sw.Reason))
				}
				return nil
			}
			patch = fleetswitch.ResumeFailuresPatch()
			said = append(said, "failure budget's pause lifted (was: "+orUnsaid(sw.FailuresReason)+")")
			if sw.Paused {
				said = append(said, fmt.Sprintf("the fleet is still paused by %s: %s (resume)", orUnsaid(sw.By), orUnsaid(sw.Reason)))
			}
		case o.group != "":
			was, paused := sw.Groups[o.group]
			if !paused {
				fmt.Fprintf(w, "group %s is not paused\n", o.group)
				return nil
			}
			patch = fleetswitch.ResumePatch(o.group)
			said = append(said, fmt.Sprintf("group %s resumed (was paused: %s)", o.group, orUnsaid(was)))
		default:
			if !sw.Paused {
				fmt.Fprintln(w, "fleet is not paused")
				if sw.FailuresPaused {
					fmt.Fprintf(w, "it is held by the failure budget: %s\nfix the failed nodes, then: resume --failures\n", orUnsaid(sw.FailuresReason))
				}
				if len(sw.Groups) > 0 {
					fmt.Fprintf(w, "paused groups: %s (resume --group GROUP)\n", strings.Join(sw.PausedGroups(), ", "))
				}
				return nil
			}
			patch = fleetswitch.ResumePatch("")
			said = append(said, fmt.Sprintf("fleet resumed (was paused: %s)", orUnsaid(sw.Reason)))
			if sw.FailuresPaused {
				said = append(said, fmt.Sprintf("still held by the failure budget: %s (resume --failures)", orUnsaid(sw.FailuresReason)))
			}
			if len(sw.Groups) > 0 {
				said = append(said, "still paused groups: "+strings.Join(sw.PausedGroups(), ", "))
			}
		}
		if cm != nil {
			patch = withResourceVersion(patch, cm.ResourceVersion)
		}
		_, err = c.cs.CoreV1().ConfigMaps(o.namespace).Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // changed since we read it: decide again
		}
		if err != nil {
			return c.explain("patching ConfigMap "+o.namespace+"/"+fleetswitch.ConfigMapName, err)
		}
		for _, l := range said {
			fmt.Fprintln(w, l)
		}
		return nil
	}
}

// writeRecordKeys sets keys of the fleet record's ConfigMap (others are kept as read), creating it
// when there is none, conditional on what it read and read again after a conflict: change gets the
// ConfigMap as read (nil: none) and the API server's clock from that read (never this machine's),
// and returns the keys to set. It returns that clock.
func (c *client) writeRecordKeys(ctx context.Context, ns string, change func(cm *corev1.ConfigMap, at time.Time) (map[string]string, error)) (time.Time, error) {
	cms := c.cs.CoreV1().ConfigMaps(ns)
	what := "the fleet record ConfigMap " + ns + "/" + fleetrecord.ConfigMapName
	for attempt := 0; ; attempt++ {
		cm, err := cms.Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = nil
		} else if err != nil {
			return time.Time{}, c.explain("reading "+what, err)
		}
		at, ok := c.clock.last()
		if !ok {
			return time.Time{}, fmt.Errorf("reading %s: the API server's answer carried no Date header, and nothing is stamped with this machine's clock", what)
		}
		data, err := change(cm, at)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", what, err)
		}
		if cm == nil {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/part-of": "slipway"}}, Data: data}, metav1.CreateOptions{})
		} else {
			cm = cm.DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			for k, v := range data {
				cm.Data[k] = v
			}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{}) // conditional on the resourceVersion read
		}
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 5 {
			continue // the operator or a colleague wrote it meanwhile: read again
		}
		if apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("namespace %s does not exist: is Slipway installed there? (see -n)", ns)
		}
		if err != nil {
			return time.Time{}, c.explain("writing "+what, err)
		}
		return at, nil
	}
}

// haltVersion writes a person's halt of --version into the fleet's versions (key
// fleetrecord.VersionsKey of the record's ConfigMap, beside the record): who (the API server's answer
// to "who am I"), when (the API server's clock) and why. The record's own key is left as it is.
func (c *client) haltVersion(ctx context.Context, w io.Writer, o options, e env) error {
	by := c.whoAmI(ctx, o, e)
	at, err := c.writeRecordKeys(ctx, o.namespace, func(cm *corev1.ConfigMap, at time.Time) (map[string]string, error) {
		var vers fleetrecord.Versions
		if cm != nil {
			var err error
			if vers, err = fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey]); err != nil {
				return nil, fmt.Errorf("key %s cannot be read (%v): mend it first; nothing was written", fleetrecord.VersionsKey, err)
			}
		}
		vers.AddHalt(fleetrecord.Halt{Version: o.version, By: by, At: at, Why: o.reason})
		return map[string]string{fleetrecord.VersionsKey: vers.Encode()}, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "version %s halted by %s at %s (API server time): %s\nNo node is admitted to reboot into it; nodes in their cycle finish it. Undo: resume --version %s.\n",
		o.version, by, at.UTC().Format(time.RFC3339), orUnsaid(o.reason), o.version)
	return nil
}

// remember writes a resume of --version or --failures into the fleet record: who (the API server's
// answer to "who am I"), when (the API server's clock, from the answer to the read the write is
// conditional on) and why. The failures recorded before it no longer count for what it resumes; a
// resume of a version also lifts the halts people set on it, in the same write.
func (c *client) remember(ctx context.Context, w io.Writer, o options, e env) error {
	by := c.whoAmI(ctx, o, e)
	var before, lifted int
	var versErr error
	at, err := c.writeRecordKeys(ctx, o.namespace, func(cm *corev1.ConfigMap, at time.Time) (map[string]string, error) {
		var rec fleetrecord.Record
		if cm != nil {
			var err error
			if rec, err = fleetrecord.Decode(cm.Data[fleetrecord.Key]); err != nil {
				return nil, fmt.Errorf("cannot be read (%v): mend it first; nothing was written", err)
			}
		}
		before = len(rec.VersionFailures(o.version))
		if o.failures {
			before = len(rec.BudgetFailures())
		}
		rec.AddResume(fleetrecord.Resume{Version: o.version, By: by, At: at, Why: o.reason})
		data := map[string]string{fleetrecord.Key: rec.Encode()}
		lifted, versErr = 0, nil
		if o.version != "" && cm != nil {
			// No clock decides whether a halt came before this resume: it lifts the ones it read.
			var vers fleetrecord.Versions
			if vers, versErr = fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey]); versErr == nil {
				if lifted = vers.Lift(o.version, by, at); lifted > 0 {
					data[fleetrecord.VersionsKey] = vers.Encode()
				}
			}
		}
		return data, nil
	})
	if err != nil {
		return err
	}
	stamp := at.UTC().Format(time.RFC3339)
	if o.version == "" {
		fmt.Fprintf(w, "failure budget reset by %s at %s (API server time): the %d nodes' failed reboots recorded before then no longer count\n", by, stamp, before)
		return nil
	}
	fmt.Fprintf(w, "version %s resumed by %s at %s (API server time): its %d failed reboots recorded before then no longer count for its halt (--max-failed-per-version) or its canaries\n", o.version, by, stamp, before)
	if lifted > 0 {
		fmt.Fprintf(w, "%d halt(s) of %s lifted (pause --version)\n", lifted, o.version)
	}
	if versErr != nil {
		fmt.Fprintf(w, "the fleet's versions (key %s) cannot be read (%v): a halt of %s set with pause --version stays; mend the key\n", fleetrecord.VersionsKey, versErr, o.version)
	}
	return nil
}

// whoAmI is the user the API server authenticates this client as (SelfSubjectReview), else the
// kubeconfig's user name, marked as such.
func (c *client) whoAmI(ctx context.Context, o options, e env) string {
	r, err := c.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err == nil && r.Status.UserInfo.Username != "" {
		return r.Status.UserInfo.Username
	}
	return c.who(o, e) + " (kubeconfig user; the API server did not say who)"
}

// serverClock remembers the Date header of the API server's last answer: the cluster's clock, where
// a laptop's may be minutes off (and a resume stamped ahead of the failures it means to lift would
// lift the ones after it too).
type serverClock struct {
	mu sync.Mutex
	at time.Time
}

func (s *serverClock) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				s.mu.Lock()
				s.at = t
				s.mu.Unlock()
			}
		}
		return resp, err
	})
}

func (s *serverClock) last() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at, !s.at.IsZero()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pauseChanged says how the pause a resume of group ("" the fleet) would lift changed between what was
// read first (was) and now ("" it did not).
func pauseChanged(was, now fleetswitch.Switch, group string) string {
	if group != "" {
		if was.Groups[group] != now.Groups[group] {
			return fmt.Sprintf("group %s was paused again (%s)", group, orUnsaid(now.Groups[group]))
		}
		return ""
	}
	if was.Paused != now.Paused || was.Reason != now.Reason || was.By != now.By || !was.At.Equal(now.At) {
		return fmt.Sprintf("the fleet was paused again by %s: %s", orUnsaid(now.By), orUnsaid(now.Reason))
	}
	return ""
}

// withResourceVersion makes a merge patch conditional on the object's resourceVersion.
func withResourceVersion(patch []byte, rv string) []byte {
	var m map[string]interface{}
	if err := json.Unmarshal(patch, &m); err != nil {
		return patch
	}
	m["metadata"] = map[string]interface{}{"resourceVersion": rv}
	out, _ := json.Marshal(m)
	return out
}

// patchData is the data a merge patch from package fleetswitch sets (its nulls delete, so they set nothing).
func patchData(patch []byte) map[string]string {
	var p struct{ Data map[string]*string }
	_ = json.Unmarshal(patch, &p)
	out := map[string]string{}
	for k, v := range p.Data {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
