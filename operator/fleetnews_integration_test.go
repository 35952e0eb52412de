package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kptr "k8s.io/utils/ptr"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// News only the status view reads waits while the roll-out goes on: with no policy running canaries, a finished cycle's proof
// and duration are not in the fleet record and Status when the cycle's end is seen, nor after fleet
// syncs that had them in hand, until Config.FleetLazyEvery has passed; then they are written. With
// canaries, the proof is in the record before the cycle's end is seen (a successor must know the canary
// finished).
//
// The operator's clock (opClock) is the test's: FleetLazyEvery is a day, which no slow run reaches, so
// nothing but the test's advance can make the news due. That fleet syncs looked at the news and left it
// is shown by what they did write meanwhile: the history (HistoryEvery, an hour, is passed on purpose),
// which a fleet sync writes after it decided about the record and before it decides about the Status.
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
			for _, cm := range []string{fleetrecord.ConfigMapName, fleetswitch.ConfigMapName, history.ConfigMapName} {
				_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, cm, metav1.DeleteOptions{})
			}
			const lazy, historyEvery = 24 * time.Hour, time.Hour
			nodes := 1
			if !tc.written {
				nodes = 2 // the second cycle's history write shows the fleet sync that wrote the first one ended
			}
			clock := newOpClock()
			sns := simNodes(t, "lazy", nodes)
			startOperator(t, opOptions{now: clock.Now, spec: func(s *policy.Spec) { s.Canary.Nodes = tc.canary }, tweak: func(c *operator.Config) {
				c.Namespace = ns
				c.FleetLazyEvery = lazy
				c.HistoryEvery = historyEvery
			}})
			// A node that asks and is held (paused by hand): the roll-out is not over, so the news
			// waits (once none asks and none is in its cycle, it is written at once: TestQuietFleetNews).
			holdAsking(t, "lazy-held")
			proofs := func() int {
				cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
				if err != nil {
					return 0
				}
				r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
				if err != nil {
					return 0
				}
				return len(r.VersionProofs("4800.0.0", func(string) bool { return false }))
			}
			cycles := func() int { return publishedCycles(ctx, ns) }
			inHistory := func(n *corev1.Node) bool {
				cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, history.ConfigMapName, metav1.GetOptions{})
				if err != nil {
					return false
				}
				r, err := history.Decode(cm.Data[history.Key])
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range r.Cycles {
					if c.UID == string(n.UID) {
						return true
					}
				}
				return false
			}
			// historyWritten passes HistoryEvery on the operator's clock once n's cycle has ended (and
			// the sync that ended it too: settled), and waits for the history write of a fleet sync that
			// began since: that sync had n's proof and duration in hand.
			historyWritten := func(n *corev1.Node) {
				settled(t, n.Name)
				clock.Advance(historyEvery + time.Minute)
				pokeFleet(t, ns)
				waitTrue(t, 30*time.Second, "history of "+n.Name+" written once HistoryEvery passed", func() bool { return inHistory(n) })
			}
			stageVersion(t, sns[0], "4800.0.0")
			n := waitNode(t, sns[0].Name, 60*time.Second, "finished on 4800.0.0", finished)
			if got := proofs() == 1; got != tc.written {
				t.Fatalf("proof of %s in the record when its finish was seen: %v, want %v", n.Name, got, tc.written)
			}
			if !tc.written {
				historyWritten(n)
				if got := proofs(); got != 0 {
					t.Fatalf("%d proofs in the record, written by a fleet sync before FleetLazyEvery passed", got)
				}
				stageVersion(t, sns[1], "4800.0.0")
				n1 := waitNode(t, sns[1].Name, 60*time.Second, "finished on 4800.0.0", finished)
				historyWritten(n1)
				// The fleet sync that wrote n's history has ended (the one that wrote n1's began after it),
				// and it had n's duration: left for later, not published.
				if p, c := proofs(), cycles(); p != 0 || c != 0 {
					t.Fatalf("%d proofs in the record and %d cycle durations published before FleetLazyEvery passed, want none", p, c)
				}
			}
			clock.Advance(lazy)
			pokeFleet(t, ns)
			waitTrue(t, 30*time.Second, "proofs and durations written once FleetLazyEvery passed", func() bool {
				return proofs() == nodes && cycles() == nodes
			})
		})
	}
}

