// Command update-operator coordinates reboots of a Kubernetes cluster's Flatcar nodes: it admits
// nodes that need a reboot within a budget and a reboot window, runs hooks, drains, grants reboot-ok,
// verifies the reboot and uncordons. Leader-elected, so several replicas are safe. This file only
// wires flags, leader election and the HTTP endpoints; the behaviour lives in package operator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/flagenv"
	"github.com/slipway-dev/slipway/internal/fluoflags"
	"github.com/slipway-dev/slipway/internal/httpserve"
	"github.com/slipway-dev/slipway/internal/kubeclient"
	"github.com/slipway-dev/slipway/internal/logformat"
	"github.com/slipway-dev/slipway/internal/serverclock"
	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/fence"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/remediation"
	"github.com/slipway-dev/slipway/operator/status"
)

const usage = `update-operator: coordinates safe reboots of Flatcar nodes (FLUO-compatible).

Every flag can also be set as UPDATE_OPERATOR_<FLAG> (e.g. UPDATE_OPERATOR_REBOOT_WINDOW_START),
as with FLUO. Flags on the command line win.

Flags:
`

// listFlag accepts comma-separated values and repeats (FLUO's annotation flags are comma-separated).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// selectorFlag takes one whole label selector per flag, commas included, as kured's
// --blocking-pod-selector does: "a=b,c=d" is one selector (both must match); repeat the flag for
// either of two.
type selectorFlag []string

func (l *selectorFlag) String() string { return strings.Join(*l, " | ") }
func (l *selectorFlag) Set(s string) error {
	*l = append(*l, strings.TrimSpace(s))
	return nil
}

type options struct {
	// spec is the reboot policy: the policy flags bind straight into it (package policy).
	spec                          policy.Spec
	kubeconfig                    string
	limits                        kubeclient.Limits
	profiling                     bool
	notifyURLs                    urlsFlag
	notifyBlockedAfter            time.Duration
	templateDrain, templateReboot string
	templateUncordon              string
	// remediationLeaseNamespace: medik8s' lease namespace ("" no lease fence); machinesKubeconfig:
	// the Cluster API management cluster's kubeconfig ("" no Machine fence).
	remediationLeaseNamespace, machinesKubeconfig string
	machinesNamespace                             string
	namespace, leaseName, identity                string
	leaderElect                                   bool
	leaseDuration, renewDeadline, retryPeriod     time.Duration
	httpAddr, fleetlockAddr, profilingAddr        string
	printVersion                                  bool
	startPaused                                   bool
	logFormat                                     string
}

func main() {
	code := run()
	klog.Flush() // with -logtostderr=false (FLUO's klog flags) the last lines sit in a buffer
	os.Exit(code)
}

