// Package fleetswitch is the one switch that stops the whole fleet (or one group of it) from starting new
// reboot cycles, and what the operator publishes about itself for people and the status plugin.
//
// It lives in one ConfigMap, slipway-fleet, in the operator's namespace, rather than in a CRD: nothing
// to install or upgrade before the switch works, RBAC can name the object (resourceNames), every
// kubectl can flip it, and the FleetLock server and the operator already watch their namespace.
//
//	kubectl -n slipway-system patch configmap slipway-fleet --type merge -p '{"data":{"paused":"incident 42"}}'
//	kubectl slipway pause --reason "incident 42"           # the same, with who and when
//	kubectl slipway pause --group zone-b --reason "AZ maintenance"
//
// Pausing stops admissions only: nodes already in their cycle finish it.
package fleetswitch

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ConfigMapName is the switch's ConfigMap, in the operator's namespace.
const ConfigMapName = "slipway-fleet"

// Data keys of the ConfigMap.
const (
	// KeyPaused: present (any value, even empty) pauses the whole fleet; the value is the reason.
	KeyPaused = "paused"
	// GroupPausePrefix + <group>: present pauses that group (see the operator's --group-label); the
	// value is the reason.
	GroupPausePrefix = "paused-group."
	// KeyPausedBy and KeyPausedAt say who paused and when (RFC 3339), for the fleet switch.
	KeyPausedBy = "paused-by"
	KeyPausedAt = "paused-at"
	// KeyStatus is what the leading operator publishes (Status, JSON), written only when it changes.
	KeyStatus = "status"
	// KeyPolicies is the policies the leading operator runs (package policy's Published, JSON),
	// written with the status when it changes.
	KeyPolicies = "policies"
	// KeyFailuresPaused: the operator's own pause, set when --max-failed-reboots is spent (the value
	// is why). A person's pause and resume never touch it; only `kubectl slipway resume --failures`
	// removes it, after it recorded a resume in the fleet record (fleetrecord), which starts a new count.
	KeyFailuresPaused = "failures-paused"
	// KeyFailuresResetAt and VersionResumedPrefix + <OS version>: where resumes were kept before the
	// fleet record. Read once, by the first operator that creates the record, and never written.
	KeyFailuresResetAt   = "failures-reset-at"
	VersionResumedPrefix = "version-resumed."
)

// Switch is the state of the pause switches.
type Switch struct {
	Paused bool   // the whole fleet
	Reason string // why (the fleet switch)
	By     string
	At     time.Time
	Groups map[string]string // paused groups and why
	// FailuresPaused: the operator paused the fleet because --max-failed-reboots was spent (KeyFailuresPaused).
	FailuresPaused bool
	FailuresReason string
	// FailuresResetAt and VersionsResumed: the resumes kept here before the fleet record (legacy,
	// taken over once into the record).
	FailuresResetAt time.Time
	VersionsResumed map[string]time.Time
}

// Read reads the switches from the ConfigMap; a missing ConfigMap (nil) means nothing is paused.
func Read(cm *corev1.ConfigMap) Switch {
	var s Switch
	if cm == nil {
		return s
	}
	s.Reason, s.Paused = cm.Data[KeyPaused]
	s.By = cm.Data[KeyPausedBy]
	s.At, _ = time.Parse(time.RFC3339, cm.Data[KeyPausedAt])
	s.FailuresReason, s.FailuresPaused = cm.Data[KeyFailuresPaused]
	s.FailuresResetAt, _ = time.Parse(time.RFC3339, cm.Data[KeyFailuresResetAt])
	for k, v := range cm.Data {
		if v, ok := strings.CutPrefix(k, VersionResumedPrefix); ok && v != "" {
			if t, err := time.Parse(time.RFC3339, cm.Data[k]); err == nil {
				if s.VersionsResumed == nil {
					s.VersionsResumed = map[string]time.Time{}
				}
				s.VersionsResumed[v] = t
			}
		}
		if g, ok := strings.CutPrefix(k, GroupPausePrefix); ok && g != "" {
			if s.Groups == nil {
				s.Groups = map[string]string{}
			}
			s.Groups[g] = v
		}
	}
	return s
}

