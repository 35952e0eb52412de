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
		{"granted, agent not back", Facts{Needed: true, OK: true}, Rebooting, Wait, Rebooting},
		{"agent rebooting", Facts{Needed: true, OK: true, InProgress: true}, Rebooting, Wait, Rebooting},
		{"in progress without ok counts as rebooting", Facts{InProgress: true}, Rebooting, Wait, Rebooting},
		{"back, boot unchanged", Facts{OK: true}, Rebooted, Abort, Idle},
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

	// Either reported boot ID differing from the recorded one proves the reboot (the kubelet's may lag).
	n.Annotations[BootID] = "boot-2"
	if !Observe(n, hooks).BootChanged {
		t.Error("agent's new boot ID must count as a reboot even while the kubelet still reports the old one")
	}
	// Nothing recorded: nothing to verify against.
	delete(n.Annotations, RebootBootID)
	if !Observe(n, hooks).BootChanged {
		t.Error("no recorded boot ID must read as changed")
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
