// Package sysbus opens connections to the system D-Bus, which the agent shares between
// update_engine (package updateengine) and logind (package login1).
package sysbus

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// Dialer opens a new bus connection with opts applied (updateengine.Watch passes its own signal
// handler). Connect is one; tests dial their own dbus-daemon.
type Dialer func(opts ...dbus.ConnOption) (*dbus.Conn, error)

// Connect opens a private connection to the system bus. godbus honours DBUS_SYSTEM_BUS_ADDRESS, which
// is how tests and containers point it at their bus. It is a Dialer.
func Connect(opts ...dbus.ConnOption) (*dbus.Conn, error) {
	conn, err := dbus.SystemBusPrivate(opts...)
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
