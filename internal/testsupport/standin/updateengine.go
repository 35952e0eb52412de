// Package standin provides stand-ins for the two system services the agent talks to on a Flatcar node,
// served on a real D-Bus: update_engine (com.coreos.update1) and systemd-logind's Reboot. Tests, the
// demo and the e2e VM image use them where the real services are absent; they speak the same bus
// names, paths, methods and signal signatures, so the agent cannot tell the difference.
package standin

import (
	"fmt"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// UpdateEngine owns com.coreos.update1 and behaves like Flatcar's update-engine.service on the bus.
type UpdateEngine struct {
	conn *dbus.Conn
	// StepDelay is the pause between the status steps AttemptUpdate walks through.
	StepDelay time.Duration
	// NewVersion is what an update brings.
	NewVersion string
	// OnNeedReboot, if set, runs when AttemptUpdate has staged version (before the signal).
	OnNeedReboot func(version string)
	mu           sync.Mutex
	status       updateengine.Status
	checks       []updateconf.Settings
	// confRoot, when set, is the host root whose update.conf (the image's, then /etc/flatcar's) an
	// AttemptUpdate over D-Bus reads before it checks, as update_engine does at every check; offers then
	// says which version the update server offers the GROUP it read ("" or absent: NewVersion).
	confRoot string
	offers   map[string]string
}

// ReadUpdateConf makes every AttemptUpdate over D-Bus read update.conf under root first and stage
// what offers names for the group it read (other groups: NewVersion).
func (u *UpdateEngine) ReadUpdateConf(root string, offers map[string]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.confRoot, u.offers = root, offers
}

// UpdateConf is what ReadUpdateConf set.
func (u *UpdateEngine) UpdateConf() (root string, offers map[string]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.confRoot, u.offers
}

// ServeUpdateEngine exports the stand-in on conn and takes the bus name. It starts idle, with
// new_version "0.0.0" as update_engine does.
func ServeUpdateEngine(conn *dbus.Conn, newVersion string) (*UpdateEngine, error) {
	u := &UpdateEngine{conn: conn, NewVersion: newVersion, StepDelay: 10 * time.Millisecond}
	u.status = updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0"}
	if err := conn.ExportMethodTable(map[string]interface{}{
		"GetStatus":     u.getStatus,
		"AttemptUpdate": u.attemptUpdate,
		"ResetStatus":   u.resetStatus,
	}, updateengine.ObjectPath, updateengine.Interface); err != nil {
		return nil, fmt.Errorf("exporting update_engine stand-in: %w", err)
	}
	if err := ownName(conn, updateengine.BusName); err != nil {
		return nil, err
	}
	return u, nil
}

func ownName(conn *dbus.Conn, name string) error {
	reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil {
		return fmt.Errorf("requesting bus name %s: %w", name, err)
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		return fmt.Errorf("bus name %s is already owned (reply %d)", name, reply)
	}
	return nil
}

func (u *UpdateEngine) getStatus() (int64, float64, string, string, int64, *dbus.Error) {
	s := u.Status()
	return s.LastCheckedTime, s.Progress, s.CurrentOperation, s.NewVersion, s.NewSize, nil
}

// attemptUpdate is AttemptUpdate over D-Bus, with update_engine's rules: while an update waits for its
// reboot it is ignored (no second download before the reboot); otherwise the check reads update.conf
// (when ConfRoot is set) and stages what the server offers its group.
func (u *UpdateEngine) attemptUpdate() *dbus.Error {
	if u.Status().NeedsReboot() {
		return nil
	}
	version := u.NewVersion
	if root, offers := u.UpdateConf(); root != "" {
		set := updateconf.Effective(root)
		u.mu.Lock()
		u.checks = append(u.checks, set)
		u.mu.Unlock()
		if v := offers[set.Group]; v != "" {
			version = v
		}
	}
	go u.walk(version)
	return nil
}

// Checks returns what update.conf said at each AttemptUpdate over D-Bus (ReadUpdateConf).
func (u *UpdateEngine) Checks() []updateconf.Settings {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]updateconf.Settings(nil), u.checks...)
}

func (u *UpdateEngine) resetStatus() *dbus.Error {
	u.Set(updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0", LastCheckedTime: time.Now().Unix()})
	return nil
}

// Status is the current status.
func (u *UpdateEngine) Status() updateengine.Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status
}

// Set changes the status and emits StatusUpdate from com.coreos.update1, as update_engine does.
func (u *UpdateEngine) Set(s updateengine.Status) error {
	u.mu.Lock()
	u.status = s
	u.mu.Unlock()
	return u.conn.Emit(updateengine.ObjectPath, updateengine.Interface+"."+updateengine.SignalStatusUpdate, s.Body()...)
}

// AttemptUpdate walks the status through a whole successful update, emitting each step, and ends in
// UPDATE_STATUS_UPDATED_NEED_REBOOT.
func (u *UpdateEngine) AttemptUpdate() { u.walk(u.NewVersion) }

// walk steps through an update that stages version.
func (u *UpdateEngine) walk(version string) {
	now := time.Now().Unix()
	size := int64(300 << 20)
	steps := []updateengine.Status{
		{LastCheckedTime: now, CurrentOperation: updateengine.StatusCheckingForUpdate, NewVersion: "0.0.0"},
		{LastCheckedTime: now, CurrentOperation: updateengine.StatusUpdateAvailable, NewVersion: version, NewSize: size},
		{LastCheckedTime: now, Progress: 0.5, CurrentOperation: updateengine.StatusDownloading, NewVersion: version, NewSize: size},
		{LastCheckedTime: now, Progress: 1, CurrentOperation: updateengine.StatusVerifying, NewVersion: version, NewSize: size},
		{LastCheckedTime: now, Progress: 1, CurrentOperation: updateengine.StatusFinalizing, NewVersion: version, NewSize: size},
		{LastCheckedTime: now, Progress: 1, CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: version, NewSize: size},
	}
	for i, s := range steps {
		if i > 0 {
			time.Sleep(u.StepDelay)
		}
		if s.NeedsReboot() && u.OnNeedReboot != nil {
			u.OnNeedReboot(version)
		}
		_ = u.Set(s)
	}
}