// Holds reports whether the switch holds back a node of group, and why.
func (s Switch) Holds(group string) (bool, string) {
	if s.Paused {
		return true, "fleet paused: " + orUnsaid(s.Reason)
	}
	if s.FailuresPaused {
		return true, "fleet paused: " + orUnsaid(s.FailuresReason)
	}
	if r, ok := s.Groups[group]; ok {
		return true, "group " + group + " paused: " + orUnsaid(r)
	}
	return false, ""
}

// PausedGroups lists the paused groups, sorted.
func (s Switch) PausedGroups() []string {
	var out []string
	for g := range s.Groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func orUnsaid(r string) string {
	if r == "" {
		return "(no reason given)"
	}
	return r
}

// PausePatch is the JSON merge patch that pauses the fleet (group "") or one group.
func PausePatch(group, reason, by string, now time.Time) []byte {
	data := map[string]*string{}
	if group == "" {
		data[KeyPaused] = &reason
		data[KeyPausedBy] = &by
		at := now.UTC().Format(time.RFC3339)
		data[KeyPausedAt] = &at
	} else {
		data[GroupPausePrefix+group] = &reason
	}
	b, _ := json.Marshal(map[string]interface{}{"data": data})
	return b
}

// ResumePatch is the JSON merge patch that resumes the fleet (group "") or one group.
func ResumePatch(group string) []byte {
	data := map[string]*string{}
	if group == "" {
		data[KeyPaused], data[KeyPausedBy], data[KeyPausedAt] = nil, nil, nil
	} else {
		data[GroupPausePrefix+group] = nil
	}
	b, _ := json.Marshal(map[string]interface{}{"data": data})
	return b
}

// FailuresPausePatch is the JSON merge patch with which the operator pauses the fleet when its
// failure budget is spent.
func FailuresPausePatch(reason string) []byte {
	b, _ := json.Marshal(map[string]interface{}{"data": map[string]string{KeyFailuresPaused: reason}})
	return b
}

// ResumeFailuresPatch is the switch's half of `kubectl slipway resume --failures`: the failure pause
// goes. The new count starts at the resume the fleet record keeps (fleetrecord), written first.
func ResumeFailuresPatch() []byte {
	b, _ := json.Marshal(map[string]interface{}{"data": map[string]*string{KeyFailuresPaused: nil}})
	return b
}

func ptr(s string) *string { return &s }

// Status is what the leading operator publishes under KeyStatus about itself and the fleet now: who
// leads, its version, the fleet-wide blockers active now, the failed reboots of this roll-out and how
// long the last cycles took. The settings it runs are not here: they are the policies it publishes
// under KeyPolicies (package policy's Published), which the status plugin compiles. It changes rarely;
// the operator writes it only when it changes.
//
// An older operator's Status also carried a copy of its settings (maxUnavailable, windows,
// rebootTimeout, ...): ReadStatus ignores those fields (encoding/json skips unknown fields), so it
// still reads.
type Status struct {
	Leader string `json:"leader,omitempty"`
	// Version is the leading operator's own version (internal/version): the status view flags agents
	// of another version.
	Version string `json:"version,omitempty"`
	// Blockers active now that hold every node (alerts, too few Ready nodes, cluster-wide pods).
	Blockers []Blocker `json:"blockers,omitempty"`
	// FailedReboots: nodes that stalled or came back unhealthy in this roll-out (of the published
	// policy's --max-failed-reboots).
	FailedReboots []string `json:"failedReboots,omitempty"`
	// CycleSeconds: how long the last cycles that finished took (cycle-started to the verified
	// reboot), whole seconds, oldest first, at most MaxCycleSamples. A new leader goes on from the ones
	// published.
	CycleSeconds []int `json:"cycleSeconds,omitempty"`
}

// MaxCycleSamples is how many cycle durations Status.CycleSeconds keeps.
const MaxCycleSamples = 20

// Blocker is one active reason not to start cycles.
type Blocker struct {
	Name   string    `json:"name"`   // e.g. "alerts", "min-ready", "pods"
	Reason string    `json:"reason"` // human-readable detail
	Since  time.Time `json:"since"`
}

// ReadStatus decodes the published Status; ok is false when there is none (or it does not decode).
func ReadStatus(cm *corev1.ConfigMap) (s Status, ok bool) {
	if cm == nil || cm.Data[KeyStatus] == "" {
		return s, false
	}
	return s, json.Unmarshal([]byte(cm.Data[KeyStatus]), &s) == nil
}
