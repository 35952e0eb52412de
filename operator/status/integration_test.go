package status

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/syncbuf"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/operator/policy"
)

// One real control plane (etcd + kube-apiserver) for the package, started by the first test that
// needs it; the unit tests run without one.
var (
	shared   = &testenv.Shared{Name: "status"}
	binOnce  sync.Once
	bin      string
	binErr   error
	zoneKey  = "topology.kubernetes.io/zone"
	fixedNow = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // a Monday; 10:00 in Berlin
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

func controlPlane(t *testing.T) (*testenv.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp := shared.Need(t)
	return cp, cp.Client()
}

// binary is kubectl-slipway built from this tree, for what only a process shows: exit codes and an
// environment without any kubeconfig.
func binary(t *testing.T) string {
	t.Helper()
	controlPlane(t) // for scratch
	binOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		bin = filepath.Join(shared.Dir(), "kubectl-slipway")
		binErr = testenv.GoBuild(context.Background(), root, "-o", bin, "./operator/cmd/kubectl-slipway")
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

// cli runs a command line in-process at the fixed instant, with no $COLUMNS and no $USER.
func cli(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(context.Background(), "kubectl slipway", args, &o, &e, env{
		now:    func() time.Time { return fixedNow },
		getenv: func(string) string { return "" },
		zone:   time.UTC,
	})
	return o.String(), e.String(), code
}

type testNode struct {
	name          string
	labels, ann   map[string]string
	ready         bool
	unschedulable bool
}

func createNodes(t *testing.T, c kubernetes.Interface, nodes []testNode) {
	t.Helper()
	ctx := context.Background()
	for _, tn := range nodes {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: tn.name, Labels: tn.labels, Annotations: tn.ann},
			Spec:       corev1.NodeSpec{Unschedulable: tn.unschedulable},
		}
		created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := corev1.ConditionFalse
		if tn.ready {
			st = corev1.ConditionTrue
		}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tn := range nodes {
			_ = c.CoreV1().Nodes().Delete(context.Background(), tn.name, metav1.DeleteOptions{})
		}
	})
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// A known fleet, built the way the agent and the operator would leave it: annotations and labels on
// real Nodes, the switch and the published Status in a real ConfigMap.
func knownFleet(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	zone := func(z string, more map[string]string) map[string]string {
		m := map[string]string{zoneKey: z}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	createNodes(t, c, []testNode{
		{name: "cp-1", labels: zone("zone-a", map[string]string{protocol.ControlPlaneLabel: ""}), ready: true, ann: map[string]string{
			protocol.RebootNeeded:   "true",
			protocol.BlockedBy:      "order: workers first (--control-plane-order=workers-first)",
			protocol.LastRebootTime: "2026-11-02T03:00:00Z",
		}},
		{name: "node-a", labels: zone("zone-a", map[string]string{protocol.Version: "4500.1.0"}), ready: true, ann: map[string]string{
			protocol.AgentVersion:   "v0.4.0",
			protocol.RebootNeeded:   "false",
			protocol.RebootOK:       "false",
			protocol.LastRebootTime: "2026-11-20T03:00:00Z",
		}},
		{name: "node-b", labels: zone("zone-a", nil), ready: true, unschedulable: true, ann: map[string]string{
			protocol.RebootNeeded: "true",
			protocol.Cordoned:     "true",
			protocol.CycleStarted: "2026-11-23T08:47:00Z",
			protocol.DrainStarted: "2026-11-23T08:48:00Z",
			protocol.Stalled:      "drain-failing",
			protocol.DrainError:   "Cannot evict pod as it would violate the pod's disruption budget.\n(pod shop/web-0, PodDisruptionBudget shop/web)",
		}},
		{name: "node-c", labels: zone("zone-b", nil), ready: true, ann: map[string]string{
			protocol.RebootNeeded: "true",
			protocol.BlockedBy:    "paused: group zone-b paused: AZ maintenance",
			protocol.WaitingSince: "2026-11-23T06:00:00Z",
		}},
		{name: "node-d", labels: zone("zone-b", nil), ready: false, unschedulable: true, ann: map[string]string{
			protocol.RebootNeeded:     "true",
			protocol.RebootInProgress: "true",
			protocol.RebootOK:         "true",
			protocol.Cordoned:         "true",
			protocol.RebootBootID:     "b00t-1",
			protocol.RebootOKTime:     "2026-11-23T08:55:00Z",
		}},
		{name: "node-e", ready: true, unschedulable: true, ann: map[string]string{
			protocol.RebootPaused: "true",
			protocol.RebootError:  "Reboot: Interactive authentication required.",
		}},
		// Two workers waiting for the budget, the longer waiting one first in the queue.
		{name: "node-f", labels: zone("zone-a", map[string]string{protocol.Version: "4459.2.0"}), ready: true, ann: map[string]string{
			protocol.AgentVersion: "v0.4.0",
			protocol.RebootNeeded: "true",
			protocol.NewVersion:   "4500.1.0",
			protocol.BlockedBy:    "budget: full (max-unavailable)",
			protocol.WaitingSince: "2026-11-23T08:30:00Z",
		}},
		{name: "node-g", labels: zone("zone-c", map[string]string{protocol.Version: "4459.2.0"}), ready: true, ann: map[string]string{
			protocol.AgentVersion: "v0.3.0", // not the operator's: flagged
			protocol.RebootNeeded: "true",
			protocol.NewVersion:   "4500.1.0",
			protocol.BlockedBy:    "budget: full (max-unavailable)",
			protocol.WaitingSince: "2026-11-23T07:30:00Z",
		}},
		// Ready, and no agent ever wrote on it.
		{name: "node-h", labels: zone("zone-c", nil), ready: true},
	})
	createNamespace(t, c, ns)
	st := fleetswitch.Status{
		Leader:        "update-operator-6d5f9-x2x4q_3f9c2a1b",
		Version:       "v0.4.0",
		CycleSeconds:  []int{600, 840, 1200, 900},
		Blockers:      []fleetswitch.Blocker{{Name: "alerts", Reason: "1 alert firing: NodeFilesystemAlmostFull", Since: time.Date(2026, 11, 23, 8, 50, 0, 0, time.UTC)}},
		FailedReboots: []string{"node-x"},
	}
	spec := policy.Defaults()
	spec.GroupLabel, spec.MaxUnavailable, spec.MaxUnavailablePerGroup, spec.MaxUnavailableControlPlane = zoneKey, "2", "1", "1"
	spec.ControlPlaneOrder = "workers-first"
	spec.RebootTimeout, spec.Settle.Time = metav1.Duration{Duration: 30 * time.Minute}, metav1.Duration{Duration: 5 * time.Minute}
	spec.Windows = []string{"Mon-Fri 22:00-05:00 Europe/Berlin", "Sat,Sun 00:00-24:00 Europe/Berlin"}
	spec.Exclusions = []string{"2026-12-24/2026-12-26 Europe/Berlin"}
	spec.MaxFailedReboots = 3
	cm := fleetCM(t, st, spec)
	cm.ObjectMeta = metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: ns}
	cm.Data[fleetswitch.GroupPausePrefix+"zone-b"] = "AZ maintenance"
	if _, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The leader's Lease, renewed 2 s before fixedNow.
	holder, dur := st.Leader, int32(15)
	renew := metav1.NewMicroTime(fixedNow.Add(-2 * time.Second))
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &renew}}
	if _, err := c.CoordinationV1().Leases(ns).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

