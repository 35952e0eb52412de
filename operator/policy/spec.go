// Package policy is the reboot policy as one value: Spec is what a person writes (the update-operator's
// flags bind straight into one; the operator publishes the Spec it runs), Compile turns it into the
// Policy the operator runs, with the flags' own parsers and the flags' own error messages. A Policy is
// never changed once compiled: the admission chain, the drain and the status view read it as it is.
//
// What is fleet-wide rather than per pool (--max-unavailable, the control-plane budget, the group label,
// Prometheus alerts, the failure budget, per-version halts) lives in the same Spec: the flags are the
// fleet's policy and every pool's defaults.
package policy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Spec is a reboot policy in the flags' syntax: every string is what the flag of the same name takes.
// The zero value is not the flags' defaults: the flags are (the update-operator binds them into a Spec).
type Spec struct {
	// MaxUnavailable is --max-unavailable: a count or a percentage of all nodes.
	MaxUnavailable string `json:"maxUnavailable"`
	// MaxUnavailablePerGroup is --max-unavailable-per-group ("" none).
	MaxUnavailablePerGroup string `json:"maxUnavailablePerGroup,omitempty"`
	// MaxUnavailableControlPlane is --max-unavailable-control-plane.
	MaxUnavailableControlPlane string `json:"maxUnavailableControlPlane"`
	// GroupLabel is --group-label ("" one group).
	GroupLabel string `json:"groupLabel,omitempty"`
	// ControlPlaneOrder is --control-plane-order.
	ControlPlaneOrder string `json:"controlPlaneOrder"`

	// Windows and Exclusions are --reboot-window and --reboot-exclusion, one entry per flag.
	Windows    []string   `json:"windows,omitempty"`
	Exclusions []string   `json:"exclusions,omitempty"`
	FLUOWindow FLUOWindow `json:"fluoWindow,omitzero"`

	// Hooks are --before-reboot-annotations and --after-reboot-annotations.
	Hooks Hooks `json:"hooks,omitzero"`

	Canary   Canary   `json:"canary,omitzero"`
	Versions Versions `json:"versions,omitzero"`
	Update   Update   `json:"update,omitzero"`
	// ProofSource: where another cluster's proof is read (Versions.RequireProof).
	ProofSource ProofSource `json:"proofSource,omitzero"`
	Settle      Settle      `json:"settle"`

	// HealthChecks are --health-check, one entry per flag.
	HealthChecks []string `json:"healthChecks,omitempty"`
	// BlockingPodSelectors and BlockingPodSelectorsInCluster are --blocking-pod-selector and
	// --blocking-pod-selector-in-cluster: one whole label selector per entry.
	BlockingPodSelectors          []string `json:"blockingPodSelectors,omitempty"`
	BlockingPodSelectorsInCluster []string `json:"blockingPodSelectorsInCluster,omitempty"`
	// MinReadyNodes is --min-ready-nodes ("" off).
	MinReadyNodes string `json:"minReadyNodes,omitempty"`
	Alerts        Alerts `json:"alerts,omitzero"`

	Drain    Drain    `json:"drain"`
	Steering Steering `json:"steering,omitzero"`

	// RebootTimeout is --reboot-timeout (0 never), StallPolicy --stall-policy, MaxFailedReboots
	// --max-failed-reboots (0 never).
	RebootTimeout    metav1.Duration `json:"rebootTimeout"`
	StallPolicy      string          `json:"stallPolicy"`
	MaxFailedReboots int             `json:"maxFailedReboots,omitempty"`
}