// The history: a cycle that ended is in ConfigMap slipway-history, with when it was admitted, drained,
// granted and ended and how, once Config.HistoryEvery passed -- not at once, nor in the fleet syncs
// before -- and what waits is written when the controller stops.
//
// The operator's clock is the test's (opClock): HistoryEvery is a day, FleetLazyEvery an hour, and
// only the test's advances pass them. A fleet sync that publishes a cycle's duration (once the hour is
// passed) has decided about the history before: the history is checked after such a sync.
func TestHistoryRecorded(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ns := "slipway-history"
	ctx := context.Background()
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	for _, cm := range []string{history.ConfigMapName, fleetswitch.ConfigMapName, fleetrecord.ConfigMapName} {
		_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, cm, metav1.DeleteOptions{})
	}
	const every, lazy = 24 * time.Hour, time.Hour
	clock := newOpClock()
	sns := simNodes(t, "hist", 2)
	stop := startOperator(t, opOptions{now: clock.Now, tweak: func(c *operator.Config) {
		c.Namespace = ns
		c.HistoryEvery = every
		c.FleetLazyEvery = lazy
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
	cycles := func() int { return publishedCycles(ctx, ns) }
	// durationPublished passes FleetLazyEvery on the operator's clock once node's cycle has ended (and
	// the sync that ended it: settled) and waits for a fleet sync that began since to publish the
	// durations: that sync had the cycle's history entry in hand and decided about it first.
	durationPublished := func(node string, want int) {
		settled(t, node)
		clock.Advance(lazy + time.Minute)
		pokeFleet(t, ns)
		waitTrue(t, 30*time.Second, fmt.Sprintf("%d cycle durations published once FleetLazyEvery passed", want), func() bool { return cycles() == want })
	}
	stageVersion(t, sns[0], "4900.0.0")
	n := waitNode(t, sns[0].Name, 60*time.Second, "finished on 4900.0.0", finished)
	durationPublished(n.Name, 1)
	if got := read(); len(got) != 0 {
		t.Fatalf("history written before HistoryEvery passed (%d entries)", len(got))
	}
	clock.Advance(every)
	pokeFleet(t, ns)
	waitTrue(t, 30*time.Second, "history written once HistoryEvery passed", func() bool { return len(read()) != 0 })
	c := read()[0]
	if c.Node != n.Name || c.UID != string(n.UID) || c.Version != "4900.0.0" || c.Result != history.Finished ||
		c.Admitted.IsZero() || c.Drained.IsZero() || c.Granted.IsZero() || c.Asked.IsZero() ||
		c.Granted.Before(c.Admitted) || c.Ended.Before(c.Granted) {
		t.Errorf("history entry %+v: want this node's finished cycle for 4900.0.0 with every time in order", c)
	}
	// A cycle that ends before the controller stops, its HistoryEvery not passed, is written as it stops.
	stageVersion(t, sns[1], "4900.0.0")
	waitNode(t, sns[1].Name, 60*time.Second, "finished on 4900.0.0", finished)
	durationPublished(sns[1].Name, 2)
	if got := read(); len(got) != 1 {
		t.Fatalf("before the stop: %d history entries, want the first cycle's alone (HistoryEvery not passed for the second)", len(got))
	}
	stop()
	if got := read(); len(got) != 2 || got[1].Node != sns[1].Name {
		t.Errorf("after the stop: %+v, want both cycles", got)
	}
}

// publishedCycles is how many cycle durations the fleet Status in ns publishes (0: none, or no Status).
func publishedCycles(ctx context.Context, ns string) int {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	st, _ := fleetswitch.ReadStatus(cm)
	return len(st.CycleSeconds)
}

// holdAsking starts one more simulated node, paused by hand, that asks to reboot: it waits (blocked-by
// paused: node) for as long as the test runs, so a roll-out is never over.
func holdAsking(t *testing.T, name string) {
	t.Helper()
	sn := simNodes(t, name, 1)[0]
	annotate(t, sn.Name, map[string]*string{protocol.RebootPaused: kptr.To(protocol.True)})
	stageVersion(t, sn, "4800.0.0")
	waitNode(t, sn.Name, 30*time.Second, "held by its pause", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "paused:")
	})
}

// Once a roll-out is over (no node in its cycle, none asking), what waited for the status view is
// written at once: right after the last cycle, kubectl slipway status has its duration and the record
// its proof, although FleetLazyEvery (a day, on the test's clock, which it never advances) has not passed.
func TestQuietFleetNews(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-quiet"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	for _, cm := range []string{fleetrecord.ConfigMapName, fleetswitch.ConfigMapName, history.ConfigMapName} {
		_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, cm, metav1.DeleteOptions{})
	}
	clock := newOpClock()
	sns := simNodes(t, "quiet", 2)
	startOperator(t, opOptions{max: "2", now: clock.Now, tweak: func(c *operator.Config) {
		c.Namespace = ns
		c.FleetLazyEvery = 24 * time.Hour
		c.HistoryEvery = 24 * time.Hour
	}})
	for _, sn := range sns {
		stageVersion(t, sn, "4800.0.0")
	}
	for _, sn := range sns {
		waitNode(t, sn.Name, 60*time.Second, "finished on 4800.0.0", finished)
	}
	waitTrue(t, 30*time.Second, "both durations published once the roll-out was over", func() bool { return publishedCycles(ctx, ns) == 2 })
}
