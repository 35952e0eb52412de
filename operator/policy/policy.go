package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/health"
	"github.com/slipway-dev/slipway/operator/stall"
	"github.com/slipway-dev/slipway/operator/steer"
	"github.com/slipway-dev/slipway/operator/versions"
	"github.com/slipway-dev/slipway/operator/window"
)

// Policy is a compiled Spec: what the operator runs. Never changed once compiled.
type Policy struct {
	// Spec is what it was compiled from, as published (the Prometheus URL without its secrets).
	Spec Spec

	Hooks                      protocol.Hooks
	MaxUnavailable             budget.Max
	MaxUnavailablePerGroup     *budget.Max // nil: groups share MaxUnavailable only
	MaxUnavailableControlPlane budget.Max
	GroupLabel                 string
	ControlPlaneOrder          admission.Order
	// Schedule: windows, FLUO's window and exclusions (nil: always open).
	Schedule admission.Schedule
	Canary   admission.Canary
	// Versions: which OS versions a node may reboot into (package versions).
	Versions versions.Rules
	// Proof: the gate on another cluster's proof (nil: none).
	Proof *blocker.Proof
	// Update: the update channel and server the pool's agents write into update.conf (checked).
	Update updateconf.Settings
	Settle SettleConfig
	Drain  DrainConfig
	Steer  steer.Config
	// HealthChecks are the parsed --health-check entries (health.Blocker evaluates them).
	HealthChecks []*health.Check
	// PodsOnNode and PodsInCluster are the --blocking-pod-selector entries, each a whole selector
	// (checked to parse).
	PodsOnNode, PodsInCluster []string
	MinReady                  *blocker.MinReadyNodes
	// Alerts is the --prometheus-url blocker (nil: off).
	Alerts           *blocker.Alerts
	RebootTimeout    time.Duration
	StallPolicy      stall.SlotPolicy
	MaxFailedReboots int
}

// Admission is what admission reads of the policy.
func (p *Policy) Admission() *admission.Rules {
	r := &admission.Rules{Schedule: p.Schedule, Canary: p.Canary, Versions: p.Versions, UndrainableRetry: p.Drain.UndrainableRetry}
	if p.Proof != nil {
		r.Proof = p.Proof
	}
	return r
}

// DefaultAlertRequire is the alert --prometheus-url requires unless --alert-require names others or
// --alert-accept-empty: kube-prometheus' Watchdog, which always fires while the alerting pipeline works.
const DefaultAlertRequire = "Watchdog"

