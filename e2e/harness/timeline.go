package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Milestones of one node's reboot, in the order they happen.
// "hooks" is the before-reboot label (only when hooks are configured).
var Milestones = []string{"signal", "hooks", "cordon", "reboot-ok", "down", "up", "ready", "uncordoned"}

// Timeline watches every Node (a watch, not sampling) and records, per node and cycle, when each
// milestone was first seen, plus the largest number of nodes unavailable at one instant.
type Timeline struct {
	mu     sync.Mutex
	start  time.Time
	cycles map[string][]map[string]time.Time
	bootAt map[string]string // boot ID at the start of the current cycle
	unav   testenv.Peak
	cancel context.CancelFunc
}

// WatchTimeline starts recording.
func WatchTimeline(ctx context.Context, c kubernetes.Interface) (*Timeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &Timeline{start: time.Now(), cycles: map[string][]map[string]time.Time{}, bootAt: map[string]string{}, cancel: cancel}
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range list.Items {
		t.observe(&list.Items[i])
	}
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			if n, ok := ev.Object.(*corev1.Node); ok {
				t.observe(n)
			}
		}
	}()
	return t, nil
}

// PeakUnavailable is the largest number of nodes unavailable at one instant so far.
func (t *Timeline) PeakUnavailable() int { return t.unav.Max() }

// Stop ends the watch.
func (t *Timeline) Stop() { t.cancel() }

func (t *Timeline) observe(n *corev1.Node) {
	f := protocol.Observe(n, protocol.Hooks{})
	s := protocol.Classify(f)
	now := time.Now()
	t.unav.Set(n.Name, f.Unavailable())
	t.mu.Lock()
	defer t.mu.Unlock()
	cycles := t.cycles[n.Name]
	var cur map[string]time.Time
	if len(cycles) > 0 {
		cur = cycles[len(cycles)-1]
		if _, done := cur["uncordoned"]; done {
			cur = nil
		}
	}
	if cur == nil {
		if !f.Needed {
			return
		}
		cur = map[string]time.Time{"signal": now}
		t.cycles[n.Name] = append(cycles, cur)
		t.bootAt[n.Name] = n.Status.NodeInfo.BootID
	}
	mark := func(m string, cond bool) {
		if _, ok := cur[m]; !ok && cond {
			cur[m] = now
		}
	}
	mark("hooks", n.Labels[protocol.BeforeReboot] == protocol.True)
	mark("cordon", n.Spec.Unschedulable)
	mark("reboot-ok", f.OK)
	mark("down", f.InProgress)
	booted := n.Status.NodeInfo.BootID != t.bootAt[n.Name] || (n.Annotations[protocol.BootID] != "" && n.Annotations[protocol.BootID] != t.bootAt[n.Name])
	mark("up", booted)
	_, up := cur["up"]
	mark("ready", up && f.Ready)
	mark("uncordoned", up && s == protocol.Idle && n.Annotations[protocol.RebootOK] == protocol.False)
}

// Cycles returns the recorded cycles of a node.
func (t *Timeline) Cycles(node string) []map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]map[string]time.Time(nil), t.cycles[node]...)
}

// String prints one line per cycle: each milestone's offset from the cycle's signal, and the total.
func (t *Timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %8s", "node", "at")
	for _, m := range Milestones[1:] {
		fmt.Fprintf(&b, " %10s", m)
	}
	b.WriteString("      total\n")
	names := make([]string, 0, len(t.cycles))
	for n := range t.cycles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, c := range t.cycles[n] {
			s := c["signal"]
			fmt.Fprintf(&b, "%-8s %7.1fs", n, s.Sub(t.start).Seconds())
			last := s
			for _, m := range Milestones[1:] {
				if at, ok := c[m]; ok {
					fmt.Fprintf(&b, " %9.1fs", at.Sub(s).Seconds())
					last = at
				} else {
					fmt.Fprintf(&b, " %10s", "-")
				}
			}
			fmt.Fprintf(&b, " %9.1fs\n", last.Sub(s).Seconds())
		}
	}
	fmt.Fprintf(&b, "peak unavailable at one instant: %d\n", t.unav.Max())
	return b.String()
}
