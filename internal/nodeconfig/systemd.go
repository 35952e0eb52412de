package nodeconfig

import (
	"context"
	"fmt"
	"path"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// SystemdBus is the node's systemd, reached over the system bus (or systemd's private socket when the
// bus is down and we are root). The changes are persistent (not --runtime), as Ignition's are.
type SystemdBus struct {
	conn *sd.Conn
}

// NewSystemd connects to the node's systemd.
func NewSystemd(ctx context.Context) (*SystemdBus, error) {
	c, err := sd.NewWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd over D-Bus (is /run/dbus/system_bus_socket there, and are you root?): %w", err)
	}
	return &SystemdBus{conn: c}, nil
}

// Close drops the connection.
func (s *SystemdBus) Close() { s.conn.Close() }

// UnitState asks for the unit file state from disk (ListUnitFilesByPatterns, what `systemctl
// is-enabled` reads): a loaded unit's UnitFileState property is cached until the next daemon-reload,
// so right after a mask it still says "enabled" (seen on the e2e VM).
func (s *SystemdBus) UnitState(ctx context.Context, name string) (UnitState, error) {
	var st UnitState
	files, err := s.conn.ListUnitFilesByPatternsContext(ctx, nil, []string{name})
	if err != nil {
		return st, err
	}
	for _, f := range files {
		if path.Base(f.Path) == name {
			st.File = f.Type
		}
	}
	active, err := s.conn.GetUnitPropertyContext(ctx, name, "ActiveState")
	if err != nil {
		return st, err
	}
	st.Active, _ = active.Value.Value().(string)
	return st, nil
}

func (s *SystemdBus) Reload(ctx context.Context) error { return s.conn.ReloadContext(ctx) }

func (s *SystemdBus) Mask(ctx context.Context, name string) error {
	_, err := s.conn.MaskUnitFilesContext(ctx, []string{name}, false, true)
	return err
}

func (s *SystemdBus) Unmask(ctx context.Context, name string) error {
	_, err := s.conn.UnmaskUnitFilesContext(ctx, []string{name}, false)
	return err
}

func (s *SystemdBus) Enable(ctx context.Context, name string) error {
	_, _, err := s.conn.EnableUnitFilesContext(ctx, []string{name}, false, false)
	return err
}

func (s *SystemdBus) Disable(ctx context.Context, name string) error {
	_, err := s.conn.DisableUnitFilesContext(ctx, []string{name}, false)
	return err
}

func (s *SystemdBus) Start(ctx context.Context, name string) error {
	return s.job(ctx, "start", name, s.conn.StartUnitContext)
}

func (s *SystemdBus) Stop(ctx context.Context, name string) error {
	return s.job(ctx, "stop", name, s.conn.StopUnitContext)
}

// job waits for systemd's job to finish: "done" is success, anything else ("failed", "timeout",
// "dependency", ...) is reported with the unit's name so the user knows where to look.
func (s *SystemdBus) job(ctx context.Context, verb, name string, call func(context.Context, string, string, chan<- string) (int, error)) error {
	ch := make(chan string, 1)
	if _, err := call(ctx, name, "replace", ch); err != nil {
		return err
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("%s %s: job %s (see journalctl -u %s)", verb, name, res, name)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