// Compile checks s with the parsers the flags use and builds the Policy. Its errors name the flag, as
// the update-operator's start refuses them.
func Compile(s Spec) (*Policy, error) {
	p := &Policy{Spec: s, GroupLabel: s.GroupLabel, Hooks: protocol.Hooks{Before: s.Hooks.Before, After: s.Hooks.After},
		RebootTimeout: s.RebootTimeout.Duration, MaxFailedReboots: s.MaxFailedReboots,
		PodsOnNode: s.BlockingPodSelectors, PodsInCluster: s.BlockingPodSelectorsInCluster}
	var err error
	if p.MaxUnavailable, err = budget.ParseMax(s.MaxUnavailable); err != nil {
		return nil, err
	}
	if p.Schedule, err = schedule(s); err != nil {
		return nil, err
	}
	drainPolicy, err := ParseDrainPolicy(s.Drain.FailurePolicy)
	if err != nil {
		return nil, fmt.Errorf("drain-failure-policy: %w", err)
	}
	if p.StallPolicy, err = stall.ParsePolicy(s.StallPolicy); err != nil {
		return nil, fmt.Errorf("stall-policy: %w", err)
	}
	if p.RebootTimeout < 0 {
		return nil, fmt.Errorf("reboot-timeout %s must not be negative", p.RebootTimeout)
	}
	if s.MaxUnavailablePerGroup != "" {
		m, err := budget.ParseMax(s.MaxUnavailablePerGroup)
		if err != nil {
			return nil, fmt.Errorf("max-unavailable-per-group: %w", err)
		}
		p.MaxUnavailablePerGroup = &m
	}
	if p.MaxUnavailableControlPlane, err = budget.ParseMax(s.MaxUnavailableControlPlane); err != nil {
		return nil, fmt.Errorf("max-unavailable-control-plane: %w", err)
	}
	if p.ControlPlaneOrder, err = admission.ParseOrder(s.ControlPlaneOrder); err != nil {
		return nil, fmt.Errorf("control-plane-order: %w", err)
	}
	if s.MaxFailedReboots < 0 {
		return nil, fmt.Errorf("max-failed-reboots %d must not be negative", s.MaxFailedReboots)
	}
	if s.MaxFailedReboots > fleetrecord.MaxFailures {
		return nil, fmt.Errorf("max-failed-reboots %d: at most %d (the fleet record keeps the newest %d failed machines; a count past them could never be reached)", s.MaxFailedReboots, fleetrecord.MaxFailures, fleetrecord.MaxFailures)
	}
	if s.MinReadyNodes != "" {
		m, err := blocker.ParseMinReadyNodes(s.MinReadyNodes)
		if err != nil {
			return nil, fmt.Errorf("min-ready-nodes: %w", err)
		}
		p.MinReady = &m
	}
	if _, err := blocker.ParseSelectors(append(slices.Clone(s.BlockingPodSelectors), s.BlockingPodSelectorsInCluster...)); err != nil {
		return nil, fmt.Errorf("blocking-pod-selector: %w", err)
	}
	if p.Alerts, err = alerts(s.Alerts); err != nil {
		return nil, err
	}
	if s.Alerts.PrometheusURL != "" {
		p.Spec.Alerts.PrometheusURL = p.Alerts.URL()
	}
	if s.MaxFailedReboots > 0 && p.RebootTimeout == 0 {
		return nil, errors.New("max-failed-reboots needs --reboot-timeout: a failed reboot is one that stalled")
	}
	d := s.Drain
	if d.Timeout.Duration < 0 {
		return nil, fmt.Errorf("drain-timeout %s must not be negative", d.Timeout.Duration)
	}
	if d.SkipWaitForDelete.Duration < time.Second {
		return nil, fmt.Errorf("drain-skip-wait-for-delete-timeout %s: must be at least 1s", d.SkipWaitForDelete.Duration)
	}
	for _, spec := range s.HealthChecks {
		c, err := health.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("health-check: %w", err)
		}
		p.HealthChecks = append(p.HealthChecks, c)
	}
	c := s.Canary
	if c.Nodes < 0 || c.Bake.Duration < 0 || c.MaxFailedPerVersion < 0 {
		return nil, fmt.Errorf("canary-nodes (%d), canary-bake (%s) and max-failed-per-version (%d) must not be negative", c.Nodes, c.Bake.Duration, c.MaxFailedPerVersion)
	}
	if c.MaxFailedPerVersion > fleetrecord.MaxFailures {
		return nil, fmt.Errorf("max-failed-per-version %d: at most %d (the fleet record keeps a version's newest %d failures; a count past them could never be reached)", c.MaxFailedPerVersion, fleetrecord.MaxFailures, fleetrecord.MaxFailures)
	}
	if c.Bake.Duration > 0 && c.Nodes == 0 {
		return nil, errors.New("canary-bake needs --canary-nodes")
	}
	p.Canary = admission.Canary{Nodes: c.Nodes, Bake: c.Bake.Duration, MaxFailed: c.MaxFailedPerVersion}
	if p.Versions, err = versions.Compile(s.Versions.Allow, s.Versions.Deny, s.Versions.MinAge.Duration); err != nil {
		return nil, fmt.Errorf("allow-version/deny-version/version-min-age: %w", err)
	}
	if p.Proof, err = requireProof(s.Versions.RequireProof, s.ProofSource); err != nil {
		return nil, err
	}
	p.Update = updateconf.Settings{Group: s.Update.Group, Server: s.Update.Server}
	if err := p.Update.Validate(s.Update.AllowHTTP); err != nil {
		return nil, fmt.Errorf("update-group/update-server: %w", err)
	}
	if srv := p.Update.Server; srv != "" && len(s.Update.AllowServers) > 0 && !slices.ContainsFunc(s.Update.AllowServers, func(prefix string) bool { return strings.HasPrefix(srv, prefix) }) {
		return nil, fmt.Errorf("update-server %q: not under any --update-server-allow (%s)", srv, strings.Join(s.Update.AllowServers, ", "))
	}
	if d.UndrainableRetry.Duration <= 0 {
		return nil, fmt.Errorf("undrainable-retry %s must be positive", d.UndrainableRetry.Duration)
	}
	if d.VolumeDetachTimeout.Duration <= 0 {
		return nil, fmt.Errorf("volume-detach-timeout %s must be positive", d.VolumeDetachTimeout.Duration)
	}
	st := s.Settle
	if st.Time.Duration < 0 || st.Timeout.Duration <= 0 {
		return nil, fmt.Errorf("settle-time (%s) must not be negative and settle-timeout (%s) must be positive", st.Time.Duration, st.Timeout.Duration)
	}
	if st.TimeoutPolicy != "proceed" && st.TimeoutPolicy != "hold" {
		return nil, fmt.Errorf("settle-timeout-policy %q: want \"proceed\" or \"hold\"", st.TimeoutPolicy)
	}
	p.Settle = SettleConfig{Time: st.Time.Duration, PDBs: st.PDBs, Timeout: st.Timeout.Duration, Hold: st.TimeoutPolicy == "hold"}
	if d.PodSelector != "" {
		if _, err := labels.Parse(d.PodSelector); err != nil {
			return nil, fmt.Errorf("drain-pod-selector %q: %w", d.PodSelector, err)
		}
	}
	if p.Steer, err = steering(s.Steering, s.GroupLabel); err != nil {
		return nil, err
	}
	if d.Delay.Duration < 0 || d.RebootDelay.Duration < 0 {
		return nil, fmt.Errorf("drain-delay (%s) and reboot-delay (%s) must not be negative", d.Delay.Duration, d.RebootDelay.Duration)
	}
	// The drain's stage is timed from its start (--reboot-timeout): the delays and one whole drain
	// attempt must fit in it, or a normal drain would stall.
	if rt := p.RebootTimeout; rt > 0 && (d.Delay.Duration > 0 || d.RebootDelay.Duration > 0) && d.Delay.Duration+d.RebootDelay.Duration+d.Timeout.Duration >= rt {
		return nil, fmt.Errorf("drain-delay (%s) plus reboot-delay (%s) plus drain-timeout (%s) must be shorter than reboot-timeout (%s): the drain's stage, delays included, is timed from its start",
			d.Delay.Duration, d.RebootDelay.Duration, d.Timeout.Duration, rt)
	}
	if d.RetryBase.Duration <= 0 || d.RetryMax.Duration < d.RetryBase.Duration {
		return nil, fmt.Errorf("drain-retry-base (%s) must be positive and at most drain-retry-max (%s)", d.RetryBase.Duration, d.RetryMax.Duration)
	}
	p.Drain = DrainConfig{Timeout: d.Timeout.Duration, GracePeriod: d.GracePeriod.Duration, Force: d.Force, Policy: drainPolicy,
		RetryBase: d.RetryBase.Duration, RetryMax: d.RetryMax.Duration, SkipWaitForDelete: d.SkipWaitForDelete.Duration,
		SkipWaitForDeleteAll: d.SkipWaitForDeleteAll.Duration, PodSelector: d.PodSelector,
		WaitForVolumeDetach: d.WaitForVolumeDetach, VolumeDetachTimeout: d.VolumeDetachTimeout.Duration, UndrainableRetry: d.UndrainableRetry.Duration,
		Delay: d.Delay.Duration, RebootDelay: d.RebootDelay.Duration}
	for _, a := range append(slices.Clone(s.Hooks.Before), s.Hooks.After...) {
		if owner, ok := protocol.Owners[a]; ok {
			return nil, fmt.Errorf("before-reboot-annotations/after-reboot-annotations: %q is a protocol key written by the %s; pick a name of your own", a, owner)
		}
		// Also what keeps a quote out of the operator policy's CEL, where deploy/operator-settings
		// writes these values inside a string literal.
		if errs := validation.IsQualifiedName(a); len(errs) > 0 {
			return nil, fmt.Errorf("before-reboot-annotations/after-reboot-annotations: %q is not an annotation key: %s", a, strings.Join(errs, "; "))
		}
	}
	if err := groupLabel(s.GroupLabel); err != nil {
		return nil, err
	}
	return p, nil
}

