package operator_test

// The operator's clock in the hands of the test, for waits the operator times itself (a stall's
// --reboot-timeout, FleetLazyEvery, HistoryEvery, StuckAfter): the intervals are hours, which no slow
// run reaches by itself, and the test moves the clock past one when it has set up what the operator
// must see by then. A check then holds by construction, not because the test was fast enough.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
)

// opClock is an operator's Config.Now: real time plus what the test advanced it by, or held at one
// reading until the test lets it run again.
type opClock struct {
	mu     sync.Mutex
	offset time.Duration
	held   bool
	at     time.Time // the reading while held
}

func newOpClock() *opClock { return &opClock{} }

func (c *opClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		return c.at
	}
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d (held or running).
func (c *opClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		c.at = c.at.Add(d)
	} else {
		c.offset += d
	}
}

// HoldAt stops the clock at t until Run.
func (c *opClock) HoldAt(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.at = true, t
}

// Run lets a held clock run on from its reading.
func (c *opClock) Run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		c.held, c.offset = false, time.Until(c.at)
	}
}

var fleetPokes atomic.Int64

// pokeFleet makes the operator sync the fleet now (a fleet sync otherwise waits for news or its own
// timer, which the test's clock does not fire): a change of the fleet switch ConfigMap in ns -- an
// annotation nobody reads -- is one. It waits for the operator to have created the ConfigMap.
func pokeFleet(t *testing.T, ns string) {
	t.Helper()
	body := fmt.Sprintf(`{"metadata":{"annotations":{"test.slipway.dev/poke":"%d"}}}`, fleetPokes.Add(1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(context.Background(), fleetswitch.ConfigMapName, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("poking ConfigMap %s/%s: %v", ns, fleetswitch.ConfigMapName, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTrue polls cond until it holds, failing t after timeout.
func waitTrue(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
}
