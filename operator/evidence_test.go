package operator_test

// The operator's own evidence that it looked, for checks that something did NOT happen. A test that
// sleeps and then finds nothing changed passes just as well when the operator never looked at the
// change in time; these helpers wait instead for the operator to say what it saw (an Event it
// records, its blocked-by annotation, a fence it asked), and only then assert that nothing else
// changed.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// opEvents holds every Event the in-process operators record (startOperator wraps their Recorder),
// taken as they record it: before client-go's per-object spam filter and the API round trip, with the
// resourceVersion of the Node as the operator read it.
var opEvents eventTap

type recordedEvent struct {
	Node, ResourceVersion, Type, Reason, Message string
}

type eventTap struct {
	mu      sync.Mutex
	events  []recordedEvent
	changed chan struct{} // closed and replaced on every Event
}

func (e *eventTap) add(obj runtime.Object, typ, reason, msg string) {
	ev := recordedEvent{Type: typ, Reason: reason, Message: msg}
	if m, err := meta.Accessor(obj); err == nil {
		ev.Node, ev.ResourceVersion = m.GetName(), m.GetResourceVersion()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
	if e.changed != nil {
		close(e.changed)
	}
	e.changed = make(chan struct{})
}

// mark is how many Events were recorded so far: wait(after=mark()) sees only later ones.
func (e *eventTap) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.events)
}

// wait returns the first Event on node after the after-th for which match holds, failing t after
// timeout.
func (e *eventTap) wait(t *testing.T, node string, after int, timeout time.Duration, what string, match func(recordedEvent) bool) recordedEvent {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for next := after; ; {
		e.mu.Lock()
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		evs, changed := e.events[next:], e.changed
		e.mu.Unlock()
		for _, ev := range evs {
			if ev.Node == node && match(ev) {
				return ev
			}
		}
		next += len(evs)
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: the operator recorded no such Event on %s within %s", what, node, timeout)
		}
	}
}

// waitCount waits until n Events on node after the after-th match, failing t after timeout.
func (e *eventTap) waitCount(t *testing.T, node string, after, n int, timeout time.Duration, what string, match func(recordedEvent) bool) {
	t.Helper()
	seen := 0
	e.wait(t, node, after, timeout, what, func(ev recordedEvent) bool {
		if match(ev) {
			seen++
		}
		return seen >= n
	})
}

// tapRecorder is the operator's Recorder in these tests: every Event goes to opEvents, then on.
type tapRecorder struct{ record.EventRecorder }

func (r tapRecorder) Event(obj runtime.Object, typ, reason, msg string) {
	opEvents.add(obj, typ, reason, msg)
	r.EventRecorder.Event(obj, typ, reason, msg)
}

func (r tapRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...interface{}) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (r tapRecorder) AnnotatedEventf(obj runtime.Object, ann map[string]string, typ, reason, format string, args ...interface{}) {
	opEvents.add(obj, typ, reason, fmt.Sprintf(format, args...))
	r.EventRecorder.AnnotatedEventf(obj, ann, typ, reason, format, args...)
}

var probes atomic.Int64

// settled returns once the in-process operator has finished a sync of node that read everything
// written to the node before the call: then "nothing happened" means the operator saw the change and
// decided to do nothing, not that it had not got to it yet.
//
// It writes a probe, a malformed value of FLUO's agent-made-unschedulable (malformed reads as false,
// exactly like no value, so the probe changes no decision; not for nodes where FLUO's agent set it
// true), and waits for the MalformedAnnotation Event the operator records when it reads that value:
// that sync read the node after everything written before the probe. It does so twice: the work queue
// never syncs one node twice at once, so the sync that reports the second probe began after the one
// that reported the first had ended, with all of its writes. The probe is removed again.
func settled(t *testing.T, node string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		v := fmt.Sprintf("probe-%d", probes.Add(1))
		annotate(t, node, map[string]*string{protocol.AgentMadeUnschedulable: &v})
		opEvents.wait(t, node, 0, 30*time.Second, "the operator reads probe "+v, func(e recordedEvent) bool {
			return e.Reason == "MalformedAnnotation" && strings.Contains(e.Message, protocol.AgentMadeUnschedulable+"="+strconv.Quote(v))
		})
	}
	annotate(t, node, map[string]*string{protocol.AgentMadeUnschedulable: nil})
}

// blockedBy waits for the node's blocked-by annotation to name kind ("window", "budget", "paused",
// ...): the operator looked at the waiting node and decided it may not start yet, and why.
func blockedBy(t *testing.T, node, kind string) *corev1.Node {
	t.Helper()
	return waitNode(t, node, 30*time.Second, "blocked-by "+kind, func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], kind+": ")
	})
}

// nodeHistory records every version of one Node from now on through a watch (not sampling), for
// "this never happened in between" checks.
type nodeHistory struct {
	name     string
	mu       sync.Mutex
	versions []*corev1.Node
}

func watchNode(t *testing.T, name string) *nodeHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := getNode(t, name)
	h := &nodeHistory{name: name, versions: []*corev1.Node{n}}
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				h.mu.Lock()
				h.versions = append(h.versions, n)
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// ever returns the first version for which cond holds, nil if none, once the watch has delivered
// every version up to the Node as it is now.
func (h *nodeHistory) ever(t *testing.T, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	now := getNode(t, h.name)
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		caught := false
		for _, n := range h.versions {
			caught = caught || n.ResourceVersion == now.ResourceVersion
		}
		h.mu.Unlock()
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch of %s never delivered resourceVersion %s", h.name, now.ResourceVersion)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.versions {
		if cond(n) {
			return n
		}
	}
	return nil
}