// MustCompile is Compile for tests and fixed specs: it panics with Compile's error.
func MustCompile(s Spec) *Policy {
	p, err := Compile(s)
	if err != nil {
		panic(err)
	}
	return p
}

// schedule is the one schedule of the windows, FLUO's window and the exclusions (nil when there is
// nothing to gate on).
func schedule(s Spec) (admission.Schedule, error) {
	tz := s.FLUOWindow.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("reboot-window-timezone %q: %w", tz, err)
	}
	w, err := window.Parse(s.FLUOWindow.Start, s.FLUOWindow.Length, loc)
	if err != nil {
		return nil, fmt.Errorf("reboot-window-start/reboot-window-length: %w", err)
	}
	var rules []*window.Rule
	for _, spec := range s.Windows {
		r, err := window.ParseWindow(spec)
		if err != nil {
			return nil, fmt.Errorf("reboot-window: %w", err)
		}
		rules = append(rules, r)
	}
	var excl []window.Exclusion
	for _, spec := range s.Exclusions {
		e, err := window.ParseExclusion(spec)
		if err != nil {
			return nil, fmt.Errorf("reboot-exclusion: %w", err)
		}
		excl = append(excl, e)
	}
	if w == nil && len(rules)+len(excl) == 0 {
		return nil, nil // an interface holding a nil *window.Schedule would not be nil
	}
	return window.NewSchedule(w, rules, excl), nil
}

