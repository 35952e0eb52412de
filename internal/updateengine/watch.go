package updateengine

import (
	"context"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Dialer opens a new bus connection.
type Dialer func() (*dbus.Conn, error)

// Watch delivers update_engine's status to out until ctx ends: on every (re)connect first whatever
// GetStatus says, then every StatusUpdate signal. A lost bus connection (dbus restarted, update_engine
// not up yet) is retried with capped backoff instead of ending the agent. problems receives what went
// wrong, bad bodies included; the caller logs them.
func Watch(ctx context.Context, dial Dialer, out chan<- Status, problems func(error)) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 30 * time.Second}
	for ctx.Err() == nil {
		if err := watchOnce(ctx, dial, out, problems); err != nil && ctx.Err() == nil {
			problems(err)
			delay := backoff.Step()
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

func watchOnce(ctx context.Context, dial Dialer, out chan<- Status, problems func(error)) error {
	conn, err := dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	c := NewClient(conn)
	// Subscribe first and ask second, so a signal sent in between is not lost.
	sub, err := c.Subscribe(ctx)
	if err != nil {
		return err
	}
	if s, err := c.GetStatus(ctx); err != nil {
		problems(err)
	} else {
		select {
		case out <- s:
		case <-ctx.Done():
			return nil
		}
	}
	return sub.Run(ctx, out, problems)
}
