package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/window"
)

// fleetState is what the leader keeps about the fleet as a whole. Its sync (fleetKey) publishes
// fleetswitch.Status and keeps the failure budget, one worker at a time (the workqueue never hands a
// key to two). The failures are counted from the Nodes (their reboot-failed annotation) on every
// sync, so a leader change or a lost publication loses none; memory only bridges the moment between
// a failure's write and the informer showing it.
type fleetState struct {
	mu sync.Mutex // a leaf: nothing else is locked while it is held
	// marks: the reboot-failed mark of every node that has one (node -> when), from the Nodes (loaded
	// before the first admission, kept by every change of a node, recounted by every fleet sync) and
	// from this leader's own writes. Admissions count from it, so the fleet is paused from the moment
	// the budget is spent, before the failure pause is written, and under a new leader at once.
	marks    map[string]time.Time
	failed   []string                       // nodes that failed in this roll-out, as last published (sorted)
	blockers map[string]fleetswitch.Blocker // fleet-wide blockers active at the last admission
	// cycles: how long the last cycles that finished took, in seconds, oldest first
	// (fleetswitch.Status.CycleSeconds); cyclesRead: the ones an earlier leader published are in.
	cycles     []int
	cyclesRead bool
}

// noteCycle records how long a cycle that finished took, for the published Status (the status view's
// ETAs); the next fleet sync publishes it.
func (c *Controller) noteCycle(took time.Duration) {
	if took <= 0 {
		return
	}
	c.fleet.mu.Lock()
	c.fleet.cycles = lastCycles(append(c.fleet.cycles, int(took.Round(time.Second)/time.Second)))
	c.fleet.mu.Unlock()
	c.queue.Add(fleetKey)
}

// lastCycles keeps the newest fleetswitch.MaxCycleSamples.
func lastCycles(s []int) []int {
	if len(s) > fleetswitch.MaxCycleSamples {
		s = append([]int(nil), s[len(s)-fleetswitch.MaxCycleSamples:]...)
	}
	return s
}

// noteBlockers records which fleet-wide blockers held the last admission; a change republishes.
func (c *Controller) noteBlockers(active map[string]string) {
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	now := c.cfg.Now()
	changed := len(active) != len(c.fleet.blockers)
	next := map[string]fleetswitch.Blocker{}
	for name, reason := range active {
		b, ok := c.fleet.blockers[name]
		if !ok {
			b = fleetswitch.Blocker{Name: name, Since: now.UTC().Truncate(time.Second)}
		}
		if b.Reason != reason {
			changed = true
		}
		b.Reason = reason
		next[name] = b
	}
	c.fleet.blockers = next
	if changed {
		c.queue.Add(fleetKey)
	}
}

// failedReboot counts a node against --max-failed-reboots once its reboot-failed annotation is
// written: it stalled after its grant, or came back while a fleet-wide blocker fired. When the budget
// is spent the fleet pauses itself (failures-paused); a person resumes it with resume --failures.
func (c *Controller) failedReboot(n *corev1.Node, why string, at time.Time) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.failed.WithLabelValues(failureReason(why)).Inc()
	}
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	c.fleet.mu.Lock()
	if c.fleet.marks == nil {
		c.fleet.marks = map[string]time.Time{}
	}
	c.fleet.marks[n.Name] = at
	failed := c.countFailures(fleetswitch.Read(c.fleetConfigMap()))
	c.fleet.mu.Unlock()
	if len(failed) >= c.cfg.MaxFailedReboots {
		c.index.Bump() // admissions see the fleet paused from now on
	}
	c.log.Info("failed reboot counted", "node", n.Name, "why", why, "failed", len(failed), "max", c.cfg.MaxFailedReboots)
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "RebootFailed", "counts against --max-failed-reboots (%d of %d): %s", len(failed), c.cfg.MaxFailedReboots, why)
	c.queue.Add(fleetKey)
}

// Failure reasons: the reason label of slipway_operator_failed_reboots_total, the first word of a
// reboot-failed mark's why.
const (
	FailStalled    = "stalled"
	FailBlocker    = "blocker"
	FailOldVersion = "old-version"
)

// failureReason is the metric's reason for a reboot-failed why.
func failureReason(why string) string {
	switch {
	case strings.HasPrefix(why, FailStalled):
		return FailStalled
	case strings.HasPrefix(why, FailOldVersion):
		return FailOldVersion
	}
	return FailBlocker
}

