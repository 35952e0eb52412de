// Package updateengine speaks Flatcar's update_engine D-Bus interface: its status vocabulary, reading
// GetStatus, listening for StatusUpdate, and emitting the signal exactly as `locksmithctl
// send-need-reboot` does. It holds no Kubernetes code.
package updateengine

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// The bus coordinates of update_engine on Flatcar.
const (
	BusName    = "com.coreos.update1"
	ObjectPath = dbus.ObjectPath("/com/coreos/update1")
	Interface  = "com.coreos.update1.Manager"

	MethodGetStatus     = Interface + ".GetStatus"
	MethodAttemptUpdate = Interface + ".AttemptUpdate"
	MethodResetStatus   = Interface + ".ResetStatus"
	SignalStatusUpdate  = "StatusUpdate"
	// Signature of GetStatus's reply and of StatusUpdate: last_checked_time, progress,
	// current_operation, new_version, new_size.
	Signature = "xdssx"
)

// update_engine's current_operation values.
const (
	StatusIdle              = "UPDATE_STATUS_IDLE"
	StatusCheckingForUpdate = "UPDATE_STATUS_CHECKING_FOR_UPDATE"
	StatusUpdateAvailable   = "UPDATE_STATUS_UPDATE_AVAILABLE"
	StatusDownloading       = "UPDATE_STATUS_DOWNLOADING"
	StatusVerifying         = "UPDATE_STATUS_VERIFYING"
	StatusFinalizing        = "UPDATE_STATUS_FINALIZING"
	StatusUpdatedNeedReboot = "UPDATE_STATUS_UPDATED_NEED_REBOOT"
	StatusReportingError    = "UPDATE_STATUS_REPORTING_ERROR_EVENT"
)

// Status is one GetStatus reply or StatusUpdate signal.
type Status struct {
	LastCheckedTime  int64
	Progress         float64
	CurrentOperation string
	NewVersion       string
	NewSize          int64

	// Cut says what ParseBody changed in NewVersion to fit a Node annotation, "" when nothing. It is
	// not part of the D-Bus body; the watcher reports it, and a shortened NewVersion ends in CutMark.
	Cut string
}

// NeedsReboot reports whether update_engine has staged an update that a reboot activates.
func (s Status) NeedsReboot() bool { return s.CurrentOperation == StatusUpdatedNeedReboot }

// Body is the D-Bus body of s, in the order and types of Signature.
func (s Status) Body() []interface{} {
	return []interface{}{s.LastCheckedTime, s.Progress, s.CurrentOperation, s.NewVersion, s.NewSize}
}

// ParseBody reads a GetStatus reply or a StatusUpdate body, and is the one place their strings are
// bounded before they can reach a Node. A body of any other shape, or whose current_operation is not a
// status word of at most MaxOperationLen bytes of [A-Z0-9_], is an error: the agent logs it and changes
// nothing, because a confused sender must never make a node reboot. A new_version that is too long
// (over MaxVersionLen bytes), not UTF-8 or not printable is kept but mended (see fitVersion), and the
// returned Status says so in Cut.
func ParseBody(body []interface{}) (Status, error) {
	if len(body) != 5 {
		return Status{}, fmt.Errorf("body has %d fields, want 5 (signature %s)", len(body), Signature)
	}
	var s Status
	var ok [5]bool
	s.LastCheckedTime, ok[0] = body[0].(int64)
	s.Progress, ok[1] = body[1].(float64)
	s.CurrentOperation, ok[2] = body[2].(string)
	s.NewVersion, ok[3] = body[3].(string)
	s.NewSize, ok[4] = body[4].(int64)
	for i, good := range ok {
		if !good {
			return Status{}, fmt.Errorf("field %d is %T, want signature %s", i, body[i], Signature)
		}
	}
	if err := checkOperation(s.CurrentOperation); err != nil {
		return Status{}, err
	}
	s.NewVersion, s.Cut = fitVersion(s.NewVersion)
	return s, nil
}
