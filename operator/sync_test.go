package operator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
)

// The fast tier of the controller, sample-controller style: sync is called directly against a fake
// clientset, and each test compares the exact PATCHes, Events and requeue it caused. The real-API-server
// tests (*_integration_test.go) stay the proof on real parts.

var now0 = time.Date(2026, 11, 19, 9, 0, 0, 0, time.UTC) // a Thursday

// short names in expected patches: S/ is Slipway's prefix, F/ FLUO's, NOW the fixture's time.
var keys = strings.NewReplacer("S/", protocol.SlipwayPrefix, "F/", protocol.FLUOPrefix, "NOW", now0.Format(time.RFC3339))

type fixture struct {
	t      *testing.T
	client *fake.Clientset
	rec    *record.FakeRecorder
	c      *Controller
}

// node builds a Ready node with resourceVersion "1", boot ID b1 and these annotations and labels
// (short names as in keys).
func node(name string, ann map[string]string, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: map[string]string{}, Labels: map[string]string{}}}
	for k, v := range ann {
		n.Annotations[keys.Replace(k)] = keys.Replace(v)
	}
	for k, v := range labels {
		n.Labels[keys.Replace(k)] = v
	}
	n.Status.NodeInfo.BootID = "b1"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// fixtureSpec is the policy the fast tier's controllers start from: the flags' defaults without
// --settle-pdbs and --wait-for-volume-detach (no gate informers) and without --reboot-timeout (no
// stall timer).
func fixtureSpec() policy.Spec {
	s := policy.Defaults()
	s.Settle.PDBs, s.Drain.WaitForVolumeDetach, s.RebootTimeout = false, false, metav1.Duration{}
	return s
}

// newFixture builds a controller on a fake clientset holding objs: its policy is fixtureSpec with
// spec's changes, compiled; tweak changes the rest of the Config.
func newFixture(t *testing.T, spec func(*policy.Spec), tweak func(*Config), objs ...*corev1.Node) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, n := range objs {
		if err := client.Tracker().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	rec := record.NewFakeRecorder(100)
	s := fixtureSpec()
	if spec != nil {
		spec(&s)
	}
	cfg := Config{Client: client, Recorder: rec, Policy: *policy.MustCompile(s), Now: func() time.Time { return now0 }}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range objs {
		if err := c.informer.GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
		c.reindex(n.Name)
	}
	client.ClearActions()
	return &fixture{t: t, client: client, rec: rec, c: c}
}