// failureMark is the reboot-failed annotation's value for a failure at now.
func failureMark(now time.Time, why string) string {
	return truncate(now.UTC().Format(time.RFC3339)+" "+why, 512)
}

// failedAt reads a reboot-failed annotation's time (ok false: none, or unreadable, which counts: a
// failure mark nobody can date is still a failure).
func failedAt(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[protocol.RebootFailed]
	if !ok {
		return time.Time{}, false
	}
	t, _ := time.Parse(time.RFC3339, strings.SplitN(v, " ", 2)[0])
	return t, true
}

// loadFailureMarks reads every Node's reboot-failed mark: the count a leader starts from, and what
// each fleet sync recounts, never memory alone. allNodes includes this leader's own writes not yet in
// the informer.
func (c *Controller) loadFailureMarks() {
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	marks := map[string]time.Time{}
	for _, n := range c.allNodes() {
		if at, ok := failedAt(n); ok {
			marks[n.Name] = at
		}
	}
	c.fleet.mu.Lock()
	c.fleet.marks = marks
	c.fleet.mu.Unlock()
}

// noteFailureMark keeps name's reboot-failed mark in step with the node's newest view.
func (c *Controller) noteFailureMark(name string) {
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	var at time.Time
	ok := false
	if n, err := c.node(name); err == nil {
		at, ok = failedAt(n)
	}
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	if _, had := c.fleet.marks[name]; !ok && !had {
		return
	}
	if c.fleet.marks == nil {
		c.fleet.marks = map[string]time.Time{}
	}
	if ok {
		c.fleet.marks[name] = at
	} else {
		delete(c.fleet.marks, name)
	}
}

// countFailures lists the nodes that failed in this roll-out: a reboot-failed mark not older than
// the last resume --failures (fleet.mu held).
func (c *Controller) countFailures(sw fleetswitch.Switch) []string {
	out := []string{}
	for name, at := range c.fleet.marks {
		if at.IsZero() || sw.FailuresResetAt.IsZero() || !at.Before(sw.FailuresResetAt) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// syncFleet publishes the fleet Status when it changed and pauses the fleet (failures-paused) when
// the failure budget is spent, counted from the Nodes.
func (c *Controller) syncFleet(ctx context.Context) error {
	if c.cfg.Namespace == "" {
		return nil
	}
	cm := c.fleetConfigMap()
	sw := fleetswitch.Read(cm)
	c.loadFailureMarks()
	c.fleet.mu.Lock()
	if c.cfg.MaxFailedReboots > 0 {
		c.fleet.failed = c.countFailures(sw)
	}
	if !c.fleet.cyclesRead {
		// A new leader goes on from the durations the last one published, before its own.
		if prev, ok := fleetswitch.ReadStatus(cm); ok {
			c.fleet.cycles = lastCycles(append(append([]int(nil), prev.CycleSeconds...), c.fleet.cycles...))
		}
		c.fleet.cyclesRead = true
	}
	max := c.cfg.MaxFailedReboots
	var pause []byte
	reason := ""
	if max > 0 && len(c.fleet.failed) >= max && !sw.FailuresPaused {
		reason = pauseReason(c.fleet.failed)
		pause = fleetswitch.FailuresPausePatch(reason)
		c.log.Info("pausing the fleet: failure budget spent", "failed", c.fleet.failed)
	}
	st := c.status()
	c.fleet.mu.Unlock()
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if pause == nil && cm != nil && cm.Data[fleetswitch.KeyStatus] == string(raw) {
		return nil
	}
	var patch map[string]interface{}
	if pause != nil {
		if err := json.Unmarshal(pause, &patch); err != nil {
			return err
		}
	} else {
		patch = map[string]interface{}{"data": map[string]interface{}{}}
	}
	patch["data"].(map[string]interface{})[fleetswitch.KeyStatus] = string(raw)
	body, _ := json.Marshal(patch)
	cms := c.cfg.Client.CoreV1().ConfigMaps(c.cfg.Namespace)
	_, err = cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: c.cfg.Namespace}}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			_, err = cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, body, metav1.PatchOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("publishing the fleet status in ConfigMap %s/%s: %w", c.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	if pause != nil {
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.selfPauses.Inc()
		}
		c.cfg.Notify.Notify(notify.Event{Kind: notify.KindFleetPaused, Reason: reason, Time: c.cfg.Now()})
	}
	return nil
}

