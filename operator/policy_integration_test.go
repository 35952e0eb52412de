package operator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/referee"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
)

const zoneLabel = "topology.kubernetes.io/zone"

// groupWatcher follows every Node change (a watch, not sampling) and keeps, per value of label, the
// peak number of unavailable nodes at any instant, and the same for the whole fleet.
type groupWatcher struct {
	mu     sync.Mutex
	all    testenv.Peak
	groups map[string]*testenv.Peak
}

func watchGroups(t *testing.T, groupOf func(*corev1.Node) string) *groupWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &groupWatcher{groups: map[string]*testenv.Peak{}}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		w.observe(&list.Items[i], groupOf)
	}
	go func() {
		for ev := range wi.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				w.observe(n, groupOf)
			}
		}
	}()
	return w
}

func (w *groupWatcher) observe(n *corev1.Node, groupOf func(*corev1.Node) string) {
	un := len(referee.Unavailable(n)) > 0
	w.all.Set(n.Name, un)
	w.mu.Lock()
	g := groupOf(n)
	p, ok := w.groups[g]
	if !ok {
		p = &testenv.Peak{}
		w.groups[g] = p
	}
	w.mu.Unlock()
	p.Set(n.Name, un)
}

func (w *groupWatcher) peak(group string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.groups[group]; ok {
		return p.Max()
	}
	return 0
}

