package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RebootPolicy gives the nodes its selector matches their own reboot policy: windows, budget,
// canaries, pause. A field left out takes the update-operator's flag of the same meaning (the flags
// are the default policy and every policy's defaults). A node belongs to the matching policy of the
// highest priority; two at the same highest priority hold the node (blocked-by policy). The policy is
// pinned when a node's cycle starts: relabelling the node or editing the policy never moves a node
// mid-cycle.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rp,categories=slipway
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.upToDate`
// +kubebuilder:printcolumn:name="In-cycle",type=integer,JSONPath=`.status.inCycle`
// +kubebuilder:printcolumn:name="Window",type=string,JSONPath=`.status.window`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RebootPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RebootPolicySpec `json:"spec"`
	// +optional
	Status RebootPolicyStatus `json:"status,omitempty"`
}

// RebootPolicySpec is one pool's policy. Windows, exclusions and durations take the syntax of the
// update-operator flag of the same meaning; what the schema cannot check (a window, a freeze) the
// operator does, and reports in the Accepted condition.
//
// +kubebuilder:validation:XValidation:rule="!has(self.pausedReason) || (has(self.paused) && self.paused)",message="pausedReason needs paused: true"
type RebootPolicySpec struct {
	// NodeSelector picks the nodes of this pool (a label selector, as a Deployment's). It must not be
	// empty: a policy for every node is the flags' job.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="nodeSelector must not be empty: the update-operator's flags are the policy of every node"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="matchExpressions: operator In, NotIn, Exists or DoesNotExist, with values for In and NotIn only"
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`
	// Priority decides between policies that match one node: the highest wins; two at the same
	// highest priority hold the node until one of them changes.
	// +optional
	// +kubebuilder:default=0
	Priority int32 `json:"priority,omitempty"`
	// Paused: no node of this pool starts a cycle (cycles in flight finish). PausedReason says why.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// PausedReason: why it is paused, shown on its held nodes (blocked-by) and by kubectl slipway.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	PausedReason string `json:"pausedReason,omitempty"`
	// MaxUnavailable: nodes of this pool that may be unavailable at once, a count or a percentage of
	// the pool (rounded down, at least 1). It nests inside the fleet's --max-unavailable and the budget
	// groups: a node counts against all of them. Unset: only those.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="a count of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Windows: when new cycles of this pool may start, each as --reboot-window takes it
	// ("Sat,Sun 02:00-06:00 Europe/Berlin", "last-Sun 01:00-05:00"). Unset: the flags' windows; an
	// empty list: always.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	Windows []string `json:"windows,omitempty"`
	// Exclusions: change freezes of this pool, each as --reboot-exclusion takes it. They add to the
	// flags' (a freeze there guards every node; a policy cannot lift it).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	Exclusions []string `json:"exclusions,omitempty"`
	// Canary: the first nodes of this pool to reboot for each OS version go alone and bake before the
	// others follow. Unset: the flags' --canary-nodes and --canary-bake.
	// +optional
	Canary *Canary `json:"canary,omitempty"`
	// Versions: which OS versions this pool's nodes may reboot into; a node that staged another is held
	// (blocked-by version) and takes no budget. Unset: the flags' (--allow-version, --deny-version,
	// --version-min-age).
	// +optional
	Versions *Versions `json:"versions,omitempty"`
	// Update: the update channel and server this pool's nodes follow, written by each node's agent
	// into /etc/flatcar/update.conf (where that file is Slipway's to edit) without a reboot. Unset
	// fields: the flags' --update-group and --update-server.
	// +optional
	Update *Update `json:"update,omitempty"`
	// HealthChecks: more gates for this pool's nodes, each as --health-check takes it
	// ('RESOURCE.GROUP/NAME[@NAMESPACE]: CEL'); no node of the pool starts a cycle unless every one holds.
	// They add to the flags' (which guard every node); the operator needs get on the objects.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=2048
	HealthChecks []string `json:"healthChecks,omitempty"`
	// BlockingPodSelectors: a node of this pool waits while an unfinished pod matching one of these
	// label selectors runs on it (kured's --blocking-pod-selector, one whole selector per entry). They
	// add to the flags'.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	BlockingPodSelectors []string `json:"blockingPodSelectors,omitempty"`
	// Settle: how long a node of this pool that finished its cycle keeps its budget slots. Unset
	// fields: the flags' --settle-time, --settle-pdbs and --settle-timeout.
	// +optional
	Settle *Settle `json:"settle,omitempty"`
	// Steering: what this pool's nodes carry around their cycle. Unset fields: the flags'
	// --prefer-no-schedule-taint, --exclude-from-load-balancers, --pre-reboot-node-labels and
	// --post-reboot-node-labels. The operator's admission policy must allow the taint and label keys
	// (Helm's operator.preferNoScheduleTaint and steering label values, or by hand with kustomize).
	// +optional
	Steering *Steering `json:"steering,omitempty"`
	// Drain: how this pool's nodes are drained. Unset fields: the flags' --drain-timeout,
	// --drain-grace-period, --drain-pod-selector and --drain-failure-policy.
	// +optional
	Drain *Drain `json:"drain,omitempty"`
}