// FLUOWindow is FLUO's one window: --reboot-window-start, --reboot-window-length and
// --reboot-window-timezone.
type FLUOWindow struct {
	Start    string `json:"start,omitempty"`
	Length   string `json:"length,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
}

// Hooks are the annotations that must be "true" around the reboot.
type Hooks struct {
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// Canary is --canary-nodes, --canary-bake and --max-failed-per-version.
type Canary struct {
	Nodes               int             `json:"nodes,omitempty"`
	Bake                metav1.Duration `json:"bake,omitzero"`
	MaxFailedPerVersion int             `json:"maxFailedPerVersion,omitempty"`
}

// Versions is --allow-version, --deny-version and --version-min-age: which OS versions a node may
// reboot into (package versions).
type Versions struct {
	Allow  []string        `json:"allow,omitempty"`
	Deny   []string        `json:"deny,omitempty"`
	MinAge metav1.Duration `json:"minAge,omitzero"`
	// RequireProof is --require-proof-selector, --require-proof-min-cycles and --require-proof-soak.
	RequireProof RequireProof `json:"requireProof,omitzero"`
}

// RequireProof: a node reboots into a version only once another cluster proved it (its
// slipway_version_* series under Selector, read from ProofSource): MinCycles cycles finished there,
// proven there at least Soak ago, not halted there. Selector "" is off.
type RequireProof struct {
	Selector  string          `json:"selector,omitempty"`
	MinCycles int             `json:"minCycles,omitempty"`
	Soak      metav1.Duration `json:"soak,omitzero"`
}

// ProofSource is --proof-url, --proof-bearer-token-file and --proof-ca-file: the query endpoint other
// clusters' proof is read from. The fleet's own: a RebootPolicy cannot set it (it would send the
// operator's token where its author likes).
type ProofSource struct {
	URL             string `json:"url,omitempty"`
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	CAFile          string `json:"caFile,omitempty"`
}

// Update is --update-group, --update-server and --allow-http-update-server: the update channel and
// server a pool's agents write into update.conf ("" leaves that key as each node has it). AllowHTTP is
// the fleet's: a RebootPolicy cannot set it.
type Update struct {
	Group     string `json:"group,omitempty"`
	Server    string `json:"server,omitempty"`
	AllowHTTP bool   `json:"allowHTTP,omitempty"`
	// AllowServers is --update-server-allow: when set, a server must begin with one of these (the
	// fleet's; a RebootPolicy cannot set it).
	AllowServers []string `json:"allowServers,omitempty"`
}

// Settle is --settle-time, --settle-pdbs, --settle-timeout and --settle-timeout-policy.
type Settle struct {
	Time          metav1.Duration `json:"time,omitzero"`
	PDBs          bool            `json:"pdbs"`
	Timeout       metav1.Duration `json:"timeout"`
	TimeoutPolicy string          `json:"timeoutPolicy"`
}

// Alerts is --prometheus-url and the flags that say which alerts block.
type Alerts struct {
	// PrometheusURL is --prometheus-url ("" off). Published without its secrets (redact.URL).
	PrometheusURL string   `json:"prometheusURL,omitempty"`
	Include       string   `json:"include,omitempty"`
	Exclude       string   `json:"exclude,omitempty"`
	FiringOnly    bool     `json:"firingOnly,omitempty"`
	Require       []string `json:"require,omitempty"`
	AcceptEmpty   bool     `json:"acceptEmpty,omitempty"`
}

// Drain is the --drain-* flags and those that say what a drain waits for.
type Drain struct {
	Timeout metav1.Duration `json:"timeout"`
	// GracePeriod: negative uses each pod's own.
	GracePeriod          metav1.Duration `json:"gracePeriod"`
	Force                bool            `json:"force,omitempty"`
	FailurePolicy        string          `json:"failurePolicy"`
	UndrainableRetry     metav1.Duration `json:"undrainableRetry"`
	RetryBase            metav1.Duration `json:"retryBase"`
	RetryMax             metav1.Duration `json:"retryMax"`
	SkipWaitForDelete    metav1.Duration `json:"skipWaitForDelete"`
	SkipWaitForDeleteAll metav1.Duration `json:"skipWaitForDeleteAll,omitzero"`
	PodSelector          string          `json:"podSelector,omitempty"`
	WaitForVolumeDetach  bool            `json:"waitForVolumeDetach"`
	VolumeDetachTimeout  metav1.Duration `json:"volumeDetachTimeout"`
	// Delay and RebootDelay are kured's --drain-delay and --reboot-delay (0: none).
	Delay       metav1.Duration `json:"delay,omitzero"`
	RebootDelay metav1.Duration `json:"rebootDelay,omitzero"`
}

// Steering is --prefer-no-schedule-taint, --exclude-from-load-balancers and kured's node labels.
type Steering struct {
	PreferNoScheduleTaint    string   `json:"preferNoScheduleTaint,omitempty"`
	ExcludeFromLoadBalancers bool     `json:"excludeFromLoadBalancers,omitempty"`
	PreLabels                []string `json:"preLabels,omitempty"`
	PostLabels               []string `json:"postLabels,omitempty"`
}

// Defaults is the policy of an update-operator started without policy flags: the flags' defaults
// (TestFlagDefaultsAreThePolicyDefaults holds them to each other).
func Defaults() Spec {
	d := func(t time.Duration) metav1.Duration { return metav1.Duration{Duration: t} }
	return Spec{
		MaxUnavailable:             "1",
		MaxUnavailableControlPlane: "1",
		ControlPlaneOrder:          "none",
		FLUOWindow:                 FLUOWindow{TimeZone: "UTC"},
		Settle:                     Settle{PDBs: true, Timeout: d(DefaultSettleTimeout), TimeoutPolicy: "proceed"},
		Alerts:                     Alerts{FiringOnly: true},
		Versions:                   Versions{RequireProof: RequireProof{MinCycles: 1}},
		Drain: Drain{Timeout: d(10 * time.Minute), GracePeriod: d(-time.Second), FailurePolicy: string(DrainRetry),
			UndrainableRetry: d(DefaultUndrainableRetry), RetryBase: d(DefaultDrainRetryBase), RetryMax: d(DefaultDrainRetryMax),
			SkipWaitForDelete: d(DefaultSkipWaitForDelete), WaitForVolumeDetach: true, VolumeDetachTimeout: d(DefaultVolumeDetachTimeout)},
		RebootTimeout: d(30 * time.Minute),
		StallPolicy:   "hold",
	}
}