func label(t *testing.T, node string, kv map[string]string) {
	t.Helper()
	body := `{"metadata":{"labels":{`
	first := true
	for k, v := range kv {
		if !first {
			body += ","
		}
		first = false
		body += `"` + k + `":"` + v + `"`
	}
	body += `}}}`
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Issue 11, budgets per group: two zones with a budget of 1 each (global 2) reboot one node per zone
// at a time, both zones at once; a NotReady node in zone a holds zone a only.
func TestGroupBudgets(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	nodes := simNodes(t, "zone", 4)
	zones := map[string]string{nodes[0].Name: "a", nodes[1].Name: "a", nodes[2].Name: "b", nodes[3].Name: "b"}
	for name, z := range zones {
		label(t, name, map[string]string{zoneLabel: z})
	}
	// A fifth node in zone a, NotReady: zone a's one slot is taken.
	if _, err := testenv.CreateNode(ctx, client, "zone-sick", "boot-x", map[string]string{zoneLabel: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.SetNodeStatus(ctx, client, "zone-sick", "boot-x", false); err != nil {
		t.Fatal(err)
	}
	w := watchGroups(t, func(n *corev1.Node) string { return n.Labels[zoneLabel] })
	startOperator(t, opOptions{max: "3", spec: func(s *policy.Spec) {
		s.GroupLabel = zoneLabel
		s.MaxUnavailablePerGroup = "1"
	}})
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sn := range nodes[2:] {
		waitNode(t, sn.Name, 60*time.Second, "zone b cycle finished", finished)
	}
	for _, sn := range nodes[:2] {
		settled(t, sn.Name) // looked at since zone b's slots came free
		n := getNode(t, sn.Name)
		if inCycle(n) || sn.Boots() != 0 {
			t.Fatalf("%s started while zone a's only slot is held by a NotReady node", sn.Name)
		}
		if why := n.Annotations[protocol.BlockedBy]; !strings.HasPrefix(why, "budget: full") || !strings.Contains(why, "group/a") {
			t.Errorf("%s blocked-by = %q, want the full zone a budget named", sn.Name, why)
		}
	}
	if !waitEvent(t, nodes[0].Name, "Waiting") {
		t.Error("no Waiting event on a node held by its group's budget")
	}
	// The sick node recovers: zone a goes, one at a time.
	if _, err := testenv.SetNodeStatus(ctx, client, "zone-sick", "boot-x", true); err != nil {
		t.Fatal(err)
	}
	for _, sn := range nodes[:2] {
		n := waitNode(t, sn.Name, 60*time.Second, "zone a cycle finished", finished)
		if _, ok := n.Annotations[protocol.BlockedBy]; ok {
			t.Errorf("blocked-by left after admission: %v", n.Annotations)
		}
	}
	if pa, pb := w.peak("a"), w.peak("b"); pa != 1 || pb != 1 {
		t.Errorf("peak unavailable per zone: a=%d b=%d, want 1 and 1", pa, pb)
	}
	if w.all.Max() != 2 {
		t.Errorf("peak unavailable overall = %d, want 2 (one per zone at once)", w.all.Max())
	}
}

// Issue 11, control plane: its own budget (1) and --control-plane-order=workers-first.
func TestControlPlaneBudgetAndOrder(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "cpo", 4)
	cps := nodes[:2]
	for _, sn := range cps {
		label(t, sn.Name, map[string]string{protocol.ControlPlaneLabel: ""})
	}
	var mu sync.Mutex
	var order []string
	for _, sn := range nodes {
		sn.OnReboot = func(n *simnode.Node, boot int) { mu.Lock(); order = append(order, n.Name); mu.Unlock() }
	}
	w := watchGroups(t, func(n *corev1.Node) string {
		if _, cp := n.Labels[protocol.ControlPlaneLabel]; cp {
			return "control-plane"
		}
		return "worker"
	})
	startOperator(t, opOptions{max: "4", spec: func(s *policy.Spec) { s.ControlPlaneOrder = string(admission.OrderWorkersFirst) }})
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sn := range nodes {
		waitNode(t, sn.Name, 90*time.Second, "cycle finished", finished)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 4 || strings.HasPrefix(order[0], "cpo-0") || strings.HasPrefix(order[0], "cpo-1") || strings.HasPrefix(order[1], "cpo-0") || strings.HasPrefix(order[1], "cpo-1") {
		t.Errorf("reboot order %v: workers (cpo-2, cpo-3) must come first", order)
	}
	if p := w.peak("control-plane"); p != 1 {
		t.Errorf("peak unavailable control-plane nodes = %d, want 1", p)
	}
}

// Issue 11, fleet pause: the ConfigMap switch stops new cycles for the whole fleet or one group; a
// node in its cycle finishes; resuming lets the rest go.
func TestFleetPause(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-pause"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchCM := func(p []byte) {
		if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := simNodes(t, "fp", 3)
	label(t, nodes[0].Name, map[string]string{zoneLabel: "a"})
	label(t, nodes[1].Name, map[string]string{zoneLabel: "b"})
	label(t, nodes[2].Name, map[string]string{zoneLabel: "a"})
	hold := "example.com/hold"
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{max: "3", before: []string{hold}, metrics: operator.NewMetrics(reg),
		spec:  func(s *policy.Spec) { s.GroupLabel = zoneLabel },
		tweak: func(c *operator.Config) { c.Namespace = ns }})
	// nodes[2] enters its cycle and waits in before-reboot for its hook; then the fleet is paused.
	if err := nodes[2].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, nodes[2].Name, 30*time.Second, "in its cycle", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	patchCM(fleetswitch.PausePatch("", "incident 42", "test", time.Now()))
	// The operator has read the pause (its fleet_paused gauge reads the switch it admits with)
	// before the other nodes ask.
	waitGauge(t, reg, "slipway_operator_fleet_paused", "group", "", 30*time.Second, "the operator never saw the fleet paused", func(v float64) bool { return v == 1 })
	for _, sn := range nodes[:2] {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sn := range nodes[:2] {
		n := waitNode(t, sn.Name, 30*time.Second, "blocked by the pause", func(n *corev1.Node) bool { return n.Annotations[protocol.BlockedBy] != "" })
		if why := n.Annotations[protocol.BlockedBy]; why != "paused: fleet paused: incident 42" {
			t.Errorf("%s blocked-by = %q", sn.Name, why)
		}
	}
	if !waitEvent(t, nodes[0].Name, "Blocked") {
		t.Error("no Blocked Warning for a paused fleet")
	}
	// The node in its cycle finishes.
	annotate(t, nodes[2].Name, map[string]*string{hold: ptr(protocol.True)})
	waitNode(t, nodes[2].Name, 30*time.Second, "in-flight cycle finished while paused", finished)
	for _, sn := range nodes[:2] {
		settled(t, sn.Name) // looked at since the slot came free
		if n := getNode(t, sn.Name); inCycle(n) || sn.Boots() != 0 {
			t.Fatalf("%s started while the fleet is paused", sn.Name)
		}
	}
	// Only zone b paused: zone a's node goes, zone b's waits.
	patchCM(fleetswitch.PausePatch("b", "AZ maintenance", "test", time.Now()))
	patchCM(fleetswitch.ResumePatch(""))
	waitNode(t, nodes[0].Name, 30*time.Second, "hook asked", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	annotate(t, nodes[0].Name, map[string]*string{hold: ptr(protocol.True)})
	waitNode(t, nodes[0].Name, 30*time.Second, "zone a finished", finished)
	n := waitNode(t, nodes[1].Name, 30*time.Second, "zone b blocked", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "paused: group b paused: AZ maintenance"
	})
	if inCycle(n) {
		t.Fatal("zone b started while paused")
	}
	patchCM(fleetswitch.ResumePatch("b"))
	waitNode(t, nodes[1].Name, 30*time.Second, "hook asked after resume", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	annotate(t, nodes[1].Name, map[string]*string{hold: ptr(protocol.True)})
	waitNode(t, nodes[1].Name, 30*time.Second, "zone b finished after resume", finished)
}

// Issue 11, blockers through the controller, on the real API server: a firing alert of a real
// Prometheus holds every node (blocked-by, a Blocked Warning, the metric) and an excluded one does not;
// an unfinished pod matching --blocking-pod-selector holds its own node only, until it is gone.
func TestBlockersHoldAdmission(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	prom, err := testenv.StartPrometheus(t.TempDir(), `groups:
  - name: slipway-controller-test
    interval: 1s
    rules:
      - alert: SlipwayTestFiring
        expr: vector(1)
        for: 0s
`)
	if errors.Is(err, testenv.ErrNoPrometheus) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	if err := prom.WaitFiring("SlipwayTestFiring", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	nodes := simNodes(t, "blk", 2)
	alerts := func(exclude string) admission.Blocker {
		cfg := blocker.AlertsConfig{URL: prom.URL, TTL: 500 * time.Millisecond}
		if exclude != "" {
			cfg.Exclude = regexp.MustCompile(exclude)
		}
		a, err := blocker.NewAlerts(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	reg := prometheus.NewRegistry()
	stop := startOperator(t, opOptions{max: "2", metrics: operator.NewMetrics(reg), tweak: func(c *operator.Config) {
		c.Blockers = []admission.Blocker{alerts("")}
	}})
	if err := nodes[0].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, nodes[0].Name, 60*time.Second, "blocked by the alert", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.BlockedBy], "SlipwayTestFiring")
	})
	if why := n.Annotations[protocol.BlockedBy]; !strings.HasPrefix(why, blocker.NameAlerts+": ") {
		t.Errorf("blocked-by = %q", why)
	}
	if !waitEvent(t, nodes[0].Name, "Blocked") {
		t.Error("no Blocked Warning")
	}
	if v := gauge(t, reg, "slipway_operator_blocked_nodes", blocker.NameAlerts); v != 1 {
		t.Errorf("slipway_operator_blocked_nodes{reason=%s} = %v, want 1", blocker.NameAlerts, v)
	}
	// blocked-by is the last write of the sync that held it: the operator looked, and holds it.
	if inCycle(getNode(t, nodes[0].Name)) {
		t.Fatal("admitted while an alert fires")
	}
	stop()

	// The alert excluded; a blocking pod on nodes[1] holds nodes[1] only.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blk"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: "blk", Labels: map[string]string{"app": "backup"}},
		Spec: corev1.PodSpec{NodeName: nodes[1].Name, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/backup:1"}}}}
	if _, err := client.CoreV1().Pods("blk").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{max: "2", spec: func(s *policy.Spec) { s.BlockingPodSelectors = []string{"app=backup"} }, tweak: func(c *operator.Config) {
		c.Blockers = []admission.Blocker{alerts("^SlipwayTestFiring$")}
	}})
	if err := nodes[1].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, nodes[0].Name, 60*time.Second, "cycle finished once the alert is excluded", finished)
	n = waitNode(t, nodes[1].Name, 30*time.Second, "blocked by its pod", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], blocker.NamePodsOnNode+": ")
	})
	if inCycle(n) {
		t.Fatal("admitted with a blocking pod on it")
	}
	if err := client.CoreV1().Pods("blk").Delete(ctx, "backup", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, nodes[1].Name, 60*time.Second, "cycle finished once the pod is gone", finished)
}

