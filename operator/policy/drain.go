package policy

import (
	"fmt"
	"time"
)

// DrainPolicy says what happens when a drain fails or times out.
type DrainPolicy string

const (
	// DrainRetry keeps the node cordoned, records the error and retries with backoff. No reboot-ok.
	DrainRetry DrainPolicy = "retry"
	// DrainSkip ends the cycle of a node whose drain failed (uncordoned if Slipway cordoned it) and
	// lets the next node go; the node is retried after every other waiting node, at most once per
	// --undrainable-retry.
	DrainSkip DrainPolicy = "skip"
	// DrainForce grants reboot-ok anyway after a failed drain (FLUO's behaviour, which Slipway does
	// not default to: pods protected by a PDB would go down with the node).
	DrainForce DrainPolicy = "force"
)

// ParseDrainPolicy reads --drain-failure-policy.
func ParseDrainPolicy(s string) (DrainPolicy, error) {
	switch p := DrainPolicy(s); p {
	case DrainRetry, DrainForce, DrainSkip:
		return p, nil
	}
	return "", fmt.Errorf("drain failure policy %q: want %q, %q or %q", s, DrainRetry, DrainForce, DrainSkip)
}

// DrainConfig configures how nodes are drained.
type DrainConfig struct {
	// Timeout bounds one drain attempt (eviction retries on PDB refusals included); 0 means none.
	Timeout time.Duration
	// GracePeriod overrides each pod's termination grace period; negative uses the pod's own.
	GracePeriod time.Duration
	// Force also evicts pods no controller manages (they will not come back).
	Force bool
	// Policy decides what a failed attempt leads to.
	Policy DrainPolicy
	// RetryBase and RetryMax bound the backoff between failed attempts.
	RetryBase, RetryMax time.Duration
	// SkipWaitForDelete: on a NotReady node, a pod deleted (evicted) longer ago than this is taken as
	// gone (kubectl drain's --skip-wait-for-delete-timeout). A NotReady node's kubelet cannot finish
	// its pods, so they stay Terminating for ever and the drain could never end. Ready nodes always
	// wait. 0: DefaultSkipWaitForDelete.
	SkipWaitForDelete time.Duration
	// SkipWaitForDeleteAll is kured's --skip-wait-for-delete-timeout: on every node, Ready or not, a
	// pod deleted longer ago than this is taken as gone (a Ready node's pod stuck Terminating on a
	// finalizer would otherwise time every attempt out). 0: Ready nodes always wait. On a NotReady
	// node the shorter of the two applies.
	SkipWaitForDeleteAll time.Duration
	// UndrainableRetry: under DrainSkip, how long a skipped node waits before it is admitted again
	// (DefaultUndrainableRetry when 0).
	UndrainableRetry time.Duration
	// WaitForVolumeDetach: after the drain, reboot-ok waits until no VolumeAttachment names the node
	// but those of volumes pods that stay on it use (pods PodSelector leaves, DaemonSet pods), at most
	// VolumeDetachTimeout (DefaultVolumeDetachTimeout when 0); then it counts as a failed drain.
	WaitForVolumeDetach bool
	VolumeDetachTimeout time.Duration
	// PodSelector is kured's --drain-pod-selector: only pods matching this label selector are evicted;
	// the others stay on the node through its reboot. "": every pod.
	PodSelector string
	// Delay is kured's --drain-delay: the first eviction waits this long after the drain started (the
	// node is cordoned at once: no new pod lands on it meanwhile). 0: none.
	Delay time.Duration
	// RebootDelay is kured's --reboot-delay: reboot-ok waits this long after the drain finished (the
	// node stays drained). 0: none.
	RebootDelay time.Duration
}

// DefaultUndrainableRetry is DrainConfig.UndrainableRetry's default.
const DefaultUndrainableRetry = time.Hour

// DefaultSkipWaitForDelete is DrainConfig.SkipWaitForDelete's default.
const DefaultSkipWaitForDelete = time.Minute

// DefaultDrainRetryBase and DefaultDrainRetryMax are DrainConfig.RetryBase's and RetryMax's defaults.
const (
	DefaultDrainRetryBase = 10 * time.Second
	DefaultDrainRetryMax  = 5 * time.Minute
)

// DefaultVolumeDetachTimeout is DrainConfig.VolumeDetachTimeout's default.
const DefaultVolumeDetachTimeout = 10 * time.Minute

// SettleConfig says how long a node that finished its cycle keeps its budget slots, so that what
// its reboot disturbed (a quorum re-syncing, replicas rescheduled) recovers before the next node of
// its pools goes down.
type SettleConfig struct {
	// Time: at least this long after the node finished (--settle-time); 0 none.
	Time time.Duration
	// PDBs: until every PodDisruptionBudget its pods fell under when its drain began allows a
	// disruption again, if it allowed any then (--settle-pdbs). Not "as many as then": another lasting
	// disruption (a node down for repair, a crash-looping replica) takes headroom this node's drain
	// never gave back, and would hold every settle to --settle-timeout (docs/concepts.md).
	PDBs bool
	// Timeout bounds the wait for PDBs (--settle-timeout, DefaultSettleTimeout); then a Warning and,
	// with Hold, the slots stay held until they recover (--settle-timeout-policy=hold), else the
	// roll-out proceeds.
	Timeout time.Duration
	Hold    bool
}

// DefaultSettleTimeout is SettleConfig.Timeout's default.
const DefaultSettleTimeout = 15 * time.Minute