func parse(args []string) (*options, *flag.FlagSet, error) {
	o := &options{}
	def := policy.Defaults() // the policy flags' defaults
	fs := flag.NewFlagSet("update-operator", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster config (or $KUBECONFIG)")
	o.limits.AddFlags(fs, kubeclient.OperatorLimits)
	fs.StringVar(&o.spec.MaxUnavailable, "max-unavailable", def.MaxUnavailable, "nodes that may be unavailable at once: a count or a percentage of all nodes (rounded down, at least 1). Nodes in a reboot cycle, NotReady nodes and nodes cordoned by others all count")
	fs.StringVar(&o.spec.GroupLabel, "group-label", "", "node label whose values are budget groups, e.g. topology.kubernetes.io/zone; nodes without it form one group (a FleetLock node without it: the group its Zincati asks in)")
	fs.StringVar(&o.spec.MaxUnavailablePerGroup, "max-unavailable-per-group", "", "nodes of one group that may be unavailable at once (count or % of the group); empty: groups share --max-unavailable only. Both limits hold at every instant")
	fs.StringVar(&o.spec.MaxUnavailableControlPlane, "max-unavailable-control-plane", def.MaxUnavailableControlPlane, "control-plane nodes (label node-role.kubernetes.io/control-plane) that may be unavailable at once (count or %)")
	fs.StringVar(&o.spec.ControlPlaneOrder, "control-plane-order", def.ControlPlaneOrder, "\"none\" (workers and control plane compete for the budget), \"workers-first\" (no control-plane node starts while a worker waits or is in its cycle) or \"control-plane-first\"")
	fs.IntVar(&o.spec.MaxFailedReboots, "max-failed-reboots", 0, "pause the whole fleet (failures-paused) once this many nodes of the current roll-out stalled after their reboot was granted (see --reboot-timeout) or came back on their old OS version (only a node's own evidence counts: a fleet-wide blocker holds the fleet, it fails no node); a person resumes it (kubectl slipway resume --failures, which starts a new count); 0 never")
	fs.Var((*selectorFlag)(&o.spec.BlockingPodSelectors), "blocking-pod-selector", "label selector (kubectl syntax, e.g. app=backup or 'app=db,tier in (primary,replica)'): a node waits while an unfinished pod matching it runs on that node; one whole selector per flag, repeat the flag for several (kured's flag, same meaning)")
	fs.Var((*selectorFlag)(&o.spec.BlockingPodSelectorsInCluster), "blocking-pod-selector-in-cluster", "label selector: no node starts a reboot while an unfinished matching pod exists anywhere in the cluster; one whole selector per flag, repeat the flag for several")
	fs.StringVar(&o.spec.Alerts.PrometheusURL, "prometheus-url", "", "Prometheus (or Thanos Querier) base URL: no node starts a reboot while a matching alert fires; unreachable means wait too (fail closed); empty disables")
	fs.StringVar(&o.spec.Alerts.Include, "alert-include", "", "regexp (unanchored) on alert names: only matching alerts block; empty: all")
	fs.StringVar(&o.spec.Alerts.Exclude, "alert-exclude", "", "regexp (unanchored) on alert names: matching alerts never block, e.g. ^(Watchdog|InfoInhibitor)$")
	fs.BoolVar(&o.spec.Alerts.FiringOnly, "alert-firing-only", def.Alerts.FiringOnly, "only firing alerts block; false also counts pending ones (kured's default)")
	fs.Var((*selectorFlag)(&o.spec.Alerts.Require), "alert-require", "alert name that must be firing for any node to start (default with --prometheus-url: Watchdog, kube-prometheus' always-firing alert): an empty answer from a Prometheus that just started or lost its rules then holds the fleet; it never blocks itself; repeatable")
	fs.BoolVar(&o.spec.Alerts.AcceptEmpty, "alert-accept-empty", false, "with --prometheus-url and no --alert-require: admit on an answer without any alert (fail open: a Prometheus that lost its rules lets every node go); default false, which requires Watchdog")
	fs.StringVar(&o.spec.MinReadyNodes, "min-ready-nodes", "", "admit a node only if at least this many other nodes stay Ready, schedulable and out of a cycle: a count or % of all nodes (rounded up); empty disables")
	fs.Var(&o.notifyURLs, "notify-url", "send notifications (cycle started, finished or aborted; stalled; fleet paused; blocked longer than --notify-blocked-after) to this shoutrrr URL, as kured's --notify-url: slack://, teams://, telegram://, ntfy://, smtp://user:pass@host:587/?from=...&to=..., generic://host/path?template=json, logger:// ...; repeatable (several in UPDATE_OPERATOR_NOTIFY_URL separated by spaces); none: off")
	fs.StringVar(&o.templateDrain, "message-template-drain", "", "kured's flag, kured's meaning: the --notify-url message when a node's cycle starts, its %s the node's name (kured's default: \"Draining node %s\"); empty: Slipway's own message")
	fs.StringVar(&o.templateReboot, "message-template-reboot", "", "kured's flag, kured's meaning: the --notify-url message when a drained node is granted its reboot, its %s the node's name (kured's default: \"Rebooting node %s\"); empty: Slipway's own message")
	fs.StringVar(&o.templateUncordon, "message-template-uncordon", "", "kured's flag, kured's meaning: the --notify-url message when a node's reboot is verified and its cycle ends (uncordoned), its %s the node's name (kured's default: \"Node %s rebooted & uncordoned successfully!\"); empty: Slipway's own message")
	fs.StringVar(&o.remediationLeaseNamespace, "remediation-lease-namespace", "", "tell medik8s NodeHealthCheck that a node in its cycle reboots on purpose: hold its Lease node-<node> in this namespace (medik8s-leases) from the cordon until the node is verified back, each stage for --reboot-timeout (a stalled node is let go); needs RBAC for leases there (deploy/remediation-fence); empty: off")
	fs.StringVar(&o.machinesKubeconfig, "remediation-machines-kubeconfig", "", "tell Cluster API's MachineHealthCheck that a node in its cycle reboots on purpose: a kubeconfig file (a mounted Secret) of the management cluster, whose RBAC allows get, list and patch on machines only; the node's Machine carries cluster.x-k8s.io/skip-remediation from the cordon until the node is verified back (a stalled node is let go); empty: off")
	fs.StringVar(&o.machinesNamespace, "remediation-machines-namespace", "", "with --remediation-machines-kubeconfig: the management cluster's namespace of this workload cluster's Machines; only Machines there are touched or listed (RBAC may then be a Role there); empty: any namespace")
	fs.DurationVar(&o.notifyBlockedAfter, "notify-blocked-after", time.Hour, "notify once when nodes have been held this long by a pause or a blocker (not the plan: the budget, a window, the control-plane order, settling, canaries); once per episode, once per blocker fleet-wide; 0 never")
	fs.Var((*multiFlag)(&o.spec.Windows), "reboot-window", "a reboot window \"[DAYS ]HH:MM-HH:MM[ ZONE]\", e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\"; DAYS like Mon-Fri, Sat,Sun, Mon,Wed-Fri, Fri-Mon or * (default every day), or days of each month: 3rd-Tue, last-Fri, 16 (mixable: 1st-Sat,15), naming the day the window starts; an end at or before the start is on the next day; ZONE an IANA name (default UTC). \"kured DAYS START-END [ZONE]\" takes kured's --reboot-days, --start-time, --end-time and --time-zone with kured's meaning (the weekday of the instant: \"kured mon,fri 22:00-05:00\" is never open early Saturday). Repeat for more windows: new cycles start only while one is open (FLUO's --reboot-window-start/length is one more); none means always")
	fs.Var((*multiFlag)(&o.spec.Exclusions), "reboot-exclusion", "a change freeze during which no new cycle starts, \"FROM/TO[ ZONE]\" with FROM and TO as YYYY-MM-DD (whole days, inclusive) or YYYY-MM-DDTHH:MM, or a single YYYY-MM-DD; e.g. \"2026-11-27/2026-12-01 America/New_York\". Wins over every window; cycles in flight finish. Repeatable")
	fs.StringVar(&o.spec.FLUOWindow.Start, "reboot-window-start", "", "start of the reboot window, FLUO format: \"14:00\" (daily) or \"Thu 14:00\" (weekly)")
	fs.StringVar(&o.spec.FLUOWindow.Length, "reboot-window-length", "", "length of the reboot window, e.g. \"1h30m\"")
	fs.StringVar(&o.spec.FLUOWindow.TimeZone, "reboot-window-timezone", def.FLUOWindow.TimeZone, "IANA time zone the reboot window is in, e.g. \"Europe/Berlin\"")
	fs.Var((*listFlag)(&o.spec.Hooks.Before), "before-reboot-annotations", "annotations (comma-separated) that must all be \"true\" before a node with the before-reboot label is drained")
	fs.Var((*listFlag)(&o.spec.Hooks.After), "after-reboot-annotations", "annotations (comma-separated) that must all be \"true\" before a rebooted node with the after-reboot label is finished")
	fs.DurationVar(&o.spec.Drain.Timeout.Duration, "drain-timeout", def.Drain.Timeout.Duration, "time one drain attempt may take (PDB refusals are retried within it); 0 means no limit")
	o.spec.Drain.GracePeriod = def.Drain.GracePeriod
	fs.Var((*graceFlag)(&o.spec.Drain.GracePeriod.Duration), "drain-grace-period", "termination grace period for evicted pods: a duration (30s) or whole seconds as kured takes it (30); negative uses each pod's own (default -1s)")
	fs.BoolVar(&o.spec.Drain.Force, "force-drain", false, "also evict pods that no controller manages (they are gone for good)")
	fs.StringVar(&o.spec.Drain.FailurePolicy, "drain-failure-policy", def.Drain.FailurePolicy, "after a failed or timed-out drain: \"retry\" (keep cordoned, no reboot-ok, retry with backoff), \"skip\" (end the cycle, uncordon what Slipway cordoned, let the next node go; this one is retried after the other waiting nodes, not before --undrainable-retry) or \"force\" (grant reboot-ok anyway)")
	fs.DurationVar(&o.spec.Drain.UndrainableRetry.Duration, "undrainable-retry", def.Drain.UndrainableRetry.Duration, "--drain-failure-policy=skip: how long a node whose drain failed waits before it is admitted again")
	fs.DurationVar(&o.spec.Drain.RetryBase.Duration, "drain-retry-base", def.Drain.RetryBase.Duration, "first delay before retrying a failed drain (doubles per failure)")
	fs.DurationVar(&o.spec.Drain.RetryMax.Duration, "drain-retry-max", def.Drain.RetryMax.Duration, "longest delay between drain retries")
	fs.DurationVar(&o.spec.Drain.SkipWaitForDelete.Duration, "drain-skip-wait-for-delete-timeout", def.Drain.SkipWaitForDelete.Duration, "NotReady nodes only: a pod deleted longer ago than this is taken as gone (its kubelet cannot finish it), as kubectl drain's --skip-wait-for-delete-timeout; Ready nodes always wait")
	fs.Var((*secondsFlag)(&o.spec.Drain.SkipWaitForDeleteAll.Duration), "skip-wait-for-delete-timeout", "every node, Ready or not: a pod deleted longer ago than this is taken as gone, so a pod stuck Terminating (a finalizer nobody removes) does not time every drain attempt out; seconds (kured's form, e.g. 300) or a duration (5m); 0 (default) waits for every pod on Ready nodes. On NotReady nodes the shorter of this and --drain-skip-wait-for-delete-timeout applies")
	fs.DurationVar(&o.spec.Drain.Delay.Duration, "drain-delay", 0, "kured's flag, kured's meaning: wait this long after a node's cycle starts before its drain evicts anything (the node is cordoned at once, so nothing new lands on it meanwhile); 0: none. Counts toward --reboot-timeout's drain stage")
	fs.DurationVar(&o.spec.Drain.RebootDelay.Duration, "reboot-delay", 0, "kured's flag, kured's meaning: wait this long after a node's drain finished before it may reboot (it stays drained); 0: none. Counts toward --reboot-timeout's drain stage")
	fs.StringVar(&o.spec.Drain.PodSelector, "drain-pod-selector", "", "label selector (kubectl syntax): only pods matching it are evicted, the others stay on the node through its reboot (kured's flag, same meaning); empty: every pod")
	fs.Var((*selectorFlag)(&o.spec.HealthChecks), "health-check", "'RESOURCE.GROUP/NAME[@NAMESPACE]: CEL': no node starts a reboot unless the CEL expression over that live object (`object`) is true, e.g. 'deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas'; fails closed (object missing, expression error, not a bool, RBAC refusal); the operator needs get on the resource (docs/concepts.md \"Health gates\"); repeatable")
	fs.IntVar(&o.spec.Canary.Nodes, "canary-nodes", 0, "for each OS version nodes ask to reboot for, the first N go alone (within the budget); the others asking for it wait (blocked-by canary) until N nodes finished on it and --canary-bake passed with no failure for it; 0 off")
	fs.DurationVar(&o.spec.Canary.Bake.Duration, "canary-bake", 0, "how long after the canaries of a version finished the others still wait for a failure to show (see --canary-nodes)")
	fs.IntVar(&o.spec.Canary.MaxFailedPerVersion, "max-failed-per-version", 0, "after N failed cycles for one OS version (stalled after the grant, or back on the old version), no node asking for it is admitted (blocked-by version-halted) while nodes asking for other versions go on; kubectl slipway resume --version V releases it; 0 off")
	fs.Var((*selectorFlag)(&o.spec.Versions.Allow), "allow-version", "an OS version nodes may reboot into: exact (4459.2.1) or a range of comparators joined by spaces (\">=4459.2.0 <4500.0.0\"; build metadata after + is left out of ranges); a node that staged another is held (blocked-by version) and takes no budget; repeatable; none: any version not denied")
	fs.Var((*selectorFlag)(&o.spec.Versions.Deny), "deny-version", "an OS version nodes may not reboot into, exact or a range as --allow-version; wins over --allow-version, and a RebootPolicy adds to it (it cannot lift it); repeatable")
	fs.DurationVar(&o.spec.Versions.MinAge.Duration, "version-min-age", 0, "a node reboots into a version only this long after the fleet first saw it staged (kept in the fleet record: restarts and deleted nodes do not restart it), e.g. 72h; 0 off")
	fs.StringVar(&o.spec.ProofSource.URL, "proof-url", "", "a Prometheus-compatible query endpoint (Prometheus, Thanos Querier, Mimir) that scrapes other clusters' update-operators: where --require-proof-selector and RebootPolicies' versions.requireProof read their proof; no credentials in the URL")
	fs.StringVar(&o.spec.ProofSource.BearerTokenFile, "proof-bearer-token-file", "", "a file whose content is sent as the bearer token to --proof-url (e.g. a mounted Secret; read at every query)")
	fs.StringVar(&o.spec.ProofSource.CAFile, "proof-ca-file", "", "PEM certificates to trust for an https --proof-url instead of the system's")
	fs.StringVar(&o.spec.Versions.RequireProof.Selector, "require-proof-selector", "", "PromQL label matchers naming the cluster whose proof a version needs before nodes reboot into it, e.g. cluster=\"staging\" (read from --proof-url; unreachable holds, fail closed); empty: none")
	fs.IntVar(&o.spec.Versions.RequireProof.MinCycles, "require-proof-min-cycles", 1, "with --require-proof-selector: cycles that must have finished on the version in that cluster")
	fs.DurationVar(&o.spec.Versions.RequireProof.Soak.Duration, "require-proof-soak", 0, "with --require-proof-selector: how long the version must have been proven there (canaries finished, bake passed, no failure or halt), e.g. 72h")
	fs.StringVar(&o.spec.Update.Group, "update-group", "", "the update channel (update.conf GROUP: stable, beta, alpha, lts or an update server's group) the agents of the flags' pool write into /etc/flatcar/update.conf where the file is Slipway's to edit; \"\" leaves GROUP as each node has it")
	fs.StringVar(&o.spec.Update.Server, "update-server", "", "the update server (update.conf SERVER, an https:// URL such as a Nebraska's .../v1/update/) the agents of the flags' pool write; \"\" leaves SERVER as each node has it")
	fs.Var((*selectorFlag)(&o.spec.Update.AllowServers), "update-server-allow", "an update server URL prefix (e.g. https://nebraska.example.com/) that --update-server and RebootPolicies' update.server must begin with: who may edit a RebootPolicy cannot point nodes at a server of their own (one that could withhold updates or offer an older signed release); repeatable; none: any https server")
	fs.BoolVar(&o.spec.Update.AllowHTTP, "allow-http-update-server", false, "accept a plain http:// update server in --update-server and in RebootPolicies (anyone on the path can then withhold or delay updates; payloads stay signed)")
	fs.BoolVar(&o.spec.Drain.WaitForVolumeDetach, "wait-for-volume-detach", def.Drain.WaitForVolumeDetach, "after the drain, grant reboot-ok only once no VolumeAttachment names the node (the CSI driver detached its volumes), so the reboot does not outrun the detach; not those of volumes pods that stay on the node use (pods --drain-pod-selector leaves, DaemonSet pods), which stay attached")
	fs.DurationVar(&o.spec.Drain.VolumeDetachTimeout.Duration, "volume-detach-timeout", def.Drain.VolumeDetachTimeout.Duration, "longest wait for --wait-for-volume-detach; then it counts as a failed drain (drain-error, DrainFailed Event, retried; --drain-failure-policy=force grants anyway)")
	fs.DurationVar(&o.spec.Settle.Time.Duration, "settle-time", 0, "after a node finishes its cycle it keeps its budget slots this long: no node of its pools is admitted in its place before (time for quorums to re-sync, kured's --lock-release-delay); 0 none")
	fs.BoolVar(&o.spec.Settle.PDBs, "settle-pdbs", def.Settle.PDBs, "after a node finishes its cycle it also keeps its budget slots until every PodDisruptionBudget its pods fell under that allowed a disruption when its drain began allows one again (so the next drain is not refused by it; not as many as before: another lasting disruption must not hold every settle), bounded by --settle-timeout")
	fs.DurationVar(&o.spec.Settle.Timeout.Duration, "settle-timeout", def.Settle.Timeout.Duration, "longest wait for the PodDisruptionBudgets of --settle-pdbs after a node finished; then a SettleTimeout Warning Event, slipway_operator_settle_timeouts_total, and --settle-timeout-policy")
	fs.StringVar(&o.spec.Settle.TimeoutPolicy, "settle-timeout-policy", def.Settle.TimeoutPolicy, "when --settle-timeout passes with PodDisruptionBudgets still short: \"proceed\" (the next node goes; its drain still respects every PDB) or \"hold\" (the slots stay held until they are back)")
	fs.StringVar(&o.spec.Steering.PreferNoScheduleTaint, "prefer-no-schedule-taint", "", "taint key: while a node waits for its turn it carries KEY:PreferNoSchedule, so new pods prefer other nodes and fewer are moved twice; removed when its cycle ends or it stops waiting, never when someone else set it (kured's flag, same meaning); empty: off. The operator's admission policy must allow the key (Helm does; docs/operate.md \"Steering\")")
	fs.BoolVar(&o.spec.Steering.ExcludeFromLoadBalancers, "exclude-from-load-balancers", false, "label a node node.kubernetes.io/exclude-from-external-load-balancers for its cycle, so the service controller takes it out of external load balancers before the drain; removed after only if Slipway added it")
	fs.Var((*listFlag)(&o.spec.Steering.PreLabels), "pre-reboot-node-labels", "labels KEY=VALUE (comma-separated, repeatable) written when a node's cycle starts, before the cordon (kured's flag, same meaning); KEY- removes a label. The operator's admission policy must allow the keys (Helm does)")
	fs.Var((*listFlag)(&o.spec.Steering.PostLabels), "post-reboot-node-labels", "labels KEY=VALUE or KEY- written when a node's cycle ends, with the uncordon (kured's flag; also when a cycle ends without a reboot, so a pre-reboot label never outlives its cycle)")
	fs.DurationVar(&o.spec.RebootTimeout.Duration, "reboot-timeout", def.RebootTimeout.Duration, "time a node may spend in one stage of its cycle (hooks, drain, reboot, coming back Ready) before it is reported stalled: annotation update.slipway.dev/stalled, a Stalled Warning Event, slipway_operator_stalled_nodes; 0 never")
	fs.StringVar(&o.spec.StallPolicy, "stall-policy", def.StallPolicy, "a stalled node: \"hold\" keeps its budget slot (safe); \"release\" frees it once the node stalled after its reboot was granted, so the roll-out goes on without it")
	fs.BoolVar(&o.startPaused, "start-paused", false, "on a fresh install (no ConfigMap slipway-fleet in --namespace yet) create it paused before the first admission, so nodes that staged an update do not start rebooting the moment Slipway is installed; a person resumes (kubectl slipway resume). Never touches an existing ConfigMap. Slipway's manifests set it; off by default for FLUO's")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader-election Lease (default $POD_NAMESPACE)")
	fs.StringVar(&o.leaseName, "lease-name", "slipway-update-operator", "name of the leader-election Lease (the shipped RBAC lets the operator read and renew only the Lease of this default name: change its resourceNames with it)")
	fs.StringVar(&o.identity, "identity", "", "this instance's leader-election identity (default $POD_NAME, else the hostname, plus a random suffix per process: a restarted container is a new candidate that waits out the old lease, never the old holder taking over at once in the same term)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "hold a Lease before acting; turn off only when exactly one instance can ever run")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal (failover time after a crash)")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops acting")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	fs.StringVar(&o.httpAddr, "http-address", ":8080", "address serving /healthz, /readyz and /metrics; empty disables")
	fs.BoolVar(&o.profiling, "profiling", false, "also serve Go's pprof profiles at /debug/pprof/ on --profiling-address (CPU profiles up to 25 s: the server's write timeout is 30 s)")
	fs.StringVar(&o.profilingAddr, "profiling-address", "127.0.0.1:6060", "with --profiling: the loopback address serving /debug/pprof/ (reach it with kubectl port-forward); never --http-address, which the metrics scraper reaches unauthenticated, and a non-loopback address is refused")
	fs.StringVar(&o.fleetlockAddr, "fleetlock-address", "", "removed: FleetLock is served by update-agent fleetlock (per node, deploy/fleetlock; or --central, deploy/fleetlock-central); set, it stops the operator with that message")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	kubeclient.AddLogFlags(fs)
	logformat.AddFlag(fs, &o.logFormat)
	fluoflags.AddKlog(fs) // FLUO's klog flags, with klog's meaning
	if err := refuseKured(fs, args); err != nil {
		return nil, fs, err
	}
	if err := flagenv.Parse(fs, args, "UPDATE_OPERATOR"); err != nil {
		return nil, fs, err
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fs, err
	}
	if err := logformat.Check(o.logFormat); err != nil {
		return nil, fs, err
	}
	if o.fleetlockAddr != "" {
		// The operator's token can cordon and evict; a server anyone on the network reaches does not
		// belong in its process. Said at start rather than ignored: Zincati would wait for ever.
		return nil, fs, fmt.Errorf("--fleetlock-address=%s: the update-operator no longer serves FleetLock; `update-agent fleetlock` does, on each Fedora CoreOS node at 127.0.0.1:495 (kubectl apply -k deploy/fleetlock/; Zincati's base_url http://127.0.0.1:495/), or as one server under its own ServiceAccount (deploy/fleetlock-central/). docs/operate.md \"FleetLock\" has the migration", o.fleetlockAddr)
	}
	return o, fs, nil
}

// config validates the options into a controller configuration (everything but clients and logs):
// the policy compiled from its flags (policy.Compile), and what only the process needs.
func (o *options) config() (operator.Config, error) {
	var cfg operator.Config
	p, err := policy.Compile(o.spec)
	if err != nil {
		return cfg, err
	}
	if o.notifyBlockedAfter < 0 {
		return cfg, fmt.Errorf("notify-blocked-after %s must not be negative", o.notifyBlockedAfter)
	}
	if o.profiling {
		if err := loopback(o.profilingAddr); err != nil {
			return cfg, fmt.Errorf("profiling-address %q: %w", o.profilingAddr, err)
		}
	}
	if o.leaderElect && !(o.retryPeriod > 0 && o.retryPeriod < o.renewDeadline && o.renewDeadline < o.leaseDuration) {
		return cfg, fmt.Errorf("leader election needs 0 < retry-period (%s) < renew-deadline (%s) < lease-duration (%s)", o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	if o.startPaused && o.namespace == "" {
		return cfg, errors.New("start-paused needs the fleet's namespace: set --namespace or POD_NAMESPACE (downward API)")
	}
	if o.leaderElect && o.namespace == "" {
		return cfg, errors.New("no namespace for the leader-election Lease: set --namespace or POD_NAMESPACE (downward API)")
	}
	return operator.Config{Policy: *p, Namespace: o.namespace, StartPaused: o.startPaused}, nil
}

func run() int {
	if len(os.Args) > 1 && (os.Args[1] == "status" || os.Args[1] == "pause" || os.Args[1] == "resume") {
		// The same code as kubectl-slipway, from inside the operator's pod.
		return status.Main("update-operator", os.Args[1:], os.Stdout, os.Stderr)
	}
	if os.Getenv("GOGC") == "" {
		// Most of the heap is the Node cache, which lives as long as the process; Go's default lets
		// garbage grow to as much again before collecting. A quarter is plenty at the operator's event
		// rates and keeps its memory near the cache's size (measured with make bench-fleet at 5,000
		// nodes, this change alone: RssAnon 30.3 MiB at 50, 26.2 at 25; the rolling time and latency did
		// not move). GOGC set in the environment wins; GOMEMLIMIT, if set, applies on top.
		debug.SetGCPercent(25)
	}
	o, fs, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-operator:", err)
		return 2
	}
	if o.printVersion {
		fmt.Println(version.String())
		return 0
	}
	cfg, err := o.config()
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-operator:", err)
		return 2
	}
	if err := logformat.Apply(o.logFormat, fs, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "update-operator:", err)
		return 2
	}
	for _, w := range fluoflags.Warnings(fs, fluoIgnored) {
		klog.Warning(w)
	}
	for _, w := range flagenv.Shadowed(fs, os.Args[1:], "UPDATE_OPERATOR") {
		klog.Warning(w)
	}
	log := klog.Background().WithName("update-operator")
	rc, err := kubeclient.RestConfig(o.kubeconfig, "slipway-update-operator/"+version.String(), o.limits)
	if err != nil {
		log.Error(err, "no Kubernetes client configuration")
		return 1
	}
	clock := serverClock(rc, log)
	cfg.Now = clock.Now
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		log.Error(err, "building Kubernetes client")
		return 1
	}
	if o.identity == "" {
		o.identity = defaultIdentity(os.Getenv("POD_NAME"), string(uuid.NewUUID()))
	}

	// Events get a client of their own, with its own --kube-api-qps/--kube-api-burst bucket: a cycle step
	// never waits behind the Events about earlier steps (a roll-out writes as many Events as patches).
	eventClient, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		log.Error(err, "building Kubernetes client")
		return 1
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	cfg.Client = client
	cfg.Identity = o.identity
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		log.Error(err, "building Kubernetes client")
		return 1
	}
	cfg.Dynamic = dyn // RebootPolicies, and the objects of --health-check (the blockers: package policies)
	cfg.Recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "slipway-update-operator", Host: o.identity})
	cfg.Log = log

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, notifier, err := o.instrument(reg, log, clock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "update-operator: notify-url:", err)
		return 2
	}
	cfg.Metrics, cfg.Notify = metrics, notifier
	if cfg.Remediation, err = o.remediation(client, cfg, reg, log); err != nil {
		log.Error(err, "the remediation fence")
		return 2
	}
	if b := cfg.Remediation.Blocker(); b != nil {
		cfg.Blockers = append(cfg.Blockers, b)
	}
	if notifier.Enabled() {
		log.Info("notifications on", "targets", notifier.Targets(), "blockedAfter", o.notifyBlockedAfter)
	}
	ctrl, err := operator.New(cfg)
	if err != nil {
		log.Error(err, "building the controller")
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go notifier.Run(ctx)
	if o.httpAddr != "" {
		if err := serveHTTP(ctx, o.httpAddr, reg, ctrl.Live, ctrl.Ready, log); err != nil {
			log.Error(err, "serving /healthz and /metrics", "address", o.httpAddr)
			return 1
		}
	}
	if o.profiling {
		if err := servePprof(ctx, o.profilingAddr, log); err != nil {
			log.Error(err, "serving /debug/pprof/", "address", o.profilingAddr)
			return 1
		}
	}
	log.Info("starting", "version", version.String(), "identity", o.identity, "leaderElect", o.leaderElect)
	if !o.leaderElect {
		cfg.Metrics.IsLeader.Set(1)
		if err := ctrl.Run(ctx); err != nil {
			log.Error(err, "controller failed")
			return 1
		}
		return 0
	}
	// Every admission is checked against the Lease first (package fence) and must land before it could expire.
	ctrl.SetFence((&fence.Lease{Client: client.CoordinationV1(), Namespace: o.namespace, Name: o.leaseName,
		Identity: o.identity, Margin: o.leaseDuration - o.renewDeadline}).Check)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.namespace, Name: o.leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity, EventRecorder: cfg.Recorder},
	}
	lost := false
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				cfg.Metrics.IsLeader.Set(1)
				log.Info("became leader", "lease", o.namespace+"/"+o.leaseName)
				if err := ctrl.Run(ctx); err != nil {
					log.Error(err, "controller failed")
				}
			},
			OnStoppedLeading: func() {
				cfg.Metrics.IsLeader.Set(0)
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(id string) {
				if id != o.identity {
					log.Info("another instance leads", "leader", id)
				}
			},
		},
	})
	if lost {
		// Exit rather than carry on: a fresh process starts from a fresh LIST, never from what this
		// one believed while it was leader.
		log.Info("lost the leader lease; exiting so a restart begins from the cluster's state")
		return 1
	}
	return 0
}