// gauge reads one value of a gauge vector labelled by reason from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	return gaugeLabel(t, reg, name, "reason", reason)
}

// Issue 11, the failure budget: with --max-failed-reboots=2, two nodes that never come back pause the
// fleet by itself (its own switch, failures-paused, says why; the status lists them); nothing new
// starts. Issue 18: a person's pause and resume leave that pause and the count alone; a new leader
// that finds neither the pause nor the published count (a lost publication) counts the failures from
// the Nodes and pauses again; only resume --failures starts a new count.
func TestMaxFailedRebootsPausesTheFleet(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-failed"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	nodes := simNodes(t, "fmr", 3)
	nodes[0].NeverComeBack()
	nodes[1].NeverComeBack()
	reg := prometheus.NewRegistry()
	opts := opOptions{max: "1", rebootTimeout: 2 * time.Second, stallPolicy: stall.Release, metrics: operator.NewMetrics(reg),
		spec:  func(s *policy.Spec) { s.MaxFailedReboots = 2 },
		tweak: func(c *operator.Config) { c.Namespace = ns; c.Identity = "op-test" }}
	stop := startOperator(t, opts)
	// The two lost nodes ask first (together: which of them goes first is the workers' race); the
	// third asks once one is granted (the longest waiting goes first, so it comes after both).
	for _, sn := range nodes[:2] {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	other := ""
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a, b := getNode(t, "fmr-0"), getNode(t, "fmr-1")
		if a.Annotations[protocol.RebootOK] == protocol.True {
			other = "fmr-1"
		} else if b.Annotations[protocol.RebootOK] == protocol.True {
			other = "fmr-0"
		}
		if other != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("neither lost node was granted")
		}
	}
	// The other lost node waits, and the operator knows it does (its blocked-by), so it has waited
	// longer than the third node, which asks only now.
	blockedBy(t, other, "budget")
	if err := nodes[2].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		cm, err = client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
		if err == nil && fleetswitch.Read(cm).FailuresPaused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet did not pause itself after two failed reboots: %v", cm)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sw := fleetswitch.Read(cm)
	st, ok := fleetswitch.ReadStatus(cm)
	failed := append([]string(nil), st.FailedReboots...)
	sort.Strings(failed)
	if !ok || strings.Join(failed, ",") != "fmr-0,fmr-1" || st.Leader != "op-test" {
		t.Errorf("published status: %+v (ok %v)", st, ok)
	}
	if p, err := policy.ReadPublished(cm.Data[fleetswitch.KeyPolicies]); err != nil {
		t.Errorf("published policies: %v", err)
	} else if spec, ok := p.Default(); !ok || spec.MaxFailedReboots != 2 || spec.MaxUnavailable != "1" {
		t.Errorf("published policies: %+v", p)
	}
	if sw.Paused || !strings.Contains(sw.FailuresReason, "max-failed-reboots: 2 nodes failed") || !strings.Contains(sw.FailuresReason, strings.Join(st.FailedReboots, ", ")) {
		t.Errorf("pause switch: %+v (want the operator's own failure pause, not a person's)", sw)
	}
	for _, name := range []string{"fmr-0", "fmr-1"} {
		if v := getNode(t, name).Annotations[protocol.RebootFailed]; !strings.Contains(v, "stalled: ") {
			t.Errorf("%s reboot-failed = %q, want the failure recorded on the Node", name, v)
		}
	}
	for _, name := range []string{"fmr-0", "fmr-1"} {
		if !waitEvent(t, name, "RebootFailed") {
			t.Errorf("no RebootFailed Warning on %s", name)
		}
	}
	n := waitNode(t, "fmr-2", 30*time.Second, "held by the pause", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "paused: fleet paused: max-failed-reboots")
	})
	// blocked-by is the last write of the sync that held it: the operator looked, and holds it.
	if inCycle(n) || nodes[2].Boots() != 0 {
		t.Fatal("a node started after the failure budget was spent")
	}
	if v := gaugeLabel(t, reg, "slipway_operator_fleet_paused", "group", ""); v != 1 {
		t.Errorf("slipway_operator_fleet_paused = %v, want 1", v)
	}
	patchSwitch := func(p []byte) {
		t.Helper()
		if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A person pauses and resumes (another incident): the failure pause and the count stay.
	patchSwitch(fleetswitch.PausePatch("", "incident 7", "alice", time.Now()))
	patchSwitch(fleetswitch.ResumePatch(""))
	// The operator looked after the resume (its informer of the switch may lag a probe's sync, so
	// wait for the reason it writes then) and holds the node by the failure budget.
	n = waitNode(t, "fmr-2", 30*time.Second, "held by the failure budget after a person's resume", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.BlockedBy], "max-failed-reboots") || inCycle(n)
	})
	if inCycle(n) {
		t.Fatalf("after a person's pause and resume fmr-2 started: %v", n.Annotations)
	}

	// A leader change that lost the publication, and a person who removed the failure marks from the
	// Nodes meanwhile: the next leader starts with no memory, no failure pause and no published count
	// and no marks, and counts the failures from the fleet record.
	stop()
	for _, name := range []string{"fmr-0", "fmr-1"} {
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+protocol.RebootFailed+`":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if rec := readRecord(t, ns); len(rec.BudgetFailures()) != 2 {
		t.Fatalf("fleet record: %+v, want both failures", rec)
	}
	cm, _ = client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	delete(cm.Data, fleetswitch.KeyFailuresPaused)
	delete(cm.Data, fleetswitch.KeyStatus)
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg2 := prometheus.NewRegistry()
	opts.metrics = operator.NewMetrics(reg2)
	startOperator(t, opts)
	deadline = time.Now().Add(30 * time.Second)
	for {
		cm, _ = client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
		st, _ := fleetswitch.ReadStatus(cm)
		if fleetswitch.Read(cm).FailuresPaused && len(st.FailedReboots) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader did not count the failures from the fleet record: %v", cm.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
	settled(t, "fmr-2")
	if n := getNode(t, "fmr-2"); inCycle(n) || nodes[2].Boots() != 0 {
		t.Fatal("fmr-2 started under the new leader though the failure budget is spent")
	}
	if v := metricWithLabel(t, reg2, "slipway_operator_remembered_failed_reboots", "", ""); v == nil || v.GetGauge().GetValue() != 2 {
		t.Errorf("slipway_operator_remembered_failed_reboots = %v, want 2", v)
	}

	// resume --failures: a new count; the next node goes.
	resumeRecorded(t, ns, "", time.Now().Add(time.Second)) // after every failure so far
	patchSwitch(fleetswitch.ResumeFailuresPatch())
	waitNode(t, "fmr-2", 60*time.Second, "cycle finished after resume --failures", finished)
	deadline = time.Now().Add(30 * time.Second)
	for {
		cm, _ = client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
		if st, ok := fleetswitch.ReadStatus(cm); ok && len(st.FailedReboots) == 0 && !fleetswitch.Read(cm).FailuresPaused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failure count did not restart after resume --failures: %v", cm.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readRecord reads the fleet record in namespace ns.
func readRecord(t *testing.T, ns string) fleetrecord.Record {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resumeRecorded writes what kubectl slipway resume --version V (version "": --failures) writes into
// the fleet record, at at, conditional on the version read.
func resumeRecorded(t *testing.T, ns, version string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
		if err != nil {
			t.Fatal(err)
		}
		r.AddResume(fleetrecord.Resume{Version: version, By: "test", At: at})
		cm.Data[fleetrecord.Key] = r.Encode()
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 10 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// gaugeLabel reads one gauge value with label=value from reg.
func gaugeLabel(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	m := metricWithLabel(t, reg, name, label, value)
	if m == nil {
		t.Fatalf("no %s{%s=%q}", name, label, value)
	}
	return m.GetGauge().GetValue()
}

// waitGauge waits (bounded) until the gauge name{label=value} satisfies ok, and fails the test naming
// what it waited for otherwise. The operator's gauges read its informer caches, which see a write a
// moment after the API server does.
func waitGauge(t *testing.T, reg *prometheus.Registry, name, label, value string, timeout time.Duration, what string, ok func(float64) bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		v := gaugeLabel(t, reg, name, label, value)
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s = %v after %s", what, name, v, timeout)
		}
	}
}

// metricWithLabel finds the sample of name with label=value in reg (label "": its only sample; nil: none).
func metricWithLabel(t *testing.T, reg *prometheus.Registry, name, label, value string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" {
				return m // a metric without labels
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m
				}
			}
		}
	}
	return nil
}

// Issue 11, notifications through the controller: a node's cycle sends "started", "rebooting" and
// "finished" to a shoutrrr generic webhook (a local HTTP server), as --notify-url would; with kured's
// --message-template-* (its defaults here), kured's three messages instead.
func TestNotificationsOfACycle(t *testing.T) {
	needCluster(t)
	for i, c := range []struct {
		name string
		opts []notify.Option
		want []string
	}{
		{"Slipway's messages", nil, []string{"node notify%d-0: reboot cycle started", "node notify%d-0: drained; rebooting", "node notify%d-0: reboot finished"}},
		{"kured's templates", []notify.Option{notify.Templates("Draining node %s", "Rebooting node %s", "Node %s rebooted & uncordoned successfully!")},
			[]string{"Draining node notify%d-0", "Rebooting node notify%d-0", "Node notify%d-0 rebooted & uncordoned successfully!"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cleanNodes(t)
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, string(b))
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			sender, err := notify.New([]string{"generic://" + srv.Listener.Addr().String() + "/hook?disabletls=yes"}, prometheus.NewRegistry(), klog.Background(), c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go sender.Run(ctx)
			sn := simNodes(t, fmt.Sprintf("notify%d", i), 1)[0]
			stop := startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Notify = sender }})
			defer stop()
			if err := sn.SendNeedReboot(); err != nil {
				t.Fatal(err)
			}
			waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
			var want []string
			for _, w := range c.want {
				want = append(want, fmt.Sprintf(w, i))
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				seen := slices.Clone(got)
				mu.Unlock()
				// Each message begins as wanted (Slipway's finished one goes on: "in 1s; uncordoned").
				if slices.EqualFunc(seen, want, strings.HasPrefix) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("notifications received: %q, want %q (prefixes) in that order", seen, want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// A node relabelled into another group mid-cycle keeps the group it was admitted in occupied: with one
// per group, the next node of that group waits for the first to finish, not for the relabel.
func TestGroupHopMidCycleFreesNoSlot(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const hold = "example.com/hop-hold"
	for _, name := range []string{"hop-a1", "hop-a2"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-"+name, map[string]string{zoneLabel: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, opOptions{max: "3", before: []string{hold}, spec: func(s *policy.Spec) {
		s.GroupLabel = zoneLabel
		s.MaxUnavailablePerGroup = "1"
	}})
	annotate(t, "hop-a1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "hop-a1", 30*time.Second, "admitted (before-reboot)", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	if g, ok := n.Annotations[protocol.AdmittedGroup]; !ok || g != "a" {
		t.Errorf("admitted-group = %q (present %v), want a", g, ok)
	}
	label(t, "hop-a1", map[string]string{zoneLabel: "b"})
	settled(t, "hop-a1") // the operator has seen the relabel
	annotate(t, "hop-a2", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n = blockedBy(t, "hop-a2", "budget")
	if why := n.Annotations[protocol.BlockedBy]; !strings.Contains(why, "group/a") {
		t.Errorf("hop-a2 blocked-by = %q, want group a's budget named", why)
	}
	if inCycle(n) {
		t.Fatal("hop-a2 started while hop-a1, admitted in group a, is mid-cycle")
	}
	// hop-a1's cycle goes on and ends; then hop-a2 may start.
	annotate(t, "hop-a1", map[string]*string{hold: ptr(protocol.True)})
	waitNode(t, "hop-a1", 30*time.Second, "hop-a1 granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if _, err := testenv.SetNodeStatus(ctx, client, "hop-a1", "boot-hop-a1-2", true); err != nil {
		t.Fatal(err)
	}
	annotate(t, "hop-a1", map[string]*string{protocol.RebootNeeded: ptr(protocol.False), protocol.RebootInProgress: ptr(protocol.False)})
	n = waitNode(t, "hop-a1", 30*time.Second, "hop-a1 finished", finished)
	if _, ok := n.Annotations[protocol.AdmittedControlPlane]; ok {
		t.Errorf("admitted-control-plane on a worker after its cycle: %v", n.Annotations)
	}
	waitNode(t, "hop-a2", 30*time.Second, "hop-a2 admitted after hop-a1 finished", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
}

// A node that finished in group a and settles (--settle-time) holds group a's slot until the settle
// ends, wherever it is relabelled meanwhile: with one per group, the next node of group a waits for
// the settle, not for the relabel (relabelled 1 s after it finished, the slot was freed at once).
func TestGroupHopAfterTheCycleFreesNoSettleSlot(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"sh-a1", "sh-a2"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-"+name, map[string]string{zoneLabel: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, opOptions{max: "3", spec: func(s *policy.Spec) {
		s.GroupLabel = zoneLabel
		s.MaxUnavailablePerGroup = "1"
		s.Settle.Time = metav1.Duration{Duration: 10 * time.Minute}
	}})
	annotate(t, "sh-a1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "sh-a1", 30*time.Second, "sh-a1 granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if _, err := testenv.SetNodeStatus(ctx, client, "sh-a1", "boot-sh-a1-2", true); err != nil {
		t.Fatal(err)
	}
	annotate(t, "sh-a1", map[string]*string{protocol.RebootNeeded: ptr(protocol.False), protocol.RebootInProgress: ptr(protocol.False)})
	waitNode(t, "sh-a1", 30*time.Second, "sh-a1 finished", finished)
	label(t, "sh-a1", map[string]string{zoneLabel: "b"})
	settled(t, "sh-a1") // the operator has seen the relabel
	annotate(t, "sh-a2", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := blockedBy(t, "sh-a2", "settling")
	if inCycle(n) {
		t.Fatal("sh-a2 (group a) admitted while sh-a1, which finished in group a, settles")
	}
	settled(t, "sh-a2") // looked at again: still held
	if n := getNode(t, "sh-a2"); inCycle(n) || !strings.HasPrefix(n.Annotations[protocol.BlockedBy], "settling: ") {
		t.Fatalf("sh-a2 inside the settle: %v", n.Annotations)
	}
}
