package protocol

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name  string
		f     Facts
		state State
		do    Action
		next  State
	}{
		{"idle", Facts{}, Idle, None, Idle},
		{"needs reboot, not admitted", Facts{Needed: true}, NeedsReboot, Wait, NeedsReboot},
		{"needs reboot, admitted, no hooks", Facts{Needed: true, Admitted: true}, NeedsReboot, StartDrain, Draining},
		{"needs reboot, admitted, hooks", Facts{Needed: true, Admitted: true, HasBeforeHooks: true}, NeedsReboot, MarkBeforeReboot, BeforeHooks},
		{"paused needs reboot", Facts{Needed: true, Admitted: true, Paused: true}, NeedsReboot, None, NeedsReboot},
		{"paused mid-drain stays frozen", Facts{Needed: true, DrainStarted: true, Paused: true}, Draining, None, Draining},
		{"before hooks pending", Facts{Needed: true, BeforeLabel: true, HasBeforeHooks: true}, BeforeHooks, Wait, BeforeHooks},
		{"before hooks done", Facts{Needed: true, BeforeLabel: true, HasBeforeHooks: true, BeforeHooksDone: true}, BeforeHooks, StartDrain, Draining},
		{"before hooks, no longer needed", Facts{BeforeLabel: true}, BeforeHooks, Abort, Idle},
		{"draining", Facts{Needed: true, DrainStarted: true}, Draining, Drain, Draining},
		{"drained", Facts{Needed: true, DrainStarted: true, DrainDone: true}, Draining, GrantReboot, Rebooting},
		{"draining, no longer needed", Facts{DrainStarted: true, DrainDone: true}, Draining, Abort, Idle},
		{"drain delay: nothing evicted yet", Facts{Needed: true, DrainStarted: true, DrainDelayed: true}, Draining, Wait, Draining},
		{"drain delay, no longer needed", Facts{DrainStarted: true, DrainDelayed: true}, Draining, Abort, Idle},
		{"drained, reboot delay", Facts{Needed: true, DrainStarted: true, DrainDone: true, RebootDelayed: true}, Draining, Wait, Draining},
		{"drained, reboot delay, no longer needed", Facts{DrainStarted: true, DrainDone: true, RebootDelayed: true}, Draining, Abort, Idle},
		{"granted, agent not back", Facts{Needed: true, OK: true}, Rebooting, Wait, Rebooting},
		{"agent rebooting", Facts{Needed: true, OK: true, InProgress: true}, Rebooting, Wait, Rebooting},
		{"in progress without ok counts as rebooting", Facts{InProgress: true}, Rebooting, Wait, Rebooting},
		{"back, boot unchanged", Facts{OK: true}, Rebooted, Abort, Idle},
		{"agent says new boot, kubelet not yet", Facts{OK: true, AgentBootChanged: true}, Rebooted, Wait, Rebooted},
		// Why 3a: reboot-needed true again after the reboot (a second update, or kubectl annotate) before
		// the cycle finished. The kubelet proves the new boot and the agent spoke in it: the cycle
		// finishes (and the node asks again), instead of waiting for the agent forever.
		{"back, needs another reboot", Facts{Needed: true, OK: true, BootChanged: true, BootVerified: true, AgentCurrent: true, Ready: true}, Rebooted, Finish, Idle},
		{"needed again, agent not yet spoken in the new boot", Facts{Needed: true, OK: true, BootChanged: true, BootVerified: true}, Rebooting, Wait, Rebooting},
		{"needed again, no kubelet proof", Facts{Needed: true, OK: true, AgentCurrent: true}, Rebooting, Wait, Rebooting},
		{"back, not ready", Facts{OK: true, BootChanged: true}, Rebooted, Wait, Rebooted},
		{"back and ready", Facts{OK: true, BootChanged: true, Ready: true}, Rebooted, Finish, Idle},
		{"back, after hooks", Facts{OK: true, BootChanged: true, Ready: true, HasAfterHooks: true}, Rebooted, MarkAfterReboot, AfterHooks},
		{"after hooks pending", Facts{OK: true, AfterLabel: true, HasAfterHooks: true, Ready: true}, AfterHooks, Wait, AfterHooks},
		{"after hooks done, not ready", Facts{OK: true, AfterLabel: true, HasAfterHooks: true, AfterHooksDone: true}, AfterHooks, Wait, AfterHooks},
		{"after hooks done, ready", Facts{OK: true, AfterLabel: true, HasAfterHooks: true, AfterHooksDone: true, Ready: true}, AfterHooks, Finish, Idle},
		{"after label wins over a new reboot-needed", Facts{Needed: true, OK: true, AfterLabel: true, AfterHooksDone: true, Ready: true}, AfterHooks, Finish, Idle},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, r := Decide(c.f)
			if s != c.state || r.Do != c.do || r.Next != c.next {
				t.Errorf("Decide(%+v) = %s, %s -> %s; want %s, %s -> %s", c.f, s, r.Do, r.Next, c.state, c.do, c.next)
			}
		})
	}
}

