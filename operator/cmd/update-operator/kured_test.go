package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// kuredAll is every flag kured's cmd/kured registers, kept by hand from its source (the module proxy
// here refuses kured's module): kured 1.17's NewRootCommand, and the same set in main() at
// kubereboot/kured@bec02fa6f9aebc42138dec43b0c83486c3b2d2fa (main after 1.20.0, go 1.24.6; the line
// kured 1.21 to 1.23 ship from moved its environment binding to internal/cli/envtoflag.go at
// 4e1e302f58ef94bccfc182d7144af80ec58003ed and dropped the --slack-* flags), plus --pprof-enabled,
// which one snapshot had (f3403a05b069fa7343a24378750c1479d2149605). docs/migrate.md maps each.
var kuredAll = []string{"node-id", "force-reboot", "metrics-host", "metrics-port", "drain-grace-period", "drain-pod-selector",
	"skip-wait-for-delete-timeout", "drain-delay", "drain-timeout", "reboot-delay", "reboot-method", "period", "ds-namespace",
	"ds-name", "lock-annotation", "lock-ttl", "lock-release-delay", "prometheus-url", "alert-filter-regexp",
	"alert-filter-match-only", "alert-firing-only", "reboot-sentinel", "prefer-no-schedule-taint", "reboot-sentinel-command",
	"reboot-command", "concurrency", "reboot-signal", "slack-hook-url", "slack-username", "slack-channel", "notify-url",
	"message-template-uncordon", "message-template-drain", "message-template-reboot", "blocking-pod-selector", "reboot-days",
	"start-time", "end-time", "time-zone", "annotate-nodes", "log-format", "pre-reboot-node-labels", "post-reboot-node-labels",
	"pprof-enabled"}

// Every kured flag is either update-operator's under the same name or refused with what to use
// instead, as a flag and as kured's KURED_* variable: nothing from a kured manifest is dropped in silence.
func TestKuredFlags(t *testing.T) {
	_, fs, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	covered := append(slices.Collect(maps.Keys(kuredFlags)), kuredSame...)
	slices.Sort(covered)
	all := slices.Sorted(slices.Values(kuredAll))
	if !slices.Equal(covered, all) {
		t.Errorf("kured's flags %v;\nmapped or refused: %v", all, covered)
	}
	for _, name := range kuredSame {
		if fs.Lookup(name) == nil {
			t.Errorf("kured's --%s is listed as the same flag, but update-operator does not define it", name)
		}
	}
	for name, alt := range kuredFlags {
		if fs.Lookup(name) != nil {
			t.Errorf("--%s is update-operator's own, but listed as kured's to refuse", name)
		}
		_, _, err := parse([]string{"--" + name + "=x"})
		if err == nil || !strings.Contains(err.Error(), "--"+name+" is kured's: use "+alt) {
			t.Errorf("--%s: %v", name, err)
		}
	}
	for env, want := range map[string]string{
		"KURED_REBOOT_DAYS":   `KURED_REBOOT_DAYS (kured's --reboot-days) is not read: use --reboot-window="kured DAYS START-END ZONE"`,
		"KURED_CONCURRENCY":   "KURED_CONCURRENCY (kured's --concurrency) is not read: use --max-unavailable=N",
		"KURED_DRAIN_TIMEOUT": "KURED_DRAIN_TIMEOUT is not read: set UPDATE_OPERATOR_DRAIN_TIMEOUT (--drain-timeout)",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "1")
			if _, _, err := parse(nil); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s set: %v, want %q", env, err, want)
			}
		})
	}
	// A Service named kured in the namespace gives every pod KURED_SERVICE_HOST and friends: not kured's
	// settings, and no reason to stop.
	t.Run("service links", func(t *testing.T) {
		t.Setenv("KURED_SERVICE_HOST", "10.0.0.1")
		t.Setenv("KURED_PORT_8080_TCP", "tcp://10.0.0.1:8080")
		t.Setenv("KURED_SERVICE_PORT", "8080")
		if _, _, err := parse(nil); err != nil {
			t.Errorf("service-link variables refused: %v", err)
		}
	})
	// kured's empty --reboot-days never reboots: said, with what does that here.
	for _, args := range [][]string{{"--reboot-days="}, {"--reboot-days= "}} {
		if _, _, err := parse(args); err == nil || !strings.Contains(err.Error(), `is kured's "never reboot": start paused (--start-paused`) {
			t.Errorf("%q: %v", args, err)
		}
	}
	t.Run("KURED_REBOOT_DAYS empty", func(t *testing.T) {
		t.Setenv("KURED_REBOOT_DAYS", "")
		if _, _, err := parse(nil); err == nil || !strings.Contains(err.Error(), `KURED_REBOOT_DAYS= (empty) is kured's "never reboot"`) {
			t.Errorf("KURED_REBOOT_DAYS empty: %v", err)
		}
	})
	// The binary says it and exits as on any bad flag, before it needs a cluster.
	code, stderr := runOperator(t, []string{"POD_NAMESPACE=x"}, "--reboot-days=mon,fri", "--start-time=22:00")
	if code == 0 || !strings.Contains(stderr, "--reboot-days is kured's: use --reboot-window") || !strings.Contains(stderr, "--start-time is kured's") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// kured's --log-format: json makes the binary's lines JSON objects from the first one; a value kured
// does not take stops it at once.
func TestKuredLogFormat(t *testing.T) {
	code, stderr := runOperator(t, []string{"POD_NAMESPACE=x", "KUBERNETES_SERVICE_HOST="}, "--log-format=json", "--kubeconfig=/nonexistent/kubeconfig")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code == 0 || len(lines) == 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil || m["level"] == nil {
			t.Errorf("not a JSON log line: %q (%v)", l, err)
		}
	}
	if !strings.Contains(stderr, `"msg":"no Kubernetes client configuration"`) {
		t.Errorf("stderr:\n%s", stderr)
	}
	code, stderr = runOperator(t, []string{"POD_NAMESPACE=x"}, "--log-format=logfmt")
	if code != 2 || !strings.Contains(stderr, `log-format "logfmt": want "text" or "json"`) {
		t.Errorf("--log-format=logfmt: exit %d, stderr:\n%s", code, stderr)
	}
}

// The shipped Deployment passes --max-unavailable=1; `kubectl set env ... UPDATE_OPERATOR_MAX_UNAVAILABLE=10%`
// over it changes nothing, and the binary says so at start, naming the value that won.
func TestShadowedVariableSaid(t *testing.T) {
	_, stderr := runOperator(t, []string{"POD_NAMESPACE=x", "UPDATE_OPERATOR_MAX_UNAVAILABLE=10%"}, "--max-unavailable=1", "--kubeconfig=/nonexistent/kubeconfig")
	if !strings.Contains(stderr, `UPDATE_OPERATOR_MAX_UNAVAILABLE="10%" is not used: --max-unavailable=1 on the command line wins`) {
		t.Errorf("stderr:\n%s", stderr)
	}
}
