package updateengine

import (
	"context"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/sysbus"
)

// Watch delivers update_engine's status to out until ctx ends: on every (re)connect first whatever
// GetStatus says, then every StatusUpdate signal, all through ParseBody's bounds. Signals wait in a
// bounded queue: when the consumer falls behind, more are dropped (never piled up in goroutines) and
// GetStatus is asked again. A lost bus connection (dbus restarted, update_engine not up yet) is
// retried with capped backoff instead of ending the agent. problems receives what went wrong (bad
// bodies, mended new_versions, dropped signals included); the caller logs them.
func Watch(ctx context.Context, dial sysbus.Dialer, out chan<- Status, problems func(error)) {
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

func watchOnce(ctx context.Context, dial sysbus.Dialer, out chan<- Status, problems func(error)) error {
	q := newSignalQueue(signalQueueLen)
	conn, err := dial(dbus.WithSignalHandler(q))
	if err != nil {
		return err
	}
	defer conn.Close()
	// Subscribe first and ask second, so a signal sent in between is not lost.
	sub, err := NewClient(conn).subscribe(ctx, q)
	if err != nil {
		return err
	}
	if err := sub.getStatus(ctx, out, problems); err != nil {
		return err
	}
	return sub.run(ctx, out, problems)
}