// Every state must end in a row that always applies, so Decide never falls off the table.
func TestTableCoversEveryState(t *testing.T) {
	for _, s := range []State{Idle, NeedsReboot, BeforeHooks, Draining, Rebooting, Rebooted, AfterHooks} {
		var last *Row
		for i := range Table {
			if Table[i].From == s {
				last = &Table[i]
			}
		}
		if last == nil {
			t.Errorf("state %s has no rows", s)
			continue
		}
		if !last.If(Facts{}) || !last.If(Facts{Needed: true, OK: true, Ready: true, Admitted: true, DrainDone: true, BootChanged: true, HasBeforeHooks: true, HasAfterHooks: true}) {
			t.Errorf("last row of state %s (%q) does not always apply", s, last.When)
		}
	}
}

func TestInCycle(t *testing.T) {
	in := map[State]bool{Idle: false, NeedsReboot: false, BeforeHooks: true, Draining: true, Rebooting: true, Rebooted: true, AfterHooks: true}
	for s, want := range in {
		if s.InCycle() != want {
			t.Errorf("%s.InCycle() = %v, want %v", s, s.InCycle(), want)
		}
	}
}

func node(ann, lab map[string]string, bootID string, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: ann, Labels: lab}}
	n.Status.NodeInfo.BootID = bootID
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

func TestObserve(t *testing.T) {
	hooks := Hooks{Before: []string{"example.com/before"}, After: []string{"example.com/after"}}
	n := node(map[string]string{
		RebootNeeded:         "yes",
		RebootOK:             True,
		RebootBootID:         "boot-1",
		BootID:               "boot-1",
		"example.com/before": True,
		"example.com/after":  "false",
	}, map[string]string{BeforeReboot: "TRUE"}, "boot-1", true)
	f := Observe(n, hooks)
	if f.Needed || f.BeforeLabel {
		t.Errorf("malformed values must read as false: %+v", f)
	}
	want := []string{`annotation ` + RebootNeeded + `="yes"`, `label ` + BeforeReboot + `="TRUE"`}
	if !reflect.DeepEqual(f.Malformed, want) {
		t.Errorf("Malformed = %q, want %q", f.Malformed, want)
	}
	if !f.OK || !f.Ready || f.BootChanged || !f.BeforeHooksDone || f.AfterHooksDone || !f.HasBeforeHooks {
		t.Errorf("unexpected facts %+v", f)
	}

	// Only the kubelet's boot ID proves a reboot: an agent (or anyone who may patch annotations) saying
	// "new boot" while the kubelet reports the old one is a reason to wait, not proof.
	n.Annotations[BootID] = "boot-2"
	if f := Observe(n, hooks); f.BootChanged || f.BootVerified || !f.AgentBootChanged || f.AgentCurrent {
		t.Errorf("agent's boot ID alone must not prove a reboot: %+v", f)
	}
	n.Status.NodeInfo.BootID = "boot-2"
	if f := Observe(n, hooks); !f.BootChanged || !f.BootVerified || !f.AgentCurrent {
		t.Errorf("kubelet's new boot ID is proof, and the agent has spoken in it: %+v", f)
	}
	// A kubelet that reports no boot ID: the agent's is the fallback.
	n.Status.NodeInfo.BootID = ""
	if f := Observe(n, hooks); !f.BootChanged || !f.BootVerified {
		t.Errorf("without a kubelet boot ID the agent's counts: %+v", f)
	}
	// Nothing recorded: nothing to verify against.
	delete(n.Annotations, RebootBootID)
	if f := Observe(n, hooks); !f.BootChanged || f.BootVerified {
		t.Errorf("no recorded boot ID must read as changed, not verified: %+v", f)
	}
}

// reboot-paused fails closed: anything but absent or "false" holds the node, and a malformed value is
// reported.
func TestObservePaused(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "false": false, "True": true, "yes": true, "": true, "0": true} {
		f := Observe(node(map[string]string{RebootPaused: v}, nil, "b", true), Hooks{})
		if f.Paused != want {
			t.Errorf("reboot-paused=%q: paused %v, want %v", v, f.Paused, want)
		}
		if malformed := len(f.Malformed) > 0; malformed != (v != "true" && v != "false") {
			t.Errorf("reboot-paused=%q: malformed %q", v, f.Malformed)
		}
	}
	if Observe(node(nil, nil, "b", true), Hooks{}).Paused {
		t.Error("no reboot-paused must not pause")
	}
}

func TestParseBool(t *testing.T) {
	for _, c := range []struct {
		m                     map[string]string
		value, present, valid bool
	}{
		{nil, false, false, true},
		{map[string]string{"k": "true"}, true, true, true},
		{map[string]string{"k": "false"}, false, true, true},
		{map[string]string{"k": "True"}, false, true, false},
		{map[string]string{"k": ""}, false, true, false},
	} {
		v, p, ok := ParseBool(c.m, "k")
		if v != c.value || p != c.present || ok != c.valid {
			t.Errorf("ParseBool(%v) = %v,%v,%v want %v,%v,%v", c.m, v, p, ok, c.value, c.present, c.valid)
		}
	}
}

