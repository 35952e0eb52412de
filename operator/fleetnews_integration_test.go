package operator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/admission"
)

// News only the status view reads waits: with no policy running canaries, a finished cycle's proof
// and duration are not in the fleet record and Status when the cycle's end is seen, and are there
// within Config.FleetLazyEvery after. With canaries, the proof is in the record before the cycle's end
// is seen (a successor must know the canary finished).
func TestLazyFleetNews(t *testing.T) {
	needCluster(t)
	for _, tc := range []struct {
		name    string
		canary  int
		written bool // the proof is in the record when the finish is seen
	}{
		{"no canaries", 0, false},
		{"canaries", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanNodes(t)
			ns := "slipway-lazy-" + map[bool]string{true: "c", false: "n"}[tc.canary > 0]
			ctx := context.Background()
			_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{})
			_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
			const lazy = 4 * time.Second
			sns := simNodes(t, "lazy", 1)
			startOperator(t, opOptions{tweak: func(c *operator.Config) {
				c.Namespace = ns
				c.FleetLazyEvery = lazy
				c.Canary = admission.Canary{Nodes: tc.canary}
			}})
			stageVersion(t, sns[0], "4800.0.0")
			n := waitNode(t, sns[0].Name, 60*time.Second, "finished on 4800.0.0", finished)
			seen := time.Now()
			proven := func() bool {
				cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
				if err != nil {
					return false
				}
				r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
				return err == nil && len(r.VersionProofs("4800.0.0", func(string) bool { return false })) == 1
			}
			timed := func() bool {
				cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
				if err != nil {
					return false
				}
				st, ok := fleetswitch.ReadStatus(cm)
				return ok && len(st.CycleSeconds) == 1
			}
			if got := proven(); got != tc.written {
				t.Fatalf("proof of %s in the record when its finish was seen: %v, want %v", n.Name, got, tc.written)
			}
			if !tc.written && timed() {
				t.Fatal("the cycle's duration was published at once, not left for the status view's next refresh")
			}
			for !proven() || !timed() {
				if time.Since(seen) > lazy+20*time.Second {
					t.Fatalf("proof written %v, duration published %v, %s after the finish (lazy bound %s)", proven(), timed(), time.Since(seen).Round(time.Second), lazy)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// The history: a cycle that ended is in ConfigMap slipway-history, with when it was admitted, drained,
// granted and ended and how, once Config.HistoryEvery passed -- not at once -- and what waits is written
// when the controller stops.
func TestHistoryRecorded(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ns := "slipway-history"
	ctx := context.Background()
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, history.ConfigMapName, metav1.DeleteOptions{})
	const every = 3 * time.Second
	sns := simNodes(t, "hist", 2)
	stop := startOperator(t, opOptions{tweak: func(c *operator.Config) {
		c.Namespace = ns
		c.HistoryEvery = every
	}})
	read := func() []history.Cycle {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, history.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		r, err := history.Decode(cm.Data[history.Key])
		if err != nil {
			t.Fatal(err)
		}
		return r.Cycles
	}
	stageVersion(t, sns[0], "4900.0.0")
	n := waitNode(t, sns[0].Name, 60*time.Second, "finished on 4900.0.0", finished)
	if got := read(); len(got) != 0 {
		t.Fatalf("history written with the cycle's end (%d entries), not after %s", len(got), every)
	}
	deadline := time.Now().Add(every + 20*time.Second)
	for len(read()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no history %s after the cycle ended", every+20*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c := read()[0]
	if c.Node != n.Name || c.UID != string(n.UID) || c.Version != "4900.0.0" || c.Result != history.Finished ||
		c.Admitted.IsZero() || c.Drained.IsZero() || c.Granted.IsZero() || c.Asked.IsZero() ||
		c.Granted.Before(c.Admitted) || c.Ended.Before(c.Granted) {
		t.Errorf("history entry %+v: want this node's finished cycle for 4900.0.0 with every time in order", c)
	}
	// A cycle that ends just before the controller stops is written as it stops.
	stageVersion(t, sns[1], "4900.0.0")
	waitNode(t, sns[1].Name, 60*time.Second, "finished on 4900.0.0", finished)
	stop()
	if got := read(); len(got) != 2 || got[1].Node != sns[1].Name {
		t.Errorf("after the stop: %+v, want both cycles", got)
	}
}