// instrument registers on reg every metric of Slipway's own that /metrics serves (the caller adds Go's
// and the process's): client-go's requests, the controller's and the notifier's, whose --notify-url it
// checks. docs/reference/metrics.md is generated from it.
// remediation builds the remediation fences the flags ask for (nil: none).
func (o *options) remediation(client kubernetes.Interface, cfg operator.Config, reg prometheus.Registerer, log klog.Logger) (*remediation.Keeper, error) {
	var fences []remediation.Fence
	if o.remediationLeaseNamespace != "" {
		fences = append(fences, &remediation.Lease{Client: client, Namespace: o.remediationLeaseNamespace, Now: cfg.Now})
	}
	if o.machinesKubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", o.machinesKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--remediation-machines-kubeconfig %s: %w", o.machinesKubeconfig, err)
		}
		rc.UserAgent = "slipway-update-operator/" + version.String()
		rc.Timeout = remediation.DefaultMachineTimeout // a management cluster that does not answer holds no sync
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		disc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			return nil, err
		}
		res, err := remediation.MachinesResource(disc)
		if err != nil {
			// Unreachable now is no reason not to start: the fence reports each failure as it comes.
			res = remediation.DefaultMachinesResource
			log.Error(err, "the management cluster's machines API version is unknown; using "+res.Version)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cluster, err := remediation.ClusterIdentity(ctx, client)
		if err != nil {
			return nil, err
		}
		fences = append(fences, &remediation.Machine{Client: dyn, Resource: res, Cluster: cluster, Namespace: o.machinesNamespace})
	}
	return remediation.NewKeeper(fences, cfg.RebootTimeout, cfg.Recorder, log, cfg.Now, reg)
}