// The FLUO keys are a wire protocol: they must never change.
func TestFLUOKeysUnchanged(t *testing.T) {
	want := map[string]string{
		RebootNeeded:           "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed",
		RebootInProgress:       "flatcar-linux-update.v1.flatcar-linux.net/reboot-in-progress",
		RebootOK:               "flatcar-linux-update.v1.flatcar-linux.net/reboot-ok",
		RebootPaused:           "flatcar-linux-update.v1.flatcar-linux.net/reboot-paused",
		Status:                 "flatcar-linux-update.v1.flatcar-linux.net/status",
		LastCheckedTime:        "flatcar-linux-update.v1.flatcar-linux.net/last-checked-time",
		NewVersion:             "flatcar-linux-update.v1.flatcar-linux.net/new-version",
		AgentMadeUnschedulable: "flatcar-linux-update.v1.flatcar-linux.net/agent-made-unschedulable",
		BeforeReboot:           "flatcar-linux-update.v1.flatcar-linux.net/before-reboot",
		AfterReboot:            "flatcar-linux-update.v1.flatcar-linux.net/after-reboot",
		ID:                     "flatcar-linux-update.v1.flatcar-linux.net/id",
		Version:                "flatcar-linux-update.v1.flatcar-linux.net/version",
		Group:                  "flatcar-linux-update.v1.flatcar-linux.net/group",
	}
	for got, w := range want {
		if got != w {
			t.Errorf("key %q changed; FLUO uses %q", got, w)
		}
		if _, ok := Owners[got]; !ok {
			t.Errorf("key %q has no owner in Owners", got)
		}
	}
}

func TestNodeDecide(t *testing.T) {
	cases := []struct {
		name string
		f    NodeFacts
		is   NodeState
		do   NodeAction
	}{
		{"nothing needed", NodeFacts{}, NodeIdle, NodeReport},
		{"nothing needed, stale grant", NodeFacts{OK: true}, NodeIdle, NodeReport},
		{"needed", NodeFacts{Needed: true}, NodeAsking, NodeAsk},
		{"granted in this boot", NodeFacts{Needed: true, OK: true, GrantedThisBoot: true}, NodeRebooting, NodeReboot},
		// Why 3b: a reboot-ok of an earlier boot is never a second reboot.
		{"granted in an earlier boot", NodeFacts{Needed: true, OK: true}, NodeStaleGrant, NodeAsk},
		{"paused before the grant", NodeFacts{Needed: true, Paused: true}, NodeHeld, NodeAsk},
		{"paused after the grant", NodeFacts{Needed: true, OK: true, GrantedThisBoot: true, Paused: true}, NodeHeld, NodeAsk},
	}
	for _, c := range cases {
		r := NodeDecide(c.f)
		if r.Is != c.is || r.Do != c.do {
			t.Errorf("%s: NodeDecide(%+v) = %s/%s, want %s/%s", c.name, c.f, r.Is, r.Do, c.is, c.do)
		}
	}
}

// What the node side writes in each state, written out by hand (FLUO's keys: reboot-needed as
// annotation and label, reboot-in-progress as annotation).
func TestNodeWrites(t *testing.T) {
	cases := []struct {
		inProgress, needed bool
		want               []Effect
	}{
		{false, false, []Effect{{RebootNeeded, False, true}, {RebootInProgress, False, false}}},
		{false, true, []Effect{{RebootNeeded, True, true}, {RebootInProgress, False, false}}},
		{true, true, []Effect{{RebootNeeded, True, true}, {RebootInProgress, True, false}}},
		{true, false, []Effect{{RebootNeeded, True, true}, {RebootInProgress, True, false}}},
	}
	for _, c := range cases {
		got := NodeWrites(c.inProgress, c.needed)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("NodeWrites(%v, %v) = %v, want %v", c.inProgress, c.needed, got, c.want)
		}
		// A caller appending to its slice must not change the table.
		got[0].Value = "changed"
		_ = append(got, Effect{Key: "x"})
	}
	if NodeEffects[NodeReboot][0].Value != True || NodeEffects[NodeReport][0].Value != False || len(NodeBack) != 1 {
		t.Errorf("NodeWrites let a caller change the tables: %v %v", NodeEffects, NodeBack)
	}
}

func TestGrantedThisBoot(t *testing.T) {
	n := func(rec string) *corev1.Node {
		a := map[string]string{RebootOK: True}
		if rec != "" {
			a[RebootBootID] = rec
		}
		return node(a, nil, "", true)
	}
	for _, c := range []struct {
		rec, boot      string
		fallback, want bool
	}{
		{"b1", "b1", false, true},
		{"b1", "b2", true, false}, // recorded for another boot: the fallback cannot rescue it
		{"b1", "", true, false},
		{"", "b1", true, true}, // FLUO's operator records nothing: the caller's fallback decides
		{"", "b1", false, false},
	} {
		if got := GrantedThisBoot(n(c.rec), c.boot, c.fallback); got != c.want {
			t.Errorf("GrantedThisBoot(recorded %q, boot %q, fallback %v) = %v, want %v", c.rec, c.boot, c.fallback, got, c.want)
		}
	}
}