// Settle is a pool's --settle-time, --settle-pdbs and --settle-timeout.
type Settle struct {
	// Time: the slots stay held at least this long after the node finished.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="a duration of 0 or more, e.g. 10m"
	Time *metav1.Duration `json:"time,omitempty"`
	// PDBs: and until the PodDisruptionBudgets its drain consumed allow a disruption again (needs the
	// update-operator's --settle-pdbs, which makes it watch them).
	// +optional
	PDBs *bool `json:"pdbs,omitempty"`
	// Timeout bounds the wait for the PDBs.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="a positive duration, e.g. 30m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// Steering is a pool's --prefer-no-schedule-taint, --exclude-from-load-balancers,
// --pre-reboot-node-labels and --post-reboot-node-labels.
type Steering struct {
	// PreferNoScheduleTaint: a taint key a waiting node carries as KEY:PreferNoSchedule ("" none).
	// +optional
	// +kubebuilder:validation:MaxLength=316
	PreferNoScheduleTaint *string `json:"preferNoScheduleTaint,omitempty"`
	// ExcludeFromLoadBalancers: label the node node.kubernetes.io/exclude-from-external-load-balancers
	// for its cycle.
	// +optional
	ExcludeFromLoadBalancers *bool `json:"excludeFromLoadBalancers,omitempty"`
	// PreLabels and PostLabels: KEY=VALUE or KEY- written when its cycle starts and ends.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=400
	PreLabels []string `json:"preLabels,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=400
	PostLabels []string `json:"postLabels,omitempty"`
}

// Drain is a pool's --drain-timeout, --drain-grace-period, --drain-pod-selector and
// --drain-failure-policy.
type Drain struct {
	// Timeout of one drain attempt (0: none).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="a duration of 0 or more, e.g. 10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// GracePeriod for evicted pods (negative: each pod's own).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(self)",message="a duration, e.g. 30s or -1s"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
	// PodSelector: only pods matching this label selector are evicted ("" every pod).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	PodSelector *string `json:"podSelector,omitempty"`
	// FailurePolicy after a failed drain: retry, skip or force.
	// +optional
	// +kubebuilder:validation:Enum=retry;skip;force
	FailurePolicy *string `json:"failurePolicy,omitempty"`
}

// Versions is a pool's --allow-version, --deny-version and --version-min-age. Each entry is an exact
// version (4459.2.1) or a range of comparators joined by spaces (">=4459.2.0 <4500.0.0"); the
// operator's parser checks them (Accepted=False when it refuses one).
type Versions struct {
	// Allow: the versions the pool's nodes may reboot into. Unset: the flags'; an empty list: any
	// version not denied.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Allow []string `json:"allow,omitempty"`
	// Deny: versions they may not reboot into; wins over allow. They add to the flags' (a version
	// denied there is denied in every pool).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Deny []string `json:"deny,omitempty"`
	// MinAge: a version may be rebooted into only this long after the fleet first saw it staged.
	// Unset: the flags' --version-min-age.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="a duration, e.g. 72h"
	MinAge *metav1.Duration `json:"minAge,omitempty"`
	// RequireProof: a node reboots into a version only once another cluster proved it, as read from
	// the update-operator's --proof-url. Unset fields: the flags' --require-proof-selector,
	// --require-proof-min-cycles and --require-proof-soak; selector "": none required.
	// +optional
	RequireProof *RequireProof `json:"requireProof,omitempty"`
}

// RequireProof names the cluster whose proof counts and what it must show.
type RequireProof struct {
	// Selector: PromQL label matchers naming that cluster's update-operator series, e.g.
	// cluster="staging" (the labels its Prometheus or Thanos adds). "": no proof required.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Selector *string `json:"selector,omitempty"`
	// MinCycles: cycles that must have finished on the version there.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MinCycles *int32 `json:"minCycles,omitempty"`
	// Soak: how long the version must have been proven there (its canaries finished, their bake
	// passed, no failure, no halt).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="a duration, e.g. 72h"
	Soak *metav1.Duration `json:"soak,omitempty"`
}

// Update is a pool's --update-group and --update-server.
type Update struct {
	// Group: update.conf's GROUP, the channel (stable, beta, alpha, lts) or an update server's group
	// name or id. "": leave GROUP as each node has it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^$|^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Group *string `json:"group,omitempty"`
	// Server: update.conf's SERVER, the Omaha endpoint, e.g. a Nebraska's https://HOST/v1/update/.
	// https only, unless the operator runs with --allow-http-update-server. "": leave SERVER as each
	// node has it.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^$|^https?://\S+$`
	Server *string `json:"server,omitempty"`
}

// Canary is a pool's --canary-nodes and --canary-bake.
//
// +kubebuilder:validation:XValidation:rule="!has(self.bake) || has(self.nodes) && self.nodes > 0",message="bake needs nodes"
type Canary struct {
	// Nodes: per OS version, how many of the pool's nodes go first (0: no canaries).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Nodes *int32 `json:"nodes,omitempty"`
	// Bake: how long after the canaries finished the others still wait for a failure to show.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="a positive duration, e.g. 30m or 1h30m"
	Bake *metav1.Duration `json:"bake,omitempty"`
}

// RebootPolicyStatus is the pool as the leading update-operator last saw it.
type RebootPolicyStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Nodes this policy governs now (matched, or pinned to it in their cycle).
	// +optional
	Nodes int32 `json:"nodes"`
	// UpToDate: nodes on the newest OS version any node of the pool runs or asks for.
	// +optional
	UpToDate int32 `json:"upToDate"`
	// Waiting: nodes asking for a reboot that have not started it; InCycle: in their reboot cycle;
	// Settling: finished, still holding their slots; Unavailable: counting against the budget.
	// +optional
	Waiting int32 `json:"waiting"`
	// +optional
	InCycle int32 `json:"inCycle"`
	// +optional
	Settling int32 `json:"settling"`
	// +optional
	Unavailable int32 `json:"unavailable"`
	// Window: "open", "closed" or "paused"; NextOpen: when a closed window opens.
	// +optional
	Window string `json:"window,omitempty"`
	// +optional
	NextOpen *metav1.Time `json:"nextOpen,omitempty"`
	// Versions: each OS version the pool's nodes ask for, with where its canaries stand.
	// +optional
	// +listType=map
	// +listMapKey=version
	Versions []VersionStatus `json:"versions,omitempty"`
	// Conditions: Accepted (the spec compiled), Paused, Overlapping (a node matches another policy of
	// the same priority), Progressing (nodes of the pool are in their cycle), Halted (an OS version the
	// pool asks for is halted), VersionsAllowed, and the kstatus ones GitOps engines wait on: Ready
	// (accepted, not stalled, every node on a version the pool allows), Reconciling (a roll-out under
	// way), Stalled (needs a person: a refused spec, a halt, a node back on a failed version or stalled).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VersionStatus is one OS version of the pool.
type VersionStatus struct {
	Version string `json:"version"`
	// Asking: nodes asking to reboot for it; Canary: released, baking, canaries, waiting, halted (or
	// empty when canaries and halts are off).
	Asking int32  `json:"asking"`
	Canary string `json:"canary,omitempty"`
	// Held: why the pool's versions rules hold its nodes off this version now ("" they do not):
	// denied, not allowed, or younger than minAge (with the time it may go).
	Held string `json:"held,omitempty"`
	// Finished: cycles Slipway ran for it in this cluster that ended on it (any pool); ProvenSince:
	// when it met the proof rule here (its canaries finished, their bake passed, no failure since its
	// resume, no halt), what slipway_version_proven_since_seconds publishes for other clusters.
	// +optional
	Finished int32 `json:"finished,omitempty"`
	// +optional
	ProvenSince *metav1.Time `json:"provenSince,omitempty"`
}

// RebootPolicyList is a list of RebootPolicies.
//
// +kubebuilder:object:root=true
type RebootPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RebootPolicy `json:"items"`
}