// serverClock is the API server's clock, learned from the Date of every response to rc's clients
// (rc is wrapped to feed it): the operator stamps what it records with it, so that a failure and a
// person's resume (dated by the API server's clock by kubectl slipway) are compared on one clock.
func serverClock(rc *rest.Config, log klog.Logger) *serverclock.Clock {
	c := serverclock.New(time.Now, func(off time.Duration, first bool) {
		if !serverclock.Applies(off) {
			log.Error(nil, "the API server's clock and this node's disagree by more than time sync allows: stamps keep this node's clock; fix time sync (chrony, systemd-timesyncd) on both",
				"offset", off.Round(time.Millisecond), "max", serverclock.MaxOffset)
			return
		}
		msg := "the API server's clock moved against this node's"
		if first {
			msg = "the API server's clock against this node's"
		}
		log.Info(msg, "offset", off.Round(time.Millisecond), "stampsUse", "the API server's clock")
	})
	rc.Wrap(c.Transport)
	return c
}

func (o *options) instrument(reg prometheus.Registerer, log klog.Logger, clock *serverclock.Clock) (*operator.Metrics, *notify.Sender, error) {
	kubeclient.RegisterMetrics(reg, "slipway_operator")
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slipway_operator_api_server_clock_offset_seconds",
		Help: "The API server's clock minus this operator's node's, from the Date of its successful responses (0 until the first): " +
			"the fleet record, the history and the cycle keys are stamped with the API server's clock, as kubectl slipway's resumes are, " +
			"unless the two disagree by more than 10m (then with this node's, and an error is logged)."},
		func() float64 { off, _ := clock.Offset(); return off.Seconds() }))
	m := operator.NewMetrics(reg)
	n, err := notify.New(o.notifyURLs, reg, log, notify.BlockedAfter(o.notifyBlockedAfter),
		notify.Templates(o.templateDrain, o.templateReboot, o.templateUncordon))
	return m, n, err
}