// sync runs one sync of name and returns its requeue delay; an error fails the test. The informer's
// store first gets every Node as the API server has it now (a watch would deliver them).
func (f *fixture) sync(name string) time.Duration {
	f.t.Helper()
	list, err := f.client.Tracker().List(corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.(*corev1.NodeList).Items {
		n := list.(*corev1.NodeList).Items[i]
		if err := f.c.informer.GetIndexer().Update(&n); err != nil {
			f.t.Fatal(err)
		}
		f.c.overlay.Observed(&n)
	}
	f.client.ClearActions()
	retry, err := f.c.sync(context.Background(), name)
	if err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	return retry
}

// patches are the bodies of the Node PATCHes sent (compacted JSON).
func (f *fixture) patches() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "nodes" {
			out = append(out, compact(string(p.GetPatch())))
		}
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// want compares patches and events exactly ("" none).
func (f *fixture) want(what string, patches []string, events []string) {
	f.t.Helper()
	short := strings.NewReplacer(protocol.SlipwayPrefix, "S/", protocol.FLUOPrefix, "F/", now0.Format(time.RFC3339), "NOW")
	if got := f.patches(); strings.Join(got, "\n") != strings.Join(patches, "\n") {
		f.t.Errorf("%s: patches\n got %s\nwant %s", what, short.Replace(strings.Join(got, "\n     ")), short.Replace(strings.Join(patches, "\n     ")))
	}
	if got := f.events(); strings.Join(got, "\n") != strings.Join(events, "\n") {
		f.t.Errorf("%s: events\n got %q\nwant %q", what, got, events)
	}
}

// compact is s with the short names expanded, as encoding/json writes it (keys sorted).
func compact(s string) string {
	var v interface{}
	if err := json.Unmarshal([]byte(keys.Replace(s)), &v); err != nil {
		panic(s + ": " + err.Error())
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Each row of the cycle table that writes, and some that do not, carried out on one node.
func TestSyncCycleRows(t *testing.T) {
	hooks := func(s *policy.Spec) {
		s.Hooks = policy.Hooks{Before: []string{"example.com/before"}, After: []string{"example.com/after"}}
	}
	need := map[string]string{"F/reboot-needed": "true"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"F/reboot-needed": "true"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	granted := map[string]string{"F/reboot-ok": "true", "F/reboot-needed": "false", "S/reboot-boot-id": "b0", "S/boot-id": "b1",
		"S/reboot-ok-time": "2026-11-19T08:50:00Z", "S/cycle-started": "2026-11-19T08:40:00Z", "S/cordoned": "true"}
	cases := []struct {
		name     string
		spec     func(*policy.Spec)
		ann      map[string]string
		labels   map[string]string
		notReady bool
		cordoned bool
		patches  []string
		events   []string
	}{
		{name: "idle: nothing", ann: nil},
		{name: "paused while asking: held, and seen as held", ann: with(map[string]string{"F/reboot-paused": "true"}),
			patches: []string{`{"metadata":{"annotations":{"S/blocked-by":"paused: node: annotation F/reboot-paused is set (kubectl slipway resume --nodes NODE, or remove it)","S/waiting-since":"NOW"},"resourceVersion":"1"}}`},
			events:  []string{"Warning Blocked paused: node: annotation flatcar-linux-update.v1.flatcar-linux.net/reboot-paused is set (kubectl slipway resume --nodes NODE, or remove it)"}},
		{name: "admitted, before hooks", spec: hooks, ann: need,
			patches: []string{`{"metadata":{"annotations":{"S/admitted-group":"","S/admitted-policy":"","S/cycle-started":"NOW"},"labels":{"F/before-reboot":"true"},"resourceVersion":"1"}}`},
			events:  []string{"Normal BeforeRebootHooks reboot admitted; waiting for before-reboot annotations [example.com/before]"}},
		{name: "admitted, no hooks: cordon and drain", ann: need,
			patches: []string{`{"metadata":{"annotations":{"S/admitted-group":"","S/admitted-policy":"","S/cordoned":"true","S/cycle-started":"NOW","S/drain-started":"NOW"},"resourceVersion":"1"},"spec":{"unschedulable":true}}`},
			events:  []string{"Normal Draining cordoned; evicting pods before reboot"}},
		{name: "admitted control-plane node of a labelled group: both pinned", ann: need,
			spec:    func(s *policy.Spec) { s.GroupLabel = "example.com/zone" },
			labels:  map[string]string{"example.com/zone": "z1", protocol.ControlPlaneLabel: ""},
			patches: []string{`{"metadata":{"annotations":{"S/admitted-control-plane":"true","S/admitted-group":"z1","S/admitted-policy":"","S/cordoned":"true","S/cycle-started":"NOW","S/drain-started":"NOW"},"resourceVersion":"1"},"spec":{"unschedulable":true}}`},
			events:  []string{"Normal Draining cordoned; evicting pods before reboot"}},
		{name: "admitted, already cordoned by someone else", ann: need, cordoned: true,
			patches: []string{`{"metadata":{"annotations":{"S/admitted-group":"","S/admitted-policy":"","S/cycle-started":"NOW","S/drain-started":"NOW"},"resourceVersion":"1"}}`},
			events:  []string{"Normal Draining already cordoned by someone else (will stay cordoned); evicting pods before reboot"}},
		{name: "before hooks pending: wait", spec: hooks, ann: with(map[string]string{"S/cycle-started": "NOW"}), labels: map[string]string{"F/before-reboot": "true"}},
		{name: "before hooks done: drain", spec: hooks, ann: with(map[string]string{"S/cycle-started": "NOW", "example.com/before": "true"}), labels: map[string]string{"F/before-reboot": "true"},
			patches: []string{`{"metadata":{"annotations":{"S/cordoned":"true","S/drain-started":"NOW","example.com/before":null},"labels":{"F/before-reboot":null},"resourceVersion":"1"},"spec":{"unschedulable":true}}`},
			events:  []string{"Normal Draining cordoned; evicting pods before reboot"}},
		{name: "no longer needed before hooks: abort", spec: hooks, ann: map[string]string{"F/reboot-needed": "false", "S/cycle-started": "NOW"}, labels: map[string]string{"F/before-reboot": "true"},
			patches: []string{`{"metadata":{"annotations":{"S/cycle-started":null},"labels":{"F/before-reboot":null},"resourceVersion":"1"}}`},
			events:  []string{"Warning CycleAborted cycle ended without a verified reboot: reboot-needed no longer true"}},
		{name: "granted, not back: wait", ann: map[string]string{"F/reboot-ok": "true", "F/reboot-needed": "true", "S/reboot-boot-id": "b1", "S/boot-id": "b1", "S/reboot-ok-time": "NOW"}},
		{name: "back in the same boot: abort", ann: map[string]string{"F/reboot-ok": "true", "F/reboot-needed": "false", "S/reboot-boot-id": "b1", "S/boot-id": "b1", "S/cordoned": "true"}, cordoned: true,
			patches: []string{`{"metadata":{"annotations":{"F/reboot-ok":"false","S/cordoned":null,"S/reboot-boot-id":null},"resourceVersion":"1"},"spec":{"unschedulable":false}}`},
			events:  []string{"Warning CycleAborted cycle ended without a verified reboot: boot ID unchanged, agent reports the same boot (no reboot happened)"}},
		{name: "back, Ready: finish and uncordon", ann: granted, cordoned: true,
			patches: []string{`{"metadata":{"annotations":{"F/reboot-ok":"false","S/cordoned":null,"S/cycle-started":null,"S/last-reboot-time":"NOW","S/reboot-boot-id":null,"S/reboot-ok-time":null},"resourceVersion":"1"},"spec":{"unschedulable":false}}`},
			events:  []string{"Normal RebootCompleted reboot verified (boot ID changed, node Ready); cycle finished, uncordoned"}},
		{name: "back, not Ready: wait", ann: granted, cordoned: true, notReady: true},
		{name: "back, after hooks configured", spec: hooks, ann: granted, cordoned: true,
			patches: []string{`{"metadata":{"labels":{"F/after-reboot":"true"},"resourceVersion":"1"}}`},
			events:  []string{"Normal AfterRebootHooks rebooted (boot ID changed); waiting for after-reboot annotations [example.com/after]"}},
		{name: "after hooks pending: wait", spec: hooks, ann: granted, labels: map[string]string{"F/after-reboot": "true"}, cordoned: true},
		{name: "after hooks done: finish", spec: hooks, ann: func() map[string]string {
			m := map[string]string{"example.com/after": "true"}
			for k, v := range granted {
				m[k] = v
			}
			return m
		}(), labels: map[string]string{"F/after-reboot": "true"}, cordoned: true,
			patches: []string{`{"metadata":{"annotations":{"F/reboot-ok":"false","S/cordoned":null,"S/cycle-started":null,"S/last-reboot-time":"NOW","S/reboot-boot-id":null,"S/reboot-ok-time":null,"example.com/after":null},"labels":{"F/after-reboot":null},"resourceVersion":"1"},"spec":{"unschedulable":false}}`},
			events:  []string{"Normal RebootCompleted reboot verified (boot ID changed, node Ready); cycle finished, uncordoned"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := node("n", c.ann, c.labels)
			n.Spec.Unschedulable = c.cordoned
			if c.notReady {
				n.Status.Conditions[0].Status = corev1.ConditionFalse
			}
			f := newFixture(t, c.spec, nil, n)
			f.sync("n")
			var want []string
			for _, p := range c.patches {
				want = append(want, compact(p))
			}
			f.want(c.name, want, c.events)
		})
	}
}

// A drain that succeeded is granted: reboot-ok with the boot ID it was granted in.
func TestSyncGrantsAfterTheDrain(t *testing.T) {
	n := node("n", map[string]string{"F/reboot-needed": "true", "S/drain-started": "2026-11-19T08:59:00Z", "S/cordoned": "true", "S/cycle-started": "2026-11-19T08:59:00Z"}, nil)
	n.Spec.Unschedulable = true
	f := newFixture(t, nil, nil, n)
	f.c.drains.results["n"] = &drainResult{cycle: "2026-11-19T08:59:00Z", at: now0}
	f.sync("n")
	f.want("grant", []string{compact(`{"metadata":{"annotations":{"F/reboot-ok":"true","S/drain-started":null,"S/reboot-boot-id":"b1","S/reboot-ok-time":"NOW"},"resourceVersion":"1"}}`)},
		[]string{`Normal RebootGranted drained; reboot-ok granted at boot ID "b1"`})
}

// Each gate of admission, as the node's blocked-by annotation, its Event and its requeue.
func TestSyncGates(t *testing.T) {
	need := map[string]string{"F/reboot-needed": "true"}
	panicky := admission.Func{N: "pods-on-node", F: func(context.Context, *corev1.Node) (bool, string) { panic("boom") }}
	alerts := admission.Func{N: "prometheus-alerts", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return true, "1 alert firing: NodeDown" }}
	cases := []struct {
		name    string
		spec    func(*policy.Spec)
		tweak   func(*Config)
		others  []*corev1.Node
		switch_ map[string]string
		patch   string
		event   string
		retry   time.Duration
	}{
		{name: "window", spec: func(s *policy.Spec) {
			s.FLUOWindow = policy.FLUOWindow{Start: "Thu 14:00", Length: "1h", TimeZone: "UTC"}
		},
			patch: `{"metadata":{"annotations":{"S/blocked-by":"window: closed until 2026-11-19T14:00:00Z","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event: "Normal Waiting window: closed until 2026-11-19T14:00:00Z", retry: 5*time.Hour + time.Second},
		{name: "fleet paused", tweak: func(c *Config) { c.Namespace = "slipway-system" }, switch_: map[string]string{fleetswitch.KeyPaused: "incident 42"},
			patch: `{"metadata":{"annotations":{"S/blocked-by":"paused: fleet paused: incident 42","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event: "Warning Blocked paused: fleet paused: incident 42"},
		{name: "fleet-wide blocker", tweak: func(c *Config) { c.Blockers = []admission.Blocker{alerts} },
			patch: `{"metadata":{"annotations":{"S/blocked-by":"prometheus-alerts: 1 alert firing: NodeDown","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event: "Warning Blocked prometheus-alerts: 1 alert firing: NodeDown", retry: admission.DefaultBlockerRetry},
		{name: "workers first", spec: func(s *policy.Spec) { s.ControlPlaneOrder = string(admission.OrderWorkersFirst) },
			others: []*corev1.Node{node("w", map[string]string{"F/reboot-needed": "true"}, nil)},
			patch:  `{"metadata":{"annotations":{"S/blocked-by":"order: workers first (--control-plane-order=workers-first)","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event:  "Normal Waiting order: workers first (--control-plane-order=workers-first)"},
		{name: "budget", others: []*corev1.Node{node("x", map[string]string{"F/reboot-needed": "true", "S/drain-started": "NOW"}, nil)},
			patch: `{"metadata":{"annotations":{"S/blocked-by":"budget: full (max-unavailable)","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event: "Normal Waiting budget: full (max-unavailable)"},
		{name: "a panicking per-node blocker holds the node, the sync returns", tweak: func(c *Config) { c.Blockers = []admission.Blocker{panicky} },
			patch: `{"metadata":{"annotations":{"S/blocked-by":"pods-on-node: check failed: panic: boom","S/waiting-since":"NOW"},"resourceVersion":"1"}}`,
			event: "Warning Blocked pods-on-node: check failed: panic: boom", retry: admission.DefaultBlockerRetry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := node("n", need, map[string]string{protocol.ControlPlaneLabel: ""})
			f := newFixture(t, c.spec, c.tweak, append([]*corev1.Node{n}, c.others...)...)
			if c.switch_ != nil {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: "slipway-system"}, Data: c.switch_}
				if err := f.c.store.Seed(cm); err != nil {
					t.Fatal(err)
				}
			}
			if retry := f.sync("n"); retry != c.retry {
				t.Errorf("requeue after %s, want %s", retry, c.retry)
			}
			f.want(c.name, []string{compact(c.patch)}, []string{c.event})
			// The same answer again writes nothing and records nothing.
			f.sync("n")
			f.want(c.name+", again", nil, nil)
		})
	}
}

// Every action that writes has a row in the effects table, and every row an Event and a PATCH.
func TestEveryWritingActionHasAnEffect(t *testing.T) {
	for _, r := range protocol.Table {
		switch r.Do {
		case protocol.None, protocol.Wait, protocol.Drain:
			continue
		}
		e := effectOf(r.Do)
		if e.Event == "" || e.message == nil || e.patch == nil || e.Writes == "" {
			t.Errorf("%s: incomplete effect %+v", r.Do, e)
		}
	}
}
