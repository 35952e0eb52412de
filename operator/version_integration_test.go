package operator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/operator"
)

// Proof of the new version. The node asks to reboot for 4600.0.0 and rolls back to the version it ran:
// its reboot is verified (new boot ID) but the cycle fails as old-version (failed-version, reboot-failed,
// a RebootOldVersion Warning, slipway_operator_failed_reboots_total{reason="old-version"}). Asking for
// 4600.0.0 again it is held (failed-version) until a person removes the annotation; then it reboots,
// comes back on 4600.0.0, and the cycle finishes.
func TestOldVersionFails(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "ver", 1)[0]
	old := sn.Version()
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{metrics: operator.NewMetrics(reg)})
	sn.RollBackNextUpdate()
	stage := func() {
		t.Helper()
		if err := sn.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: "4600.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	stage()
	n := waitNode(t, sn.Name, 60*time.Second, "the cycle failed as old-version", func(n *corev1.Node) bool {
		return n.Annotations[protocol.FailedVersion] != ""
	})
	if got := n.Annotations[protocol.FailedVersion]; got != "4600.0.0" || n.Labels[protocol.Version] != old || sn.Boots() != 1 {
		t.Fatalf("failed-version %q, version label %q (ran %q), boots %d", got, n.Labels[protocol.Version], old, sn.Boots())
	}
	if why := n.Annotations[protocol.RebootFailed]; !strings.Contains(why, `old-version: back on "`+old+`", rebooted for "4600.0.0"`) {
		t.Errorf("reboot-failed %q", why)
	}
	if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] != protocol.False || n.Annotations[protocol.LastRebootTime] != "" {
		t.Errorf("the failed cycle did not end cleanly (uncordoned, reboot-ok=false, no last-reboot-time): %v", n.Annotations)
	}
	if !waitEvent(t, sn.Name, "RebootOldVersion") {
		t.Error("no RebootOldVersion Warning")
	}
	if got := counterLabel(t, reg, "slipway_operator_failed_reboots_total", "reason", "old-version"); got != 1 {
		t.Errorf("failed_reboots_total{reason=old-version} = %v", got)
	}
	// Asking for the same version again: held.
	stage()
	waitNode(t, sn.Name, 30*time.Second, "held asking for the version it failed", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "failed-version: came back on its old version after rebooting for 4600.0.0")
	})
	if n := getNode(t, sn.Name); n.Annotations[protocol.CycleStarted] != "" || sn.Boots() != 1 {
		t.Fatal("admitted again for the version it failed")
	}
	// A person clears it: the node goes, and this time comes back on 4600.0.0.
	annotate(t, sn.Name, map[string]*string{protocol.FailedVersion: nil})
	n = waitNode(t, sn.Name, 60*time.Second, "second cycle finished on the new version", func(n *corev1.Node) bool {
		return finished(n) && sn.Boots() == 2
	})
	if n.Labels[protocol.Version] != "4600.0.0" || n.Annotations[protocol.FailedVersion] != "" || n.Annotations[protocol.RebootVersion] != "" {
		t.Errorf("after the second cycle: version %q, annotations %v", n.Labels[protocol.Version], n.Annotations)
	}
}

// counterLabel reads one counter value with label=value from reg (0 when not yet counted).
func counterLabel(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	if m := metricWithLabel(t, reg, name, label, value); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}
