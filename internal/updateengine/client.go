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

// ConnectSystemBus opens a private connection to the system bus. godbus honours
// DBUS_SYSTEM_BUS_ADDRESS, which is how tests and containers point it at their bus.
func ConnectSystemBus() (*dbus.Conn, error) {
	conn, err := dbus.SystemBusPrivate()
	if err != nil {
		return nil, fmt.Errorf("connecting to the system bus (is /run/dbus/system_bus_socket mounted? DBUS_SYSTEM_BUS_ADDRESS set?): %w", err)
	}
	if err := conn.Auth(nil); err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticating to the system bus: %w", err)
	}
	if err := conn.Hello(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("saying hello to the system bus: %w", err)
	}
	return conn, nil
}

// NewClient uses conn, which the caller owns and closes.
func NewClient(conn *dbus.Conn) *Client { return &Client{conn: conn} }

// GetStatus calls update_engine's GetStatus.
func (c *Client) GetStatus(ctx context.Context) (Status, error) {
	var s Status
	call := c.conn.Object(BusName, ObjectPath).CallWithContext(ctx, MethodGetStatus, 0)
	if call.Err != nil {
		return s, fmt.Errorf("calling %s: %w", MethodGetStatus, call.Err)
	}
	if err := call.Store(&s.LastCheckedTime, &s.Progress, &s.CurrentOperation, &s.NewVersion, &s.NewSize); err != nil {
		return s, fmt.Errorf("reading %s reply: %w", MethodGetStatus, err)
	}
	return s, nil
}

// Subscription receives StatusUpdate signals on one connection.
type Subscription struct {
	conn *dbus.Conn
	sigs chan *dbus.Signal
}

// Subscribe adds the bus match for StatusUpdate on update_engine's object path. It matches on path,
// interface and member but deliberately NOT on sender: `locksmithctl send-need-reboot` emits the
// signal from its own unique name, not from com.coreos.update1. Signals sent after Subscribe returns
// are kept for Run, so a caller can subscribe, then GetStatus, then Run without missing one.
func (c *Client) Subscribe(ctx context.Context) (*Subscription, error) {
	sub := &Subscription{conn: c.conn, sigs: make(chan *dbus.Signal, 64)}
	c.conn.Signal(sub.sigs)
	err := c.conn.AddMatchSignalContext(ctx,
		dbus.WithMatchObjectPath(ObjectPath),
		dbus.WithMatchInterface(Interface),
		dbus.WithMatchMember(SignalStatusUpdate),
	)
	if err != nil {
		c.conn.RemoveSignal(sub.sigs)
		return nil, fmt.Errorf("subscribing to %s.%s: %w", Interface, SignalStatusUpdate, err)
	}
	return sub, nil
}

// Run delivers every StatusUpdate to out, parsed, and reports bodies of the wrong shape to bad
// (ignoring them otherwise). It returns when ctx ends or the connection closes.
func (sub *Subscription) Run(ctx context.Context, out chan<- Status, bad func(error)) error {
	defer sub.conn.RemoveSignal(sub.sigs)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig, ok := <-sub.sigs:
			if !ok {
				return fmt.Errorf("system bus connection closed")
			}
			if sig.Path != ObjectPath || sig.Name != Interface+"."+SignalStatusUpdate {
				continue
			}
			s, err := ParseBody(sig.Body)
			if err != nil {
				if bad != nil {
					bad(fmt.Errorf("ignoring StatusUpdate from %s: %w", sig.Sender, err))
				}
				continue
			}
			select {
			case out <- s:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
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
