package operator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
)

// fakeView is a FleetView over given Nodes.
type fakeView struct {
	nodes  []*corev1.Node
	policy map[string]string
	proofs []admission.Proof
}

func (v fakeView) Nodes() []*corev1.Node                     { return v.nodes }
func (v fakeView) Switch() fleetswitch.Switch                { return fleetswitch.Switch{} }
func (v fakeView) Pools() []admission.BudgetPool             { return nil }
func (v fakeView) Remembered() (halted []string, failed int) { return nil, 0 }
func (v fakeView) PolicyOf(n *corev1.Node, _ bool) string    { return v.policy[n.Name] }
func (v fakeView) VersionProofs(time.Time) []admission.Proof { return v.proofs }

var metricsNow = time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)

func readyNode(name string, labels, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(metricsNow.Add(-time.Hour))}}}}
}

// The per-node series and the roll-out's progress, read off the Nodes at scrape time.
func TestPerNodeMetrics(t *testing.T) {
	const old, next = "4459.2.0", "4593.2.5"
	view := fakeView{policy: map[string]string{"db-0": "db"}, nodes: []*corev1.Node{
		readyNode("web-0", map[string]string{protocol.Version: old}, map[string]string{protocol.RebootNeeded: protocol.False}),
		readyNode("web-1", map[string]string{protocol.Version: old}, map[string]string{protocol.RebootNeeded: protocol.True,
			protocol.Status: "UPDATE_STATUS_UPDATED_NEED_REBOOT", protocol.NewVersion: next, protocol.BlockedBy: "window: closed until 2026-11-26T22:00:00Z"}),
		readyNode("db-0", map[string]string{protocol.Version: old}, map[string]string{protocol.RebootNeeded: protocol.True,
			protocol.Status: "UPDATE_STATUS_UPDATED_NEED_REBOOT", protocol.NewVersion: next,
			protocol.RebootOK: protocol.True, protocol.RebootVersion: next, protocol.Stalled: "reboot-timeout"}),
		readyNode("bare-0", nil, nil), // no agent ever spoke
	}}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.now = func() time.Time { return metricsNow }
	m.Observe(view)
	want := fmt.Sprintf(`
# HELP slipway_operator_node_in_cycle %[1]s
# TYPE slipway_operator_node_in_cycle gauge
slipway_operator_node_in_cycle{node="db-0"} 1
# HELP slipway_operator_nodes_without_agent %[2]s
# TYPE slipway_operator_nodes_without_agent gauge
slipway_operator_nodes_without_agent 1
# HELP slipway_operator_version_nodes %[3]s
# TYPE slipway_operator_version_nodes gauge
slipway_operator_version_nodes{phase="asking",version="4593.2.5"} 1
slipway_operator_version_nodes{phase="in_cycle",version="4593.2.5"} 1
slipway_operator_version_nodes{phase="on",version="4459.2.0"} 2
`, help(t, reg, "slipway_operator_node_in_cycle"), help(t, reg, "slipway_operator_nodes_without_agent"), help(t, reg, "slipway_operator_version_nodes"))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slipway_operator_node_in_cycle", "slipway_operator_nodes_without_agent", "slipway_operator_version_nodes"); err != nil {
		t.Error(err)
	}
	info := map[string]string{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "slipway_operator_node_info" {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			info[l["node"]] = fmt.Sprintf("%s %s %s %s %s", l["os_version"], l["state"], l["blocked_by"], l["stalled"], l["policy"])
		}
	}
	for node, want := range map[string]string{
		"web-0":  old + " idle   ",
		"web-1":  old + " needs-reboot window  ",
		"db-0":   old + " rebooting  reboot-timeout db",
		"bare-0": " idle   ",
	} {
		if info[node] != want {
			t.Errorf("node_info of %s: %q, want %q", node, info[node], want)
		}
	}
	if len(info) != 4 {
		t.Errorf("node_info series: %d, want one per node (4)", len(info))
	}
}

// The per-version proof series: cycles and halted for every version, proven-since and the first
// reboot only where there is one.
func TestVersionProofMetrics(t *testing.T) {
	t1 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	view := fakeView{proofs: []admission.Proof{
		{Version: "4459.2.1", Finished: 3, FirstFinished: t1, ProvenSince: t1.Add(time.Hour)},
		{Version: "4459.2.2", Finished: 1, Failed: 2, FirstFinished: t1, Halted: true},
		{Version: "4459.2.3"},
	}}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.now = func() time.Time { return metricsNow }
	m.Observe(view)
	names := []string{"slipway_version_cycles", "slipway_version_halted", "slipway_version_proven_since_seconds", "slipway_version_first_rebooted_seconds"}
	want := fmt.Sprintf(`
# HELP slipway_version_cycles %[1]s
# TYPE slipway_version_cycles gauge
slipway_version_cycles{result="failed",version="4459.2.1"} 0
slipway_version_cycles{result="failed",version="4459.2.2"} 2
slipway_version_cycles{result="failed",version="4459.2.3"} 0
slipway_version_cycles{result="finished",version="4459.2.1"} 3
slipway_version_cycles{result="finished",version="4459.2.2"} 1
slipway_version_cycles{result="finished",version="4459.2.3"} 0
# HELP slipway_version_halted %[2]s
# TYPE slipway_version_halted gauge
slipway_version_halted{version="4459.2.1"} 0
slipway_version_halted{version="4459.2.2"} 1
slipway_version_halted{version="4459.2.3"} 0
# HELP slipway_version_proven_since_seconds %[3]s
# TYPE slipway_version_proven_since_seconds gauge
slipway_version_proven_since_seconds{version="4459.2.1"} %[5]d
# HELP slipway_version_first_rebooted_seconds %[4]s
# TYPE slipway_version_first_rebooted_seconds gauge
slipway_version_first_rebooted_seconds{version="4459.2.1"} %[6]d
slipway_version_first_rebooted_seconds{version="4459.2.2"} %[6]d
`, help(t, reg, names[0]), help(t, reg, names[1]), help(t, reg, names[2]), help(t, reg, names[3]), t1.Add(time.Hour).Unix(), t1.Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// help is the registered help text of a metric.
func help(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("%s not gathered", name)
	return ""
}

// BenchmarkScrape5000 is one scrape of the metrics over 5,000 nodes (make bench): what the per-node
// series cost the operator per scrape, and how many series a scrape returns.
func BenchmarkScrape5000(b *testing.B) {
	view := fakeView{}
	for i := range 5000 {
		ann := map[string]string{protocol.RebootNeeded: protocol.False}
		if i%10 == 0 {
			ann = map[string]string{protocol.RebootNeeded: protocol.True, protocol.NewVersion: "4593.2.5",
				protocol.Status: "UPDATE_STATUS_UPDATED_NEED_REBOOT", protocol.BlockedBy: "budget: fleet 10/10"}
		}
		view.nodes = append(view.nodes, readyNode(fmt.Sprintf("node-%05d", i), map[string]string{protocol.Version: "4459.2.0"}, ann))
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.now = func() time.Time { return metricsNow }
	m.Observe(view)
	series := 0
	b.ReportAllocs()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		series = 0
		for _, mf := range mfs {
			series += len(mf.GetMetric())
		}
	}
	b.ReportMetric(float64(series), "series")
}