const knownNS = "slipway-known"

// goldenText is the exact output of `kubectl slipway -n slipway-known` for knownFleet at fixedNow,
// with no $COLUMNS (100 columns).
const goldenText = `Problems:  node-b: stalled: drain-failing -> drain keeps failing: Cannot evict pod as it would
           violate the pod's disruption budget. (pod shop/web-0, PodDisruptionBudget shop/web)
           node-e: over budget fleet (3 unavailable, limit 2): it holds the extra slot, cordoned
           outside a cycle -> uncordon it if it need not be down; nothing new starts meanwhile
           node-c: waiting 3h: paused: group zone-b paused: AZ maintenance ->
           docs/troubleshooting.md: paused
           node-h: no update-agent has ever annotated it: it never asks to reboot -> check the
           update-agent DaemonSet's nodeSelector and tolerations (docs/install.md)
           1 node(s) run an update-agent other than the operator's v0.4.0: v0.3.0 on node-g -> roll
           the update-agent DaemonSet to the operator's version (docs/install.md, Upgrade)
Fleet:     running
Groups:    zone-b PAUSED: AZ maintenance
Nodes:     9: 3 idle, 4 needs-reboot, 1 draining, 1 rebooting, 1 stalled, 1 paused
Windows:   CLOSED (outside the reboot windows), opens Mon 2026-11-23 21:00 UTC (in 12h)
           window Mon-Fri 22:00-05:00 Europe/Berlin
           window Sat,Sun 00:00-24:00 Europe/Berlin
           exclusion 2026-12-24/2026-12-26 Europe/Berlin
Blockers:  alerts: 1 alert firing: NodeFilesystemAlmostFull (for 10m)
Failed:    1/3 reboots failed: node-x
Versions:  4459.2.0: 2 on, 0 in cycle, 0 asking, 0 failed
           4500.1.0: 1 on, 0 in cycle, 2 asking, 0 failed, ETA ~12h
Cycles:    median 14m (last 4 measured); --settle-time 5m0s; --reboot-timeout 30m0s
Operator:  leader update-operator-6d5f9-x2x4q_3f9c2a1b (v0.4.0), lease renewed 2s ago

BUDGET         UNAVAILABLE  LIMIT  NODES
fleet          3            2      9
control-plane  0            1      1
group -        1            1      1
group zone-a   1            1      4
group zone-b   1            1      2
group zone-c   0            1      2

NODE    STATE                 FOR  OS        GROUP   LAST-REBOOT  DETAIL
node-b  draining              12m  -         zone-a  -            stalled: drain-failing; drain-e...
node-e  idle,paused,cordoned  -    -         -       -            reboot-error: Reboot: Interacti...
node-h  idle                  -    -         zone-c  -            no update-agent
node-d  rebooting             5m   -         zone-b  -            stalls in 25m
node-g  needs-reboot          90m  4459.2.0  zone-c  -            #1 budget: full (max-unavailable)
node-f  needs-reboot          30m  4459.2.0  zone-a  -            #2 budget: full (max-unavailable)
cp-1    needs-reboot          -    -         zone-a  21d          order: workers first (--control...
node-c  needs-reboot          3h   -         zone-b  -            paused: group zone-b paused: AZ...
(1 idle nodes with nothing to say: --all lists them)
`