// serveHTTP serves /healthz (live: the process answers and, when it leads, its workers are not
// wedged), /readyz (ready: also synced) and /metrics.
func serveHTTP(ctx context.Context, addr string, reg *prometheus.Registry, live, ready func() error, log klog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := live(); err != nil {
			http.Error(w, "not live: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		ok(w, r)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		ok(w, r)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	httpserve.Serve(ctx, ln, mux, log)
	log.Info("serving /healthz, /readyz, /metrics", "address", ln.Addr().String())
	return nil
}

// servePprof serves Go's profiles on addr, a loopback address (loopback): a heap profile holds what
// the operator holds in memory (Node annotations, notification URLs' hosts), and a CPU profile costs
// the leader; neither is for whoever can reach the metrics port.
func servePprof(ctx context.Context, addr string, log klog.Logger) error {
	if err := loopback(addr); err != nil {
		return fmt.Errorf("profiling-address %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	httpserve.Serve(ctx, ln, mux, log)
	log.Info("serving /debug/pprof/ on loopback (kubectl port-forward to reach it)", "address", ln.Addr().String())
	return nil
}

// loopback checks that addr ("host:port") listens on a loopback address only.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("not a loopback address (127.0.0.1, ::1 or localhost): profiles are served on loopback only")
	}
	return nil
}

// multiFlag is a repeatable flag whose values may contain commas (a window's day list).
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(v string) error {
	if v = strings.TrimSpace(v); v != "" {
		*m = append(*m, v)
	}
	return nil
}

// secondsFlag is a duration given as whole seconds (kured's --skip-wait-for-delete-timeout=300) or as
// a Go duration ("5m"); never negative.
type secondsFlag time.Duration

func (f *secondsFlag) String() string { return time.Duration(*f).String() }
func (f *secondsFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return fmt.Errorf("%d seconds: must not be negative", n)
		}
		*f = secondsFlag(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q: want whole seconds (300) or a duration (5m)", v)
	}
	if d < 0 {
		return fmt.Errorf("%s: must not be negative", d)
	}
	*f = secondsFlag(d)
	return nil
}

// graceFlag is --drain-grace-period: a Go duration, or whole seconds as kured's flag of the same
// name takes them; negative (kured's default -1) leaves each pod its own.
type graceFlag time.Duration

func (f *graceFlag) String() string { return time.Duration(*f).String() }
func (f *graceFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		*f = graceFlag(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q: want a duration (30s) or whole seconds (30)", v)
	}
	*f = graceFlag(d)
	return nil
}

// urlsFlag is a repeatable flag; one value may also hold several URLs separated by spaces (the env
// variable). Its String never prints the URLs: they hold tokens.
type urlsFlag []string

func (u *urlsFlag) String() string     { return fmt.Sprintf("%d URL(s)", len(*u)) }
func (u *urlsFlag) Set(v string) error { *u = append(*u, strings.Fields(v)...); return nil }

// defaultIdentity is base (the pod's name, else the hostname) with a suffix of this process. A
// container restarted in the same pod must not reuse the old identity: client-go's leader election
// lets the holder named in the Lease take it over at once, without waiting for it to expire and
// without a new transition, so the old process's admissions still in flight would carry the new
// process's term (update.slipway.dev/admitted-by) and pass the API server's admission fence.
func defaultIdentity(base, nonce string) string {
	if base == "" {
		base, _ = os.Hostname()
	}
	if len(nonce) > 8 {
		nonce = nonce[:8]
	}
	return base + "_" + nonce
}
