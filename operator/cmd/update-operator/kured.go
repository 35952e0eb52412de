package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/slipway-dev/slipway/internal/flagenv"
)

// kuredFlags is every flag of kured (cmd/kured, kured 1.17 to 1.23: kured_test.go names the source) that update-operator does not define
// with the same name and meaning, and what to give update-operator instead. A kured manifest's flags
// or KURED_* variables carried over stop update-operator with that answer (refuseKured) rather than
// being dropped in silence: a kured user who kept weekends quiet must not find out on a Saturday.
// kuredSame are the kured flags update-operator defines with kured's meaning (docs/migrate.md).
var kuredFlags = map[string]string{
	"node-id":                 "nothing: one operator serves every node; each node's update-agent takes its name from the downward API (--node)",
	"force-reboot":            "--drain-failure-policy=force",
	"metrics-host":            kuredMetricsAlt,
	"metrics-port":            kuredMetricsAlt,
	"reboot-method":           kuredRebootAlt,
	"reboot-command":          kuredRebootAlt,
	"reboot-signal":           kuredRebootAlt,
	"period":                  "nothing: update_engine's D-Bus signal says when an update is staged (update-agent --reboot-required-file for a sentinel file)",
	"reboot-sentinel":         "update-agent --reboot-required-file (deploy/reboot-required-file); by default update_engine's D-Bus signal",
	"reboot-sentinel-command": "update-agent --reboot-required-file (deploy/reboot-required-file); by default update_engine's D-Bus signal",
	"ds-namespace":            "nothing: the budget is the operator's own (a Lease elects one leader: --lease-name, --namespace)",
	"ds-name":                 "nothing: the budget is the operator's own (a Lease elects one leader: --lease-name, --namespace)",
	"lock-annotation":         "nothing: the budget is the operator's own, each node's state in its own annotations",
	"lock-ttl":                "--reboot-timeout (a node that does not come back is reported stalled; --stall-policy=release frees its slot)",
	"lock-release-delay":      "--settle-time (and --settle-pdbs, on by default)",
	"alert-filter-regexp":     "--alert-exclude=REGEXP (--alert-include=REGEXP for kured's --alert-filter-match-only)",
	"alert-filter-match-only": "--alert-include=REGEXP",
	"concurrency":             "--max-unavailable=N (a count or a percentage)",
	"slack-hook-url":          "--notify-url=slack://... (shoutrrr's URL, as kured's --notify-url)",
	"slack-username":          "--notify-url=slack://... (shoutrrr's URL carries it)",
	"slack-channel":           "--notify-url=slack://... (shoutrrr's URL carries it)",
	"reboot-days":             kuredWindowAlt,
	"start-time":              kuredWindowAlt,
	"end-time":                kuredWindowAlt,
	"time-zone":               kuredWindowAlt,
	"annotate-nodes":          "nothing: every node in its cycle carries update.slipway.dev/cycle-started and the protocol's annotations",
	"pprof-enabled":           "--profiling (pprof on --profiling-address, loopback by default)",
}

// What several kured flags take instead, each said once.
const (
	kuredWindowAlt  = `--reboot-window="kured DAYS START-END ZONE": kured's --reboot-days, --start-time, --end-time and --time-zone in one, with kured's meaning`
	kuredRebootAlt  = "nothing: update-agent reboots through systemd-logind's D-Bus API"
	kuredMetricsAlt = "--http-address=HOST:PORT (it serves /metrics)"
	// kured's empty --reboot-days matches no day: it never reboots. No window is never open; a pause is.
	kuredNever = "start paused (--start-paused; Helm operator.startPaused) or pause the fleet (kubectl slipway pause --reason ...): no node reboots until kubectl slipway resume"
)

// kuredSame are kured's flags update-operator defines under the same name, meaning what they meant.
var kuredSame = []string{"blocking-pod-selector", "prometheus-url", "alert-firing-only", "drain-timeout", "drain-grace-period",
	"drain-pod-selector", "skip-wait-for-delete-timeout", "notify-url", "prefer-no-schedule-taint", "pre-reboot-node-labels",
	"post-reboot-node-labels", "drain-delay", "reboot-delay", "log-format",
	"message-template-drain", "message-template-reboot", "message-template-uncordon"}

// refuseKured says what to use instead of the kured flags in args and the KURED_* variables of kured's
// flags in the environment (nil: none): kured's settings carried over are never dropped in silence.
func refuseKured(fs *flag.FlagSet, args []string) error {
	var said []string
	for _, a := range flagenv.Given(args) {
		name := a.Name
		if name == "reboot-days" && a.HasValue && strings.TrimSpace(a.Value) == "" {
			said = append(said, "--reboot-days= (empty) is kured's \"never reboot\": "+kuredNever)
			continue
		}
		if alt, ok := kuredFlags[name]; ok && fs.Lookup(name) == nil {
			said = append(said, fmt.Sprintf("--%s is kured's: use %s", name, alt))
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "KURED_") {
			env = append(env, k)
		}
	}
	sort.Strings(env)
	for _, k := range env {
		// Only the variables of kured's flags: Kubernetes gives every pod KURED_SERVICE_HOST, KURED_PORT...
		// for a Service named kured in its namespace, and those must not stop the operator.
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "KURED_"), "_", "-"))
		if name == "reboot-days" && strings.TrimSpace(os.Getenv(k)) == "" {
			said = append(said, k+"= (empty) is kured's \"never reboot\": "+kuredNever)
			continue
		}
		switch alt, ok := kuredFlags[name]; {
		case ok:
			said = append(said, fmt.Sprintf("%s (kured's --%s) is not read: use %s", k, name, alt))
		case slices.Contains(kuredSame, name):
			said = append(said, fmt.Sprintf("%s is not read: set %s (--%s)", k, flagenv.EnvName("UPDATE_OPERATOR", name), name))
		}
	}
	if len(said) == 0 {
		return nil
	}
	return fmt.Errorf("kured's settings are not update-operator's (docs/migrate.md maps each):\n  %s", strings.Join(said, "\n  "))
}
