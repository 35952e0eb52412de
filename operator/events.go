package operator

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// dedupRecorder drops a Warning Event identical (object, reason, message) to one recorded within
// window. client-go's recorder rate-limits Events per object (a burst of 25, then one per 5 minutes),
// so one Warning repeated on every sync of a node would use up that node's allowance and starve its
// other Warnings (DrainFailed, CycleAborted, Stalled). Normal Events are cycle steps and never repeat
// identically within a cycle; they pass through.
type dedupRecorder struct {
	record.EventRecorder
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
}

func newDedupRecorder(r record.EventRecorder, window time.Duration, now func() time.Time) *dedupRecorder {
	return &dedupRecorder{EventRecorder: r, window: window, now: now, seen: map[string]time.Time{}}
}

func (d *dedupRecorder) Event(obj runtime.Object, typ, reason, msg string) {
	if typ == "Warning" && d.repeat(obj, reason, msg) {
		return
	}
	d.EventRecorder.Event(obj, typ, reason, msg)
}

func (d *dedupRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...interface{}) {
	d.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (d *dedupRecorder) AnnotatedEventf(obj runtime.Object, ann map[string]string, typ, reason, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if typ == "Warning" && d.repeat(obj, reason, msg) {
		return
	}
	d.EventRecorder.AnnotatedEventf(obj, ann, typ, reason, "%s", msg)
}

// repeat reports whether the same Warning was recorded within the window, and remembers this one.
func (d *dedupRecorder) repeat(obj runtime.Object, reason, msg string) bool {
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = string(m.GetUID()) + "/" + m.GetName()
	}
	key := name + "\x00" + reason + "\x00" + msg
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.seen[key]; ok && now.Sub(t) < d.window {
		return true
	}
	if len(d.seen) > 10000 {
		// Bounded memory: forget what is out of the window.
		for k, t := range d.seen {
			if now.Sub(t) >= d.window {
				delete(d.seen, k)
			}
		}
	}
	d.seen[key] = now
	return false
}
