// Package login1 reboots a machine through systemd-logind's D-Bus API, the way Flatcar's own tools do,
// and checks the answer: go-systemd's login1.Reboot drops the call's error, so a refused reboot would
// go unnoticed there.
package login1

import (
	"context"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// The bus coordinates of systemd-logind.
const (
	BusName      = "org.freedesktop.login1"
	ObjectPath   = dbus.ObjectPath("/org/freedesktop/login1")
	Interface    = "org.freedesktop.login1.Manager"
	MethodReboot = Interface + ".Reboot"
)

// Rebooter asks logind to reboot over conn.
type Rebooter struct {
	conn *dbus.Conn
}

// NewRebooter uses conn, which the caller owns.
func NewRebooter(conn *dbus.Conn) *Rebooter { return &Rebooter{conn: conn} }

// Reboot calls Reboot(interactive=false): no polkit prompt, the agent is root on the node.
func (r *Rebooter) Reboot(ctx context.Context) error {
	call := r.conn.Object(BusName, ObjectPath).CallWithContext(ctx, MethodReboot, 0, false)
	if call.Err != nil {
		return fmt.Errorf("calling %s(false): %w", MethodReboot, call.Err)
	}
	return nil
}
