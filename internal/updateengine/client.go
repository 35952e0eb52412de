package updateengine

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// Client reads update_engine's status over one private system-bus connection.
type Client struct {
	conn *dbus.Conn
}

// NewClient uses conn, which the caller owns and closes.
func NewClient(conn *dbus.Conn) *Client { return &Client{conn: conn} }

// GetStatus calls update_engine's GetStatus. The reply goes through ParseBody like a signal's body:
// the same shape check and the same bounds.
func (c *Client) GetStatus(ctx context.Context) (Status, error) {
	call := c.conn.Object(BusName, ObjectPath).CallWithContext(ctx, MethodGetStatus, 0)
	if call.Err != nil {
		return Status{}, fmt.Errorf("calling %s: %w", MethodGetStatus, call.Err)
	}
	s, err := ParseBody(call.Body)
	if err != nil {
		return Status{}, fmt.Errorf("reading %s reply: %w", MethodGetStatus, err)
	}
	return s, nil
}

// subscription receives StatusUpdate signals on one connection through its signalQueue.
type subscription struct {
	c *Client
	q *signalQueue
}

// subscribe adds the bus match for StatusUpdate on update_engine's object path; q must be the signal
// handler c's connection was dialed with. It matches on path, interface and member but deliberately
// NOT on sender: `locksmithctl send-need-reboot` emits the signal from its own unique name, not from
// com.coreos.update1. Signals sent after subscribe returns wait in q for run, so a caller can
// subscribe, then GetStatus, then run without missing one (unless q overflows; run then resyncs).
func (c *Client) subscribe(ctx context.Context, q *signalQueue) (*subscription, error) {
	err := c.conn.AddMatchSignalContext(ctx,
		dbus.WithMatchObjectPath(ObjectPath),
		dbus.WithMatchInterface(Interface),
		dbus.WithMatchMember(SignalStatusUpdate),
	)
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s.%s: %w", Interface, SignalStatusUpdate, err)
	}
	return &subscription{c: c, q: q}, nil
}

// run delivers every queued StatusUpdate to out, parsed, and reports to bad bodies of the wrong shape
// (ignoring them otherwise), mended new_versions, and dropped signals. After a drop it resyncs. It
// returns when ctx ends or the connection closes.
func (sub *subscription) run(ctx context.Context, out chan<- Status, bad func(error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.q.overflow:
			if err := sub.resync(ctx, out, bad); err != nil {
				return err
			}
		case sig, ok := <-sub.q.ch:
			if !ok {
				return fmt.Errorf("system bus connection closed")
			}
			s, err := ParseBody(sig.Body)
			if err != nil {
				bad(fmt.Errorf("ignoring StatusUpdate from %s: %w", sig.Sender, err))
				continue
			}
			if err := send(ctx, out, s, "StatusUpdate from "+sig.Sender, bad); err != nil {
				return err
			}
		}
	}
}

// resync follows a drop. What is still queued is older than the drop, so it is skipped, and GetStatus
// says what the dropped signals said; signals that arrive meanwhile are no older than its reply (the
// bus keeps update_engine's messages in order) and follow it. A status sent by someone else than
// update_engine (`locksmithctl send-need-reboot`) may be lost in a flood: GetStatus cannot know it.
func (sub *subscription) resync(ctx context.Context, out chan<- Status, bad func(error)) error {
	skipped := sub.q.discard()
	if dropped := sub.q.takeDropped(); dropped > 0 {
		bad(fmt.Errorf("dropped %d StatusUpdate signals because %d were already waiting, skipped %d queued ones; asking %s instead", dropped, signalQueueLen, skipped, MethodGetStatus))
	}
	return sub.getStatus(ctx, out, bad)
}

// getStatus sends GetStatus's answer to out; a failed call is reported, not fatal (update_engine may
// not be up yet; its next signal will tell).
func (sub *subscription) getStatus(ctx context.Context, out chan<- Status, bad func(error)) error {
	s, err := sub.c.GetStatus(ctx)
	if err != nil {
		bad(err)
		return nil
	}
	return send(ctx, out, s, MethodGetStatus, bad)
}

// send reports what ParseBody mended in s and hands s to out.
func send(ctx context.Context, out chan<- Status, s Status, from string, bad func(error)) error {
	if s.Cut != "" {
		bad(fmt.Errorf("%s: %s", from, s.Cut))
	}
	select {
	case out <- s:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SendNeedReboot emits what `locksmithctl send-need-reboot` emits: a StatusUpdate signal with
// UPDATE_STATUS_UPDATED_NEED_REBOOT and zero/empty other fields, from conn's own name.
func SendNeedReboot(conn *dbus.Conn) error {
	s := Status{CurrentOperation: StatusUpdatedNeedReboot}
	if err := conn.Emit(ObjectPath, Interface+"."+SignalStatusUpdate, s.Body()...); err != nil {
		return fmt.Errorf("emitting %s.%s: %w", Interface, SignalStatusUpdate, err)
	}
	return nil
}

// AttemptUpdate asks update_engine to check for an update now. It re-reads update.conf for every check,
// so this is how a changed GROUP or SERVER takes effect without a reboot. update_engine ignores it
// while an update waits for its reboot (UPDATE_STATUS_UPDATED_NEED_REBOOT) and answers before the
// check has run; the check's progress comes as StatusUpdate signals.
func (c *Client) AttemptUpdate(ctx context.Context) error {
	if call := c.conn.Object(BusName, ObjectPath).CallWithContext(ctx, MethodAttemptUpdate, 0); call.Err != nil {
		return fmt.Errorf("calling %s: %w", MethodAttemptUpdate, call.Err)
	}
	return nil
}
