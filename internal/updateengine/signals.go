package updateengine

import (
	"sync"

	"github.com/godbus/dbus/v5"
)

// signalQueueLen is how many StatusUpdate signals wait for the watcher before more are dropped.
const signalQueueLen = 64

// signalQueue is the dbus.SignalHandler a watching connection is dialed with (dbus.WithSignalHandler).
// godbus's default handler starts a goroutine for every signal that finds its channel full, so anyone
// on the bus could grow a busy agent's goroutines and memory without bound with a flood of signals.
// signalQueue never blocks godbus's reader and never starts a goroutine: it keeps at most
// signalQueueLen StatusUpdate signals, drops the rest and counts them. Dropping loses nothing that
// matters: update_engine's status is a level, not an edge, so one GetStatus after the drop reads what
// the dropped signals said (see subscription.resync).
//
// It is not a dbus.SignalRegistrar: conn.Signal panics on a connection dialed with it.
type signalQueue struct {
	ch       chan *dbus.Signal
	overflow chan struct{} // holds a token while dropped > 0

	mu      sync.Mutex
	closed  bool
	dropped int
}

func newSignalQueue(n int) *signalQueue {
	return &signalQueue{ch: make(chan *dbus.Signal, n), overflow: make(chan struct{}, 1)}
}

// DeliverSignal implements dbus.SignalHandler. godbus calls it from the goroutine that reads the
// connection, for every signal the bus routes to us; all but StatusUpdate on update_engine's path
// are ignored here so they cannot take room in the queue.
func (q *signalQueue) DeliverSignal(iface, member string, sig *dbus.Signal) {
	if iface != Interface || member != SignalStatusUpdate || sig.Path != ObjectPath {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	select {
	case q.ch <- sig:
	default:
		q.dropped++
		select {
		case q.overflow <- struct{}{}:
		default:
		}
	}
}

// Terminate implements dbus.Terminator: godbus calls it when the connection closes, and the closed
// channel tells the watcher the connection is gone.
func (q *signalQueue) Terminate() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
}

// takeDropped returns how many signals were dropped since the last call.
func (q *signalQueue) takeDropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.dropped
	q.dropped = 0
	return n
}

// discard empties the queue of what it holds now and says how many signals that was.
func (q *signalQueue) discard() int {
	for n := 0; ; n++ {
		select {
		case _, ok := <-q.ch:
			if !ok {
				return n
			}
		default:
			return n
		}
	}
}