// requireProof builds the gate on another cluster's proof (nil: off) over the one source per
// endpoint and credentials (blocker.SharedProofSource).
func requireProof(r RequireProof, src ProofSource) (*blocker.Proof, error) {
	if r.Selector == "" {
		if r.MinCycles != 0 && r.MinCycles != 1 || r.Soak.Duration != 0 {
			return nil, errors.New("require-proof-min-cycles/require-proof-soak need --require-proof-selector")
		}
		return nil, nil
	}
	if err := blocker.CheckSelector(r.Selector); err != nil {
		return nil, fmt.Errorf("require-proof-selector: %w", err)
	}
	if r.MinCycles < 1 || r.MinCycles > fleetrecord.MaxProofs {
		return nil, fmt.Errorf("require-proof-min-cycles %d: from 1 to %d (the other cluster's fleet record keeps its newest %d finished cycles; a count past them could never be reached)", r.MinCycles, fleetrecord.MaxProofs, fleetrecord.MaxProofs)
	}
	if r.Soak.Duration < 0 {
		return nil, fmt.Errorf("require-proof-soak %s must not be negative", r.Soak.Duration)
	}
	if src.URL == "" {
		return nil, errors.New("require-proof-selector needs the update-operator's --proof-url (the query endpoint that scrapes the other cluster's operator)")
	}
	source, err := blocker.SharedProofSource(blocker.ProofSourceConfig{URL: src.URL, BearerTokenFile: src.BearerTokenFile, CAFile: src.CAFile})
	if err != nil {
		return nil, fmt.Errorf("proof-url: %w", err)
	}
	return &blocker.Proof{Source: source, Rule: blocker.ProofRule{Selector: r.Selector, MinCycles: r.MinCycles, Soak: r.Soak.Duration}}, nil
}

