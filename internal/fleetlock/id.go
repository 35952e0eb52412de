// Package fleetlock serves the FleetLock protocol Fedora CoreOS's Zincati speaks before and after it
// reboots a node (POST /v1/pre-reboot, /v1/steady-state), so those nodes go through the same cycle
// and budget as nodes with Slipway's agent: the server does for them what the agent does — asks for a
// reboot and, after it, resets the flags — and the operator does the rest (budget, hooks, drain,
// verification, uncordon).
package fleetlock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// zincatiAppID is the systemd application ID Zincati derives its node identity from.
var zincatiAppID = mustHex("de35106b6ec24688b63afddaa156679b")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// NodeID is the id Zincati sends for a machine: systemd's app-specific ID of /etc/machine-id
// (sd_id128_get_machine_app_specific: HMAC-SHA256 keyed by the machine ID over the app ID, the first
// 16 bytes, marked as a version 4 UUID), as 32 lower-case hex digits. The kubelet reports the
// machine ID as status.nodeInfo.machineID, which is how a request finds its Node.
func NodeID(machineID string) (string, error) {
	m, err := hex.DecodeString(normalize(machineID))
	if err != nil || len(m) != 16 {
		return "", fmt.Errorf("machine ID %q is not 128 bits of hex", machineID)
	}
	mac := hmac.New(sha256.New, m)
	mac.Write(zincatiAppID)
	id := mac.Sum(nil)[:16]
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return hex.EncodeToString(id), nil
}

// normalize accepts UUID or plain hex spellings of an ID.
func normalize(id string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(id), "-", ""))
}
