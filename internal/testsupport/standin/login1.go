package standin

import (
	"sync"

	"github.com/godbus/dbus/v5"

	"github.com/slipway-dev/slipway/internal/login1"
)

// Login1 owns org.freedesktop.login1 and records Reboot calls instead of rebooting.
type Login1 struct {
	mu       sync.Mutex
	calls    []bool
	failures int
	onReboot func(interactive bool)
}

// ServeLogin1 exports the stand-in on conn and takes the bus name. onReboot, if set, runs (in its own
// goroutine) after each successful Reboot call: that is where a simulated node "reboots".
func ServeLogin1(conn *dbus.Conn, onReboot func(interactive bool)) (*Login1, error) {
	l := &Login1{onReboot: onReboot}
	if err := conn.ExportMethodTable(map[string]interface{}{"Reboot": l.reboot}, login1.ObjectPath, login1.Interface); err != nil {
		return nil, err
	}
	if err := ownName(conn, login1.BusName); err != nil {
		return nil, err
	}
	return l, nil
}

// FailNext makes the next n Reboot calls fail with org.freedesktop.DBus.Error.AccessDenied, as logind
// does when an inhibitor or polkit refuses.
func (l *Login1) FailNext(n int) {
	l.mu.Lock()
	l.failures = n
	l.mu.Unlock()
}

// Calls returns the interactive argument of every Reboot call so far, failed ones included.
func (l *Login1) Calls() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.calls...)
}

func (l *Login1) reboot(interactive bool) *dbus.Error {
	l.mu.Lock()
	l.calls = append(l.calls, interactive)
	fail := l.failures > 0
	if fail {
		l.failures--
	}
	l.mu.Unlock()
	if fail {
		return dbus.NewError("org.freedesktop.DBus.Error.AccessDenied", []interface{}{"stand-in: reboot refused"})
	}
	if l.onReboot != nil {
		go l.onReboot(interactive)
	}
	return nil
}