// status is the fleet Status to publish (fleet.mu held).
func (c *Controller) status() fleetswitch.Status {
	st := fleetswitch.Status{
		Leader:                     c.cfg.Identity,
		GroupLabel:                 c.cfg.GroupLabel,
		MaxUnavailable:             c.cfg.MaxUnavailable.String(),
		MaxUnavailableControlPlane: c.cfg.MaxUnavailableControlPlane.String(),
		ControlPlaneOrder:          string(c.cfg.ControlPlaneOrder),
		StallPolicy:                string(c.cfg.StallPolicy),
		FailedReboots:              append([]string(nil), c.fleet.failed...),
		MaxFailedReboots:           c.cfg.MaxFailedReboots,
		CanaryNodes:                c.cfg.Canary.Nodes,
		MaxFailedPerVersion:        c.cfg.Canary.MaxFailed,
		CycleSeconds:               append([]int(nil), c.fleet.cycles...),
	}
	if c.cfg.RebootTimeout > 0 {
		st.RebootTimeout = c.cfg.RebootTimeout.String()
	}
	if c.cfg.Settle.Time > 0 {
		st.SettleTime = c.cfg.Settle.Time.String()
	}
	if c.cfg.Canary.Bake > 0 {
		st.CanaryBake = c.cfg.Canary.Bake.String()
	}
	if c.cfg.MaxUnavailablePerGroup != nil {
		st.MaxUnavailablePerGroup = c.cfg.MaxUnavailablePerGroup.String()
	}
	if s, ok := c.cfg.Schedule.(*window.Schedule); ok {
		st.Windows, st.Exclusions = s.Specs()
		if w := s.FLUO(); w != nil {
			start, length, zone := w.Spec()
			st.FLUOWindow = &fleetswitch.FLUOWindow{Start: start, Length: length, TimeZone: zone}
		}
	}
	for _, b := range c.fleet.blockers {
		st.Blockers = append(st.Blockers, b)
	}
	sort.Slice(st.Blockers, func(i, j int) bool { return st.Blockers[i].Name < st.Blockers[j].Name })
	return st
}

// pauseReason says why the fleet paused itself.
func pauseReason(failed []string) string {
	return fmt.Sprintf("max-failed-reboots: %d nodes failed in this roll-out (%s); fix them, then resume (kubectl slipway resume --failures)", len(failed), strings.Join(failed, ", "))
}

// fleetSwitch is the pause switch as admissions must see it: the ConfigMap, plus the failure pause
// as soon as the marks on the Nodes spend the budget, before it is written.
func (c *Controller) fleetSwitch() fleetswitch.Switch {
	sw := fleetswitch.Read(c.fleetConfigMap())
	if max := c.cfg.MaxFailedReboots; max > 0 && !sw.FailuresPaused {
		c.fleet.mu.Lock()
		failed := c.countFailures(sw)
		c.fleet.mu.Unlock()
		if len(failed) >= max {
			sw.FailuresPaused, sw.FailuresReason = true, pauseReason(failed)
		}
	}
	return sw
}

// StartPausedReason is the pause reason --start-paused writes.
const StartPausedReason = "installed paused (--start-paused): check `kubectl slipway status`, then `kubectl slipway resume`"

// startPaused makes a fresh install start paused: nodes that staged an update before Slipway was
// installed do not start rebooting the moment it is, at whatever hour that is. Only when the fleet's
// ConfigMap does not exist yet: one that exists (an earlier leader published its status, or a person
// paused or resumed) is never touched, so a restart or an upgrade never pauses a running fleet. It
// returns once the fleet switch the admissions read shows the pause.
func (c *Controller) startPaused(ctx context.Context) error {
	if c.cfg.Namespace == "" || c.fleetConfigMap() != nil {
		return nil
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(fleetswitch.PausePatch("", StartPausedReason, "slipway-update-operator", c.cfg.Now()), &patch); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: c.cfg.Namespace}, Data: patch.Data}
	_, err := c.cfg.Client.CoreV1().ConfigMaps(c.cfg.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // written meanwhile: not a fresh install
	case err != nil:
		return fmt.Errorf("--start-paused: creating ConfigMap %s/%s paused: %w", c.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	c.log.Info("fresh install: the fleet starts paused (--start-paused)", "configMap", c.cfg.Namespace+"/"+fleetswitch.ConfigMapName)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return fleetswitch.Read(c.fleetConfigMap()).Paused, nil
	})
	if err != nil {
		return fmt.Errorf("--start-paused: the paused ConfigMap %s/%s never reached the informer: %w", c.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	return nil
}