// alerts builds the --prometheus-url blocker (nil: off).
func alerts(a Alerts) (*blocker.Alerts, error) {
	var include, exclude *regexp.Regexp
	for _, r := range []struct {
		flag, expr string
		dst        **regexp.Regexp
	}{{"alert-include", a.Include, &include}, {"alert-exclude", a.Exclude, &exclude}} {
		if r.expr == "" {
			continue
		}
		re, err := regexp.Compile(r.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.flag, err)
		}
		*r.dst = re
	}
	if len(a.Require) > 0 && a.PrometheusURL == "" {
		return nil, errors.New("alert-require needs --prometheus-url")
	}
	if a.AcceptEmpty && len(a.Require) > 0 {
		return nil, errors.New("alert-accept-empty with --alert-require: an answer without the required alerts holds the fleet; give one of them")
	}
	if a.PrometheusURL == "" {
		return nil, nil
	}
	require := slices.Clone(a.Require)
	if len(require) == 0 && !a.AcceptEmpty {
		// Fail closed: an empty answer is what a Prometheus that lost its rules or its targets gives.
		require = []string{DefaultAlertRequire}
	}
	b, err := blocker.NewAlerts(blocker.AlertsConfig{URL: a.PrometheusURL, Include: include, Exclude: exclude, IncludePending: !a.FiringOnly, Require: require})
	if err != nil {
		return nil, fmt.Errorf("prometheus-url: %w", err)
	}
	return b, nil
}

// steering checks the steering flags. A pre- or post-reboot label may not be the group label: it would
// move the node between budget groups.
func steering(s Steering, groupLabel string) (steer.Config, error) {
	c := steer.Config{PreferNoScheduleTaint: s.PreferNoScheduleTaint, ExcludeFromLoadBalancers: s.ExcludeFromLoadBalancers}
	if err := steer.ValidateTaintKey(s.PreferNoScheduleTaint); err != nil {
		return c, fmt.Errorf("prefer-no-schedule-taint: %w", err)
	}
	var err error
	if c.Pre, err = steer.ParseLabels(s.PreLabels); err != nil {
		return c, fmt.Errorf("pre-reboot-node-labels: %w", err)
	}
	if c.Post, err = steer.ParseLabels(s.PostLabels); err != nil {
		return c, fmt.Errorf("post-reboot-node-labels: %w", err)
	}
	if groupLabel != "" && slices.Contains(c.LabelKeys(), groupLabel) {
		return c, fmt.Errorf("pre-reboot-node-labels/post-reboot-node-labels: %s is --group-label; a cycle would move the node to another budget group", groupLabel)
	}
	return c, nil
}

// groupLabel checks --group-label: a label key that only an admin sets.
func groupLabel(l string) error {
	if l == "" {
		return nil
	}
	if errs := validation.IsQualifiedName(l); len(errs) > 0 {
		return fmt.Errorf("group-label %q is not a label key: %s", l, strings.Join(errs, "; "))
	}
	// A group the node itself may write is no budget: a node could leave its group's budget or
	// pause by relabelling itself (the agent policy lets the agent write exactly its own keys).
	switch owner := protocol.Owners[l]; {
	case owner.OnNode():
		return fmt.Errorf("group-label %q is written by the %s on each node: a node could move itself out of its group's budget; use a label only an admin sets, e.g. topology.kubernetes.io/zone or node-restriction.kubernetes.io/<name> (which kubelets cannot set)", l, owner)
	case owner == "":
		return nil
	default:
		return fmt.Errorf("group-label %q is a protocol key written by the %s; use a label of your own", l, owner)
	}
}