// The view of a known fleet on the real API server: the exact text, the wide rows, the exact JSON.
func TestKnownFleet(t *testing.T) {
	cp, c := controlPlane(t)
	knownFleet(t, c, knownNS)
	args := func(more ...string) []string {
		return append([]string{"--kubeconfig", cp.Kubeconfig, "-n", knownNS}, more...)
	}

	t.Run("text", func(t *testing.T) {
		for _, a := range [][]string{args(), args("status"), args("status", "-o", "text"), append([]string{"status"}, args()...)} {
			out, errOut, code := cli(a...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("%v: exit %d: %s", a, code, errOut)
			}
			if out != goldenText {
				t.Errorf("%v: text output:\n%s\nwant:\n%s", a, out, goldenText)
			}
		}
	})
	t.Run("the docs show it", func(t *testing.T) {
		for _, page := range []string{"../../docs/operate.md"} { // the README links to it
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "```\n"+goldenText+"```\n") {
				t.Errorf("%s has no exact copy of the sample screen (goldenText): paste it again", page)
			}
		}
	})
	t.Run("no line longer than 100", func(t *testing.T) {
		for _, line := range strings.Split(goldenText, "\n") {
			if len([]rune(line)) > DefaultWidth {
				t.Errorf("%d columns: %q", len([]rune(line)), line)
			}
		}
	})
	t.Run("wide", func(t *testing.T) {
		out, _, code := cli(args("-o", "wide")...)
		want := "node-b  draining              12m  -         zone-a  -            stalled: drain-failing; drain-error: Cannot evict pod as it would violate the pod's disruption budget. (pod shop/web-0, PodDisruptionBudget shop/web)\n"
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("exit %d, wide output without\n%s\n%s", code, want, out)
		}
	})
	t.Run("filters", func(t *testing.T) {
		rows := func(more ...string) string {
			out, errOut, code := cli(args(more...)...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("%v: exit %d: %s", more, code, errOut)
			}
			_, table, _ := strings.Cut(out, "NODE    ")
			var names []string
			for _, l := range strings.Split(table, "\n")[1:] {
				if f := strings.Fields(l); len(f) > 0 {
					names = append(names, f[0])
				}
			}
			return strings.Join(names, " ")
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--group", "zone-b"}, "node-d node-c"},                   // in its cycle first, then waiting
			{[]string{"--state", "needs-reboot"}, "node-g node-f cp-1 node-c"}, // in the order they will go
			{[]string{"status", "--group", "zone-b", "--state", "needs-reboot"}, "node-c"},
			{[]string{"--group", "zone-a", "--state", "rebooting"}, ""},
		} {
			if got := rows(c.args...); got != c.want {
				t.Errorf("%v: rows %q, want %q", c.args, got, c.want)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		out, errOut, code := cli("version")
		if code != ExitOK || errOut != "" || !strings.HasPrefix(out, version.String()) {
			t.Errorf("exit %d: %q %q", code, out, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		out, errOut, code := cli(args("-o", "json")...)
		if code != ExitOK || errOut != "" {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		golden := filepath.Join("testdata", "known-fleet.json")
		if os.Getenv("SLIPWAY_UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("JSON output differs from %s:\n%s", golden, out)
		}
		// Scripts decode it back into the documented type without loss.
		var r Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		var again bytes.Buffer
		if err := WriteJSON(&again, r); err != nil || again.String() != out {
			t.Errorf("JSON does not round-trip through Report (%v)", err)
		}
	})
}

// pause and resume flip the switch in a real ConfigMap, creating it when missing, and status shows it.
func TestPauseResume(t *testing.T) {
	cp, c := controlPlane(t)
	const ns = "slipway-pause"
	createNamespace(t, c, ns)
	base := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	do := func(wantOut string, args ...string) {
		t.Helper()
		out, errOut, code := cli(append(args, base...)...)
		if code != ExitOK || errOut != "" || out != wantOut {
			t.Fatalf("%v: exit %d, stdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", args, code, out, errOut, wantOut)
		}
	}
	read := func() (fleetswitch.Switch, *corev1.ConfigMap) {
		t.Helper()
		cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fleetswitch.Read(cm), cm
	}
	statusLine := func(prefix string) string {
		t.Helper()
		out, _, _ := cli(base...)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}

	do("fleet is not paused\n", "resume") // nothing to resume, no ConfigMap: fine
	// No ConfigMap, no operator: what is known, and what is not.
	do(`Problems:  no operator in slipway-pause: no Lease, no status -> docs/install.md; or is -n wrong?
Fleet:     running
Nodes:     0
Windows:   unknown (the operator has published no status)
Blockers:  none
Failed:    none
Operator:  no status in slipway-pause/slipway-fleet: limits and windows unknown (is -n right?)

BUDGET  UNAVAILABLE  LIMIT  NODES
fleet   0            ?      0

NODE  STATE  FOR  OS  GROUP  LAST-REBOOT  DETAIL
`)
	do("fleet paused by admin: incident 42\nNo new reboot cycle starts; nodes in their cycle finish it. Undo: resume.\n",
		"pause", "--reason", "incident 42")
	sw, cm := read() // created by pause
	if !sw.Paused || sw.Reason != "incident 42" || sw.By != "admin" || !sw.At.Equal(fixedNow) {
		t.Errorf("after pause: %+v", sw)
	}
	if got := statusLine("Fleet:"); got != "Fleet:     PAUSED by admin 0s ago: incident 42" {
		t.Errorf("status after pause: %q", got)
	}

	// The operator's published Status and policies stay untouched by the switch's patches.
	published := policy.Publish(policy.Named{Spec: policy.Defaults()})
	cm.Data[fleetswitch.KeyStatus], cm.Data[fleetswitch.KeyPolicies] = `{"leader":"op-1"}`, published
	if _, err := c.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	do("group zone-b paused by admin: (no reason given)\nNo new reboot cycle starts in it; nodes in their cycle finish it. Undo: resume --group zone-b.\n",
		"pause", "--group", "zone-b")
	if sw, _ := read(); !sw.Paused || sw.Groups["zone-b"] != "" || len(sw.Groups) != 1 {
		t.Errorf("after group pause: %+v", sw)
	}
	if got := statusLine("Groups:"); got != "Groups:    zone-b PAUSED: (no reason given)" {
		t.Errorf("status after group pause: %q", got)
	}
	do("fleet resumed (was paused: incident 42)\nstill paused groups: zone-b\n", "resume")
	if sw, _ := read(); sw.Paused || sw.By != "" || !sw.At.IsZero() || len(sw.Groups) != 1 {
		t.Errorf("after resume: %+v", sw)
	}
	do("group zone-b resumed (was paused: (no reason given))\n", "resume", "--group", "zone-b")
	sw, cm = read()
	if sw.Paused || len(sw.Groups) != 0 || cm.Data[fleetswitch.KeyStatus] != `{"leader":"op-1"}` || cm.Data[fleetswitch.KeyPolicies] != published || len(cm.Data) != 2 {
		t.Errorf("after group resume: %+v, data %v", sw, cm.Data)
	}
	do("group zone-b is not paused\n", "resume", "--group", "zone-b")

	// The operator's failure pause is its own: a person's resume leaves it, says so, and only
	// resume --failures clears it (and starts a new count from now).
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(context.Background(), fleetswitch.ConfigMapName, types.MergePatchType,
		fleetswitch.FailuresPausePatch("max-failed-reboots: 2 nodes failed in this roll-out (a, b)"), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := statusLine("Fleet:"); got != "Fleet:     PAUSED by the failure budget: max-failed-reboots: 2 nodes failed in this roll-out (a, b) (undo: resume --failures)" {
		t.Errorf("status with the failure pause: %q", got)
	}
	do("fleet is not paused\nit is held by the failure budget: max-failed-reboots: 2 nodes failed in this roll-out (a, b)\nfix the failed nodes, then: resume --failures\n", "resume")
	do("fleet paused by admin: ops\nNo new reboot cycle starts; nodes in their cycle finish it. Undo: resume.\n", "pause", "--reason", "ops")
	do("fleet resumed (was paused: ops)\nstill held by the failure budget: max-failed-reboots: 2 nodes failed in this roll-out (a, b) (resume --failures)\n", "resume")
	if sw, _ := read(); sw.Paused || !sw.FailuresPaused {
		t.Errorf("a person's resume touched the failure pause: %+v", sw)
	}
	// resume --failures records the reset in the fleet record (who as the API server knows them, when
	// by the API server's clock: never fixedNow, the "laptop's" clock here, years off) and then lifts
	// the failure pause.
	who := func() string {
		t.Helper()
		r, err := c.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.UserInfo.Username
	}()
	record := func() fleetrecord.Record {
		t.Helper()
		cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	serverTime := func(at time.Time, before, after time.Time) {
		t.Helper()
		if at.Before(before.Add(-2*time.Second).Truncate(time.Second)) || at.After(after.Add(2*time.Second)) {
			t.Errorf("resume stamped %s, want the API server's clock (between %s and %s; the client's says %s)", at, before, after, fixedNow)
		}
	}
	before := time.Now()
	out, errOut, code := cli(append([]string{"resume", "--failures", "--reason", "nodes a and b mended"}, base...)...)
	after := time.Now()
	if code != ExitOK || errOut != "" || !strings.Contains(out, "failure budget reset by "+who+" at ") ||
		!strings.HasSuffix(out, "failure budget's pause lifted (was: max-failed-reboots: 2 nodes failed in this roll-out (a, b))\n") {
		t.Fatalf("resume --failures: exit %d\n%s\n%s", code, out, errOut)
	}
	if sw, _ := read(); sw.FailuresPaused {
		t.Errorf("after resume --failures: %+v", sw)
	}
	x, ok := record().LastResume("")
	if !ok || x.By != who || x.Why != "nodes a and b mended" {
		t.Errorf("record after resume --failures: %+v %v", x, ok)
	}
	serverTime(x.At, before, after)
	if got := statusLine("Fleet:"); got != "Fleet:     running" {
		t.Errorf("status after resume --failures: %q", got)
	}
	// Again, with no failure pause: a new count all the same (that is what it asks for), and it says so.
	if out, errOut, code := cli(append([]string{"resume", "--failures"}, base...)...); code != ExitOK || errOut != "" ||
		!strings.HasSuffix(out, " no longer count\nthe fleet was not paused by the failure budget\n") {
		t.Errorf("resume --failures unpaused: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, _, code := cli(append([]string{"resume", "--failures", "--group", "a"}, base...)...); code != ExitUsage {
		t.Errorf("--failures with --group: exit %d, want %d", code, ExitUsage)
	}
	// resume --version V: a new count of V's failures, the halt (--max-failed-per-version) released;
	// a version with a + (update_engine's builds) is a version like any other, kept in the version
	// label's form as the operator compares it.
	// The operator's other key in the record's ConfigMap (the fleet's versions) stays as it is.
	const sightings = `{"seen":[{"version":"4600.0.0","at":"2026-11-27T10:00:00Z","node":"a"}]}`
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(context.Background(), fleetrecord.ConfigMapName, types.MergePatchType,
		[]byte(`{"data":{"`+fleetrecord.VersionsKey+`":`+strconv.Quote(sightings)+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for v, kept := range map[string]string{"4600.0.0": "4600.0.0", "4600.0.0+dev-1": "4600.0.0-dev-1"} {
		before := time.Now()
		out, errOut, code := cli(append([]string{"resume", "--version", v}, base...)...)
		if code != ExitOK || errOut != "" || !strings.HasPrefix(out, "version "+kept+" resumed by "+who+" at ") {
			t.Fatalf("resume --version %s: exit %d\n%s\n%s", v, code, out, errOut)
		}
		x, ok := record().LastResume(kept) // in the one form the operator compares versions in
		if !ok || x.By != who {
			t.Errorf("record after resume --version %s: %+v %v", v, x, ok)
		}
		serverTime(x.At, before, time.Now())
	}
	if r := record(); len(r.Resumes) != 4 {
		t.Errorf("the record keeps every resume: %+v", r.Resumes)
	}
	if cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{}); err != nil || cm.Data[fleetrecord.VersionsKey] != sightings {
		t.Errorf("resume --version dropped the fleet's versions: %v %q", err, cm.Data[fleetrecord.VersionsKey])
	}
	// pause --version V: a person's halt, with who and when by the API server and why, beside the
	// sightings; a later resume --version lifts it.
	before = time.Now()
	out, errOut, code = cli(append([]string{"pause", "--version", "4600.0.0+dev-1", "--reason", "kernel regression"}, base...)...)
	if code != ExitOK || errOut != "" || !strings.HasPrefix(out, "version 4600.0.0-dev-1 halted by "+who+" at ") || !strings.Contains(out, "Undo: resume --version 4600.0.0-dev-1.") {
		t.Fatalf("pause --version: exit %d\n%s\n%s", code, out, errOut)
	}
	vers := func() fleetrecord.Versions {
		t.Helper()
		cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey])
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	h, ok := vers().HaltOf("4600.0.0-dev-1")
	if !ok || h.By != who || h.Why != "kernel regression" || vers().FirstSeen("4600.0.0").IsZero() {
		t.Errorf("halt %+v %v; sightings kept: %v", h, ok, vers().Seen)
	}
	serverTime(h.At, before, time.Now())
	if out, _, code := cli(append([]string{"resume", "--version", "4600.0.0-dev-1"}, base...)...); code != ExitOK || !strings.HasSuffix(out, "1 halt(s) of 4600.0.0-dev-1 lifted (pause --version)\n") {
		t.Fatalf("resume --version after a halt: exit %d\n%s", code, out)
	}
	if h, ok := vers().HaltOf("4600.0.0-dev-1"); ok {
		t.Errorf("resume --version left the halt in force: %+v", h)
	}
	if _, _, code := cli(append([]string{"resume", "--reason", "x"}, base...)...); code != ExitUsage {
		t.Errorf("resume --reason without --failures or --version: exit %d, want %d", code, ExitUsage)
	}
	for _, bad := range [][]string{{"resume", "--version", "4600.0.0", "--failures"}, {"resume", "--version", "a b"}, {"resume", "--version", "4600/0"}, {"pause", "--version", "a b"}, {"pause", "--version", "4600.0.0", "--group", "a"}, {"pause", "--version", "._"}, {"resume", "--version", ""}} {
		if _, _, code := cli(append(bad, base...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, ExitUsage)
		}
	}

	// Without a kubeconfig user the one who pauses is $USER.
	var o, e bytes.Buffer
	noUser := filepath.Join(t.TempDir(), "kubeconfig-no-user")
	writeKubeconfig(t, noUser, cp.URL, cp.Token, "")
	code = run(context.Background(), "kubectl slipway", []string{"pause", "--kubeconfig", noUser, "-n", ns}, &o, &e, env{
		now: func() time.Time { return fixedNow }, zone: time.UTC,
		getenv: func(k string) string { return map[string]string{"USER": "carol"}[k] },
	})
	if sw, _ := read(); code != ExitOK || sw.By != "carol" {
		t.Errorf("exit %d (%s), paused by %q, want carol", code, e.String(), sw.By)
	}

	// A namespace that does not exist: say so, create nothing.
	_, errOut, code = cli("pause", "--kubeconfig", cp.Kubeconfig, "-n", "no-such-namespace")
	if code != ExitError || !strings.Contains(errOut, "namespace no-such-namespace does not exist") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// writeKubeconfig writes a kubeconfig for server with token, whose context names user (may be "").
func writeKubeconfig(t *testing.T, path, server, token, user string) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %q
  user:
    token: %s
contexts:
- name: ctx
  context:
    cluster: c
    user: %q
current-context: ctx
`, server, user, token, user)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Errors say what to do and exit non-zero, from the real binary.
func TestErrors(t *testing.T) {
	cp, _ := controlPlane(t)
	kc := binary(t)
	home := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	unreachable := filepath.Join(home, "unreachable")
	writeKubeconfig(t, unreachable, fmt.Sprintf("https://127.0.0.1:%d", port), "x", "someone")
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"no kubeconfig", nil, nil, ExitError, "kubectl slipway status: no kubeconfig: pass --kubeconfig, set $KUBECONFIG or create ~/.kube/config\n"},
		{"kubeconfig file missing", []string{"--kubeconfig", filepath.Join(home, "nope")}, nil, ExitError, "kubectl slipway status: kubeconfig: stat " + filepath.Join(home, "nope") + ": no such file or directory\n"},
		{"unreachable", nil, []string{"KUBECONFIG=" + unreachable}, ExitError, fmt.Sprintf("kubectl slipway status: cannot reach the API server at https://127.0.0.1:%d (listing Nodes): ", port)},
		{"unreachable, watching: the first frame must work", []string{"-w", "--interval", "10ms"}, []string{"KUBECONFIG=" + unreachable}, ExitError, fmt.Sprintf("kubectl slipway status: cannot reach the API server at https://127.0.0.1:%d (listing Nodes): ", port)},
		{"unreachable pause", []string{"pause", "--kubeconfig", unreachable}, nil, ExitError, fmt.Sprintf("kubectl slipway pause: cannot reach the API server at https://127.0.0.1:%d", port)},
		{"bad -o", []string{"-o", "yaml", "--kubeconfig", cp.Kubeconfig}, nil, ExitUsage, "kubectl slipway: unknown output format \"yaml\": want text, wide or json\nRun 'kubectl slipway --help' for usage.\n"},
		{"unknown command", []string{"reboot"}, nil, ExitUsage, "kubectl slipway: unknown command \"reboot\": want status, pause, resume, history, versions or version\n"},
		{"bad --state", []string{"--state", "asleep"}, nil, ExitUsage, "kubectl slipway: --state \"asleep\": want one of"},
		{"--state on pause", []string{"pause", "--state", "idle"}, nil, ExitUsage, "kubectl slipway: --state is not a flag of pause\n"},
		{"flag of another command", []string{"status", "--reason", "x"}, nil, ExitUsage, "kubectl slipway: --reason is not a flag of status\n"},
		{"-o on pause", []string{"pause", "-o", "json"}, nil, ExitUsage, "kubectl slipway: -o is not a flag of pause\n"},
		{"-w on pause", []string{"pause", "-w"}, nil, ExitUsage, "kubectl slipway: -w is not a flag of pause\n"},
		{"--interval without --watch", []string{"--interval", "5s"}, nil, ExitUsage, "kubectl slipway: --interval without --watch: give -w too\n"},
		{"bad --interval", []string{"-w", "--interval", "0s"}, nil, ExitUsage, "kubectl slipway: --interval 0s: must be positive\n"},
		{"bad group", []string{"pause", "--group", "zone b"}, nil, ExitUsage, "kubectl slipway: --group \"zone b\": "},
		{"unknown flag", []string{"--frobnicate"}, nil, ExitUsage, "kubectl slipway: flag provided but not defined: -frobnicate\n"},
		{"two commands", []string{"pause", "resume"}, nil, ExitUsage, "kubectl slipway: unexpected argument \"resume\" after \"pause\"\n"},
		{"--except without --nodes", []string{"pause", "--except", "a"}, nil, ExitUsage, "kubectl slipway: --except without --nodes: give --nodes all --except NODES\n"},
		{"--nodes with --group", []string{"pause", "--nodes", "a", "--group", "z"}, nil, ExitUsage, "kubectl slipway: --nodes with --group, --policy, --failures or --version: give one of them\n"},
		{"bad node name", []string{"resume", "--nodes", "a,B_x"}, nil, ExitUsage, "kubectl slipway: --nodes: node name \"B_x\": "},
		{"all in a list", []string{"pause", "--nodes", "a,all"}, nil, ExitUsage, "kubectl slipway: --nodes \"a,all\": all stands alone, and only in --nodes\n"},
		{"--nodes on status", []string{"--nodes", "a"}, nil, ExitUsage, "kubectl slipway: --nodes is not a flag of status\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a command that never ends fails
			defer cancel()
			cmd := exec.CommandContext(ctx, kc, c.args...)
			// Nothing from this machine: no ~/.kube/config, no $KUBECONFIG, no in-cluster service account.
			cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, c.env...)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			code := 0
			if x, ok := err.(*exec.ExitError); ok {
				code = x.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || !strings.HasPrefix(e.String(), c.want) || o.Len() != 0 {
				t.Errorf("exit %d (want %d)\nstderr: %q\nwant prefix: %q\nstdout: %q", code, c.code, e.String(), c.want, o.String())
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		out, err := exec.Command(kc, "--help").Output()
		if err != nil || !strings.HasPrefix(string(out), "Usage:\n  kubectl slipway [status] [-o text|wide|json] [--group GROUP] [--policy NAME] [--state STATE] [--all] [-w [--interval D]]\n") {
			t.Errorf("%v: %s", err, out)
		}
	})
}

// --watch renders a frame every --interval until its context ends (exit 0), and its frames follow the
// Nodes: a change made between two frames shows in the later one. -o json is one document per frame;
// text starts each frame with its time, and clears the screen before it only on a terminal.
func TestWatch(t *testing.T) {
	cp, c := controlPlane(t)
	const ns = "slipway-watch"
	createNamespace(t, c, ns)
	createNodes(t, c, []testNode{{name: "watch-1", ready: true, ann: map[string]string{protocol.RebootNeeded: "false"}}})
	setNeeded := func(v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, protocol.RebootNeeded, v)
		if _, err := c.CoreV1().Nodes().Patch(context.Background(), "watch-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// watch starts the command line; stop ends its context and returns its exit code.
	watch := func(t *testing.T, tty bool, args ...string) (*syncbuf.Buffer, func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut syncbuf.Buffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, "kubectl slipway", append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "-w", "--interval", "20ms"}, args...), &out, &errOut,
				env{now: func() time.Time { return fixedNow }, getenv: func(string) string { return "" }, zone: time.UTC, tty: tty})
		}()
		t.Cleanup(cancel)
		return &out, func() int {
			t.Helper()
			cancel()
			select {
			case code := <-done:
				if errOut.String() != "" {
					t.Errorf("stderr: %s", errOut.String())
				}
				return code
			case <-time.After(30 * time.Second):
				t.Fatal("--watch did not end with its context")
				return -1
			}
		}
	}
	waitFor := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no frame %s", what)
			}
		}
	}
	frames := func(s string) ([]Report, error) {
		var out []Report
		dec := json.NewDecoder(strings.NewReader(s))
		for {
			var r Report
			if err := dec.Decode(&r); err == io.EOF {
				return out, nil
			} else if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	stateOf := func(r Report) protocol.State {
		for _, n := range r.Nodes {
			if n.Name == "watch-1" {
				return n.State
			}
		}
		return ""
	}
	lastState := func(out *syncbuf.Buffer) protocol.State {
		fs, _ := frames(out.String())
		if len(fs) == 0 {
			return ""
		}
		return stateOf(fs[len(fs)-1])
	}

	t.Run("json", func(t *testing.T) {
		setNeeded("false")
		out, stop := watch(t, false, "-o", "json")
		waitFor(t, "with watch-1 idle", func() bool { return lastState(out) == protocol.Idle })
		setNeeded("true")
		waitFor(t, "with watch-1 needs-reboot", func() bool { return lastState(out) == protocol.NeedsReboot })
		if code := stop(); code != ExitOK {
			t.Errorf("exit %d after the context ended, want %d", code, ExitOK)
		}
		fs, err := frames(out.String())
		if err != nil || len(fs) < 2 || stateOf(fs[0]) != protocol.Idle || stateOf(fs[len(fs)-1]) != protocol.NeedsReboot {
			t.Errorf("%d frames (%v): want JSON documents only, the first idle, the last needs-reboot:\n%s", len(fs), err, out.String())
		}
	})
	t.Run("text, not a terminal", func(t *testing.T) {
		setNeeded("false")
		out, stop := watch(t, false, "--all") // idle nodes listed too
		row := func(state string) func() bool {
			return func() bool {
				fs := strings.Split(out.String(), "Every 20ms: ")
				return len(fs) > 1 && strings.Contains(fs[len(fs)-2], "\nwatch-1  "+state+" ") // a whole frame
			}
		}
		waitFor(t, "with watch-1 idle", row("idle"))
		setNeeded("true")
		waitFor(t, "with watch-1 needs-reboot", row("needs-reboot"))
		if code := stop(); code != ExitOK {
			t.Errorf("exit %d, want %d", code, ExitOK)
		}
		s := out.String()
		if strings.Contains(s, "\x1b") || !strings.HasPrefix(s, "Every 20ms: 2026-11-23 09:00:00 UTC\n\nProblems:  ") ||
			!strings.Contains(s, "\n\nEvery 20ms: 2026-11-23 09:00:00 UTC\n\nProblems:  ") {
			t.Errorf("want frames that start with their time, apart by a blank line, no escape sequence:\n%q", s)
		}
	})
	t.Run("text, on a terminal", func(t *testing.T) {
		out, stop := watch(t, true, "--all")
		waitFor(t, "twice", func() bool { return strings.Count(out.String(), clearScreen) >= 3 })
		if code := stop(); code != ExitOK {
			t.Errorf("exit %d, want %d", code, ExitOK)
		}
		fs := strings.Split(out.String(), clearScreen)
		if fs[0] != "" {
			t.Errorf("output before the first clear: %q", fs[0])
		}
		for _, f := range fs[1 : len(fs)-1] {
			if !strings.HasPrefix(f, "Every 20ms: 2026-11-23 09:00:00 UTC\n\nProblems:  ") || !strings.Contains(f, "\nwatch-1  ") {
				t.Errorf("a frame between clears is not a whole report:\n%s", f)
			}
		}
	})
}

// RebootPolicies in the view, on a real API server: each node shows its policy, --policy keeps one
// pool's nodes, the pool shows its window and budget; pause and resume --policy set and clear its
// spec.paused and pausedReason; an unknown policy is an error that changes nothing.
func TestPoliciesInTheView(t *testing.T) {
	cp, c := controlPlane(t)
	ctx := context.Background()
	if err := testenv.InstallCRDs(ctx, cp.RestConfig(), "../../deploy/base/crd"); err != nil {
		t.Fatal(err)
	}
	const ns = "slipway-policies-view"
	createNamespace(t, c, ns)
	base := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig())
	rps := dyn.Resource(v1alpha1.Resource)
	t.Cleanup(func() { _ = rps.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}) })
	for _, n := range []struct{ name, pool string }{{"pv-gpu-0", "gpu"}, {"pv-web-0", "web"}} {
		if _, err := testenv.CreateNode(ctx, c, n.name, "boot-a", map[string]string{"pool": n.pool}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}) })
	}
	gpu := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "RebootPolicy",
		"metadata": map[string]interface{}{"name": "gpu"},
		"spec": map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"pool": "gpu"}},
			"maxUnavailable": 1, "windows": []interface{}{"Sun 02:00-06:00"}}}}
	if _, err := rps.Create(ctx, gpu, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	report := func(args ...string) Report {
		t.Helper()
		out, errOut, code := cli(append(append([]string{"-o", "json"}, args...), base...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var r Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := report()
	policyOf := map[string]string{}
	for _, n := range r.Nodes {
		policyOf[n.Name] = n.Policy
	}
	if policyOf["pv-gpu-0"] != "gpu" || policyOf["pv-web-0"] != "" {
		t.Errorf("node policies %v", policyOf)
	}
	if len(r.Fleet.Policies) != 1 || r.Fleet.Policies[0].Name != "gpu" || r.Fleet.Policies[0].Nodes != 1 || r.Fleet.Policies[0].Window == "" {
		t.Errorf("policies %+v", r.Fleet.Policies)
	}
	var pool *Budget
	for i, b := range r.Fleet.Budgets {
		if b.Pool == PoolPolicy && b.Policy == "gpu" {
			pool = &r.Fleet.Budgets[i]
		}
	}
	if pool == nil || pool.Nodes != 1 || pool.Max != "1" {
		t.Errorf("gpu's budget %+v in %+v", pool, r.Fleet.Budgets)
	}
	if r := report("--policy", "gpu"); len(r.Nodes) != 1 || r.Nodes[0].Name != "pv-gpu-0" {
		t.Errorf("--policy gpu: %+v", r.Nodes)
	}

	out, errOut, code := cli(append([]string{"pause", "--policy", "gpu", "--reason", "driver rollout"}, base...)...)
	if code != ExitOK || !strings.HasPrefix(out, "policy gpu paused: driver rollout") {
		t.Fatalf("pause --policy: exit %d, %q %q", code, out, errOut)
	}
	got, err := rps.Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedBool(got.Object, "spec", "paused"); !p {
		t.Errorf("spec after pause: %v", got.Object["spec"])
	}
	if reason, _, _ := unstructured.NestedString(got.Object, "spec", "pausedReason"); reason != "driver rollout" {
		t.Errorf("pausedReason %q", reason)
	}
	if p := report().Fleet.Policies[0]; !p.Paused || p.Window != "paused" || p.Reason != "driver rollout" {
		t.Errorf("the view after pause: %+v", p)
	}
	if out, errOut, code = cli(append([]string{"resume", "--policy", "gpu"}, base...)...); code != ExitOK || out != "policy gpu resumed\n" {
		t.Fatalf("resume --policy: exit %d, %q %q", code, out, errOut)
	}
	got, _ = rps.Get(ctx, "gpu", metav1.GetOptions{})
	if p, _, _ := unstructured.NestedBool(got.Object, "spec", "paused"); p {
		t.Errorf("spec after resume: %v", got.Object["spec"])
	}
	if _, found, _ := unstructured.NestedString(got.Object, "spec", "pausedReason"); found {
		t.Errorf("pausedReason kept after resume: %v", got.Object["spec"])
	}
	before := got.GetResourceVersion()
	if _, errOut, code = cli(append([]string{"pause", "--policy", "nope"}, base...)...); code != ExitError || !strings.Contains(errOut, `no RebootPolicy "nope"`) {
		t.Errorf("pause --policy nope: exit %d, %q", code, errOut)
	}
	if _, errOut, code = cli(append([]string{"pause", "--policy", "gpu", "--group", "a"}, base...)...); code != ExitUsage {
		t.Errorf("--policy with --group: exit %d, %q", code, errOut)
	}
	if got, _ = rps.Get(ctx, "gpu", metav1.GetOptions{}); got.GetResourceVersion() != before {
		t.Error("a refused command changed the policy")
	}
}

// pause --nodes all --except one holds every other node in one command, and resume --nodes all undoes
// exactly that: a node paused by hand stays paused until it is named, a node in its cycle is left to
// finish it, and a name that matches no Node changes nothing.
func TestPauseNodes(t *testing.T) {
	cp, c := controlPlane(t)
	base := []string{"--kubeconfig", cp.Kubeconfig}
	createNodes(t, c, []testNode{
		{name: "pn-0", ready: true}, {name: "pn-1", ready: true}, {name: "pn-2", ready: true},
		{name: "pn-hand", ready: true, ann: map[string]string{protocol.RebootPaused: "yes"}},
		{name: "pn-cycle", ready: true, ann: map[string]string{protocol.RebootNeeded: protocol.True, protocol.RebootOK: protocol.True}},
	})
	ann := func(name string) map[string]string {
		t.Helper()
		n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations
	}
	paused := func() []string {
		t.Helper()
		var out []string
		for _, n := range []string{"pn-0", "pn-1", "pn-2", "pn-hand", "pn-cycle"} {
			if _, ok := ann(n)[protocol.RebootPaused]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	do := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(append(args, base...)...)
		if code != ExitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %s", args, code, errOut)
		}
		return out
	}
	// A typo changes nothing.
	if _, errOut, code := cli(append([]string{"pause", "--nodes", "all", "--except", "pn-7"}, base...)...); code != ExitError || !strings.Contains(errOut, "no Node named pn-7; nothing was changed") {
		t.Fatalf("unknown node: exit %d, %s", code, errOut)
	}
	if got := paused(); strings.Join(got, ",") != "pn-hand" {
		t.Fatalf("after the refused pause: paused %v", got)
	}
	out := do("pause", "--nodes", "all", "--except", "pn-0", "--reason", "trying 4593.2.5 on pn-0")
	for _, want := range []string{"paused 2 nodes: pn-1, pn-2\n", "already paused, left as they are: pn-hand\n", "in their reboot cycle, left to finish it (pause them again after): pn-cycle\n", "Undo: resume --nodes all"} {
		if !strings.Contains(out, want) {
			t.Errorf("pause output lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Join(paused(), ","); got != "pn-1,pn-2,pn-hand" {
		t.Errorf("paused %s, want pn-1,pn-2,pn-hand", got)
	}
	if a := ann("pn-1"); a[protocol.RebootPaused] != protocol.True || a[protocol.PausedBy] != "admin "+fixedNow.UTC().Format(time.RFC3339)+": trying 4593.2.5 on pn-0" {
		t.Errorf("pn-1: %v", a)
	}
	if _, ok := ann("pn-hand")[protocol.PausedBy]; ok || ann("pn-hand")[protocol.RebootPaused] != "yes" {
		t.Errorf("the hand-paused node was rewritten: %v", ann("pn-hand"))
	}
	out = do("resume", "--nodes", "all")
	if !strings.Contains(out, "resumed 2 nodes: pn-1, pn-2\n") || !strings.Contains(out, "left paused (paused by hand, not by pause --nodes; name them to resume them): pn-hand") {
		t.Errorf("resume output:\n%s", out)
	}
	if got := strings.Join(paused(), ","); got != "pn-hand" {
		t.Errorf("after resume --nodes all: paused %s, want pn-hand", got)
	}
	if _, ok := ann("pn-1")[protocol.PausedBy]; ok {
		t.Error("paused-by left on pn-1")
	}
	do("resume", "--nodes", "pn-hand")
	if got := paused(); len(got) != 0 {
		t.Errorf("after resume --nodes pn-hand: paused %v", got)
	}
}

// kubectl slipway history reads the cycles the operator recorded (ConfigMap slipway-history): the
// table of the last --since, one node's, and the timeline as SVG; a namespace without history says so.
func TestHistoryCommand(t *testing.T) {
	cp, c := controlPlane(t)
	const ns = "slipway-hist"
	createNamespace(t, c, ns)
	base := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(append(args, base...)...)
		if code != ExitOK || errOut != "" {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	if out := run("history"); !strings.HasPrefix(out, "no history in slipway-hist/slipway-history yet") {
		t.Errorf("without history: %q", out)
	}
	at := func(min int) time.Time { return fixedNow.Add(time.Duration(min-120) * time.Minute) } // 07:00 + min
	var rec history.Record
	rec.Add(history.Cycle{Node: "web-0", Version: "4593.2.5", Asked: at(0), Admitted: at(0), Drained: at(0), Granted: at(3), Ended: at(12), Result: history.Finished})
	rec.Add(history.Cycle{Node: "db-0", Version: "4593.2.5", Asked: at(0), Admitted: at(12), Drained: at(12), Granted: at(20), Ended: at(31), Result: history.Failed, Why: "old-version: back on 4459.2.0"})
	rec.Add(history.Cycle{Node: "web-0", Version: "4459.2.0", Admitted: fixedNow.Add(-30 * time.Hour), Ended: fixedNow.Add(-29 * time.Hour), Result: history.Finished})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: history.ConfigMapName, Namespace: ns}, Data: map[string]string{history.Key: rec.Encode()}}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `ENDED            NODE   VERSION   RESULT    TOOK   WAITED  DRAIN  REBOOT  WHY
Mon 11-23 07:12  web-0  4593.2.5  finished  12m0s  0s      3m0s   9m0s    -
Mon 11-23 07:31  db-0   4593.2.5  failed    19m0s  12m0s   8m0s   11m0s   old-version: back on 4459.2.0
`
	if out := run("history"); out != want {
		t.Errorf("history (the last 24h):\n%s\nwant:\n%s", out, want)
	}
	if out := run("history", "web-0", "--since", "48h"); strings.Count(out, "web-0") != 2 || strings.Contains(out, "db-0") {
		t.Errorf("history web-0 --since 48h:\n%s", out)
	}
	if out := run("history", "--since", "1h"); !strings.HasPrefix(out, "no reboot cycle ended since") {
		t.Errorf("history --since 1h: %q", out)
	}
	svg := filepath.Join(t.TempDir(), "night.svg")
	if out := run("history", "--svg", svg); !strings.HasPrefix(out, "wrote "+svg+": 2 cycles") {
		t.Errorf("--svg: %q", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(b), "<svg ") || !strings.Contains(string(b), ">db-0<") {
		t.Errorf("the SVG written: %v %.200s", err, b)
	}
	for _, bad := range [][]string{{"history", "a", "b"}, {"history", "--since", "0s"}, {"--svg", "x"}, {"history", "Not_A_Node"}} {
		if _, _, code := cli(append(bad, base...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, ExitUsage)
		}
	}
	// Whoever may write the ConfigMap may put anything in a cycle: printed on one line, no escape
	// sequence reaches the terminal (the clipboard, the screen), the result field included.
	hostile := "x\x1b]52;c;ZXZpbA==\x07\x1b[2J\r\nFleet: running\u009b31m\u202e"
	rec.Add(history.Cycle{Node: "web-1", Version: "4593.2.5" + hostile, Admitted: at(40), Ended: at(50), Result: "finished" + hostile, Why: hostile})
	cm.Data[history.Key] = rec.Encode()
	if _, err := c.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := run("history")
	if strings.ContainsAny(out, "\x1b\x07\r\u009b\u202e") || strings.Count(out, "\n") != 4 || !strings.Contains(out, "web-1") {
		t.Errorf("history with a hostile cycle:\n%q", out)
	}
}

// kubectl slipway versions on a real API server: a Node staging a version the published policy
// denies, the fleet's first sighting of it, a person's halt of another version; text and JSON.
func TestVersionsCommand(t *testing.T) {
	cp, c := controlPlane(t)
	const ns = "slipway-versions"
	createNamespace(t, c, ns)
	ctx := context.Background()
	base := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns}
	spec := policy.Defaults()
	spec.Versions.Deny = []string{"4600.9.9"}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName},
		Data: map[string]string{fleetswitch.KeyStatus: `{"leader":"op-a"}`, fleetswitch.KeyPolicies: policy.Publish(policy.Named{Spec: spec})}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vers fleetrecord.Versions
	vers.See("4600.9.9", "vers-0", fixedNow.Add(-time.Hour))
	vers.AddHalt(fleetrecord.Halt{Version: "4600.8.8", By: "alice", At: fixedNow, Why: "kernel regression"})
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName},
		Data: map[string]string{fleetrecord.VersionsKey: vers.Encode()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := testenv.CreateNode(ctx, c, "vers-0", "boot-a", map[string]string{protocol.Version: "4600.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	patch := `{"metadata":{"annotations":{"` + protocol.RebootNeeded + `":"true","` + protocol.Status + `":"UPDATE_STATUS_UPDATED_NEED_REBOOT","` +
		protocol.NewVersion + `":"4600.9.9","` + protocol.BlockedBy + `":"version: 4600.9.9 denied by the flags (deny: 4600.9.9)"}}}`
	if _, err := c.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(append([]string{"versions", "-o", "json"}, base...)...)
	if code != ExitOK || errOut != "" {
		t.Fatalf("versions -o json: exit %d\n%s\n%s", code, out, errOut)
	}
	var doc struct{ Versions []VersionRow }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	rows := map[string]VersionRow{}
	for _, r := range doc.Versions {
		rows[r.Version] = r
	}
	if r := rows["4600.9.9"]; r.Staged != 1 || r.Held != 1 || strings.Join(r.HeldBy, "; ") != "the flags: denied by 4600.9.9" || r.FirstSeen == nil {
		t.Errorf("4600.9.9: %+v", r)
	}
	if r := rows["4600.8.8"]; r.Halt != "by alice at 2026-11-23T09:00:00Z: kernel regression" {
		t.Errorf("4600.8.8: %+v", r)
	}
	if r := rows["4600.0.0"]; r.On < 1 {
		t.Errorf("4600.0.0: %+v", r)
	}
	out, _, code = cli(append([]string{"versions"}, base...)...)
	if code != ExitOK || !strings.HasPrefix(out, "VERSION") || !strings.Contains(out, "halted by alice at 2026-11-23T09:00:00Z: kernel regression") {
		t.Errorf("versions:\n%s", out)
	}
	if _, _, code := cli(append([]string{"versions", "--group", "a"}, base...)...); code != ExitUsage {
		t.Errorf("versions --group: exit %d, want %d", code, ExitUsage)
	}
}
