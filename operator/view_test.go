package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	pol "github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
	"github.com/slipway-dev/slipway/operator/status"
)

// The status view (kubectl slipway) and the operator count every pool alike under both stall
// policies: the view from the Nodes and the policy the operator publishes (its stall policy
// included), the operator from its index. A node that stalled after its grant is the case where they
// used to differ: the operator stopped counting it under --stall-policy=release, the view did not.
func TestViewAndOperatorAgree(t *testing.T) {
	zone := "topology.kubernetes.io/zone"
	mk := func(name, z string, ann map[string]string, cp, ready, cordoned bool) *corev1.Node {
		n := node(name, ann, map[string]string{zone: z})
		if cp {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		if !ready {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		n.Spec.Unschedulable = cordoned
		return n
	}
	stalledAfterGrant := map[string]string{"F/reboot-ok": "true", "F/reboot-needed": "true", "S/reboot-boot-id": "b1", "S/boot-id": "b1",
		"S/reboot-ok-time": "2026-11-19T08:00:00Z", "S/stalled": "reboot-timeout", "S/cordoned": "true"}
	nodes := []*corev1.Node{
		mk("a1", "a", stalledAfterGrant, false, true, true),
		mk("a2", "a", map[string]string{"F/reboot-needed": "true", "S/drain-started": "2026-11-19T08:59:00Z"}, false, true, true),
		mk("a3", "a", nil, false, false, false),
		mk("b1", "b", map[string]string{"F/reboot-needed": "true"}, false, true, false),
		mk("b2", "b", nil, false, true, true),
		mk("c1", "", stalledAfterGrant, true, false, true),
		mk("c2", "", nil, true, true, false),
	}
	for _, sp := range []stall.SlotPolicy{stall.Hold, stall.Release} {
		t.Run("published policy/"+string(sp), func(t *testing.T) {
			testViewAndOperatorAgree(t, sp, zone, nodes)
		})
	}
}

// testViewAndOperatorAgree: the operator's policy compiled from a Spec, whose published form the view
// reads next to the operator's Status.
func testViewAndOperatorAgree(t *testing.T, sp stall.SlotPolicy, zone string, nodes []*corev1.Node) {
	f := newFixture(t, func(s *pol.Spec) {
		s.StallPolicy, s.GroupLabel, s.MaxUnavailable, s.MaxUnavailablePerGroup = string(sp), zone, "50%", "1"
	}, nil, nodes...)
	raw, err := json.Marshal(statusOf(f.c.cfg))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]string{fleetswitch.KeyStatus: string(raw), fleetswitch.KeyPolicies: pol.Publish(pol.Named{Spec: f.c.cfg.Spec})}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName}, Data: data}
	var objs []corev1.Node
	for _, n := range nodes {
		objs = append(objs, *n)
	}
	view := status.Build(objs, cm, fleetrecord.Record{}, "slipway-system", now0)
	var got, want []string
	for _, b := range view.Fleet.Budgets {
		limit := "none"
		if b.Limit != nil {
			limit = fmt.Sprint(*b.Limit)
		}
		got = append(got, fmt.Sprintf("%s/%s %d of %d, limit %s", b.Pool, b.Group, b.Unavailable, b.Nodes, limit))
	}
	for _, p := range f.c.Pools() {
		limit := "none"
		if p.Limited {
			limit = fmt.Sprint(p.Limit)
		}
		want = append(want, fmt.Sprintf("%s/%s %d of %d, limit %s", p.Kind, p.Group, p.Used, p.Nodes, limit))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("view %q\noperator %q", got, want)
	}
	// And the two stalled nodes are what tells the policies apart.
	fleetUsed := map[stall.SlotPolicy]int{stall.Hold: 5, stall.Release: 3}[sp] // a1, a2, a3 (NotReady), b2 (cordoned), c1; release frees a1 and c1
	if p := f.c.Pools()[0]; p.Used != fleetUsed {
		t.Errorf("fleet pool used %d under %s, want %d", p.Used, sp, fleetUsed)
	}
}

// What the status view's ETAs and stall countdowns read is published: --reboot-timeout and
// --settle-time in the policy, and in the Status how long the last cycles took, measured at each finish
// and carried on from what an earlier leader published, the newest fleetswitch.MaxCycleSamples.
func TestFleetStatusForTheView(t *testing.T) {
	const ns = "slipway-system"
	granted := map[string]string{"F/reboot-ok": "true", "F/reboot-needed": "false", "S/reboot-boot-id": "b0", "S/boot-id": "b1",
		"S/reboot-ok-time": "2026-11-19T08:50:00Z", "S/cycle-started": "2026-11-19T08:40:00Z", "S/cordoned": "true"}
	n := node("n", granted, nil)
	n.Spec.Unschedulable = true
	f := newFixture(t, func(s *pol.Spec) {
		s.RebootTimeout, s.Settle.Time = metav1.Duration{Duration: 30 * time.Minute}, metav1.Duration{Duration: 5 * time.Minute}
	}, func(c *Config) { c.Namespace = ns }, n)
	prev := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: ns},
		Data: map[string]string{fleetswitch.KeyStatus: `{"leader":"op-0","cycleSeconds":[600,900]}`}}
	if err := f.client.Tracker().Add(prev); err != nil {
		t.Fatal(err)
	}
	if err := f.c.store.Seed(prev); err != nil {
		t.Fatal(err)
	}
	f.sync("n") // finishes: 20 minutes since cycle-started
	published := func() (fleetswitch.Status, pol.Spec) {
		t.Helper()
		if err := f.c.store.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		cm, err := f.client.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, ok := fleetswitch.ReadStatus(cm)
		if !ok {
			t.Fatalf("no status published: %v", cm.Data)
		}
		p, err := pol.ReadPublished(cm.Data[fleetswitch.KeyPolicies])
		if err != nil {
			t.Fatal(err)
		}
		spec, ok := p.Default()
		if !ok {
			t.Fatalf("no default policy published: %v", cm.Data)
		}
		return st, spec
	}
	st, spec := published()
	if fmt.Sprint(st.CycleSeconds) != "[600 900 1200]" || spec.RebootTimeout.Duration != 30*time.Minute || spec.Settle.Time.Duration != 5*time.Minute {
		t.Errorf("published cycles %v, reboot timeout %s, settle time %s; want [600 900 1200], 30m0s, 5m0s", st.CycleSeconds, spec.RebootTimeout.Duration, spec.Settle.Time.Duration)
	}
	for i := range fleetswitch.MaxCycleSamples {
		f.c.store.NoteCycle(time.Duration(i+1) * time.Minute)
	}
	if st, _ := published(); len(st.CycleSeconds) != fleetswitch.MaxCycleSamples || st.CycleSeconds[0] != 60 || st.CycleSeconds[fleetswitch.MaxCycleSamples-1] != 1200 {
		t.Errorf("after %d more: %v, want the newest %d", fleetswitch.MaxCycleSamples, st.CycleSeconds, fleetswitch.MaxCycleSamples)
	}
}
