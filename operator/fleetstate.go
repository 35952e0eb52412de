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

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/window"
)

// operatorIdentity is who pauses the fleet when the failure budget is spent.
const operatorIdentity = "slipway-update-operator"

// fleetState is what the leader keeps about the fleet as a whole. It is rebuilt from the published
// Status after a restart or a leader change. Its sync (fleetKey) publishes fleetswitch.Status and keeps the
// failure budget, one worker at a time (the workqueue never hands a key to two).
type fleetState struct {
	mu     sync.Mutex // a leaf: nothing else is locked while it is held
	loaded bool
	failed []string // nodes that failed in this roll-out
	// pausing is the reason of a self-pause decided but not yet seen in the informer's copy of the
	// switch: admissions treat the fleet as paused from the moment the budget is spent.
	pausing  string
	blockers map[string]fleetswitch.Blocker // fleet-wide blockers active at the last admission
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

// failedReboot counts a node against --max-failed-reboots: it stalled after its grant, or came back
// while a fleet-wide blocker fired. When the budget is spent the fleet pauses itself; a person resumes it.
func (c *Controller) failedReboot(n *corev1.Node, why string) {
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	c.fleet.mu.Lock()
	for _, f := range c.fleet.failed {
		if f == n.Name {
			c.fleet.mu.Unlock()
			return
		}
	}
	c.fleet.failed = append(c.fleet.failed, n.Name)
	failed := len(c.fleet.failed)
	if failed >= c.cfg.MaxFailedReboots && c.fleet.pausing == "" {
		c.fleet.pausing = c.pauseReason()
		c.index.Bump()
	}
	c.fleet.mu.Unlock()
	c.log.Info("failed reboot counted", "node", n.Name, "why", why, "failed", failed, "max", c.cfg.MaxFailedReboots)
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "RebootFailed", "counts against --max-failed-reboots (%d of %d): %s", failed, c.cfg.MaxFailedReboots, why)
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.failed.Inc()
	}
	c.queue.Add(fleetKey)
}

// syncFleet publishes the fleet Status when it changed, pauses the fleet when the failure budget is
// spent, and starts a new roll-out (an empty failure list) once a person resumed a self-paused fleet.
func (c *Controller) syncFleet(ctx context.Context) error {
	if c.cfg.Namespace == "" {
		return nil
	}
	cm := c.fleetConfigMap()
	c.fleet.mu.Lock()
	if !c.fleet.loaded {
		c.fleet.loaded = true
		if st, ok := fleetswitch.ReadStatus(cm); ok {
			c.fleet.failed = append(c.fleet.failed, st.FailedReboots...)
		}
	}
	sw := fleetswitch.Read(cm)
	if sw.Paused {
		c.fleet.pausing = "" // ours (or anyone's) pause is visible now
	}
	max := c.cfg.MaxFailedReboots
	var pause []byte
	reason := ""
	switch {
	case max > 0 && len(c.fleet.failed) >= max && !sw.Paused && sw.By == "" && sw.Reason == "" && c.selfPaused(cm):
		// The fleet was paused by us and a person resumed it: a new roll-out, a fresh budget.
		c.log.Info("fleet resumed after the failure budget was spent; starting a new count", "failed", c.fleet.failed)
		c.fleet.failed = nil
		c.fleet.pausing = ""
	case max > 0 && len(c.fleet.failed) >= max && !sw.Paused:
		reason = c.pauseReason()
		pause = fleetswitch.PausePatch("", reason, operatorIdentity, c.cfg.Now())
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

// selfPaused: the last pause recorded in the published status was ours (the failure list is full),
// and now no pause is set: someone resumed.
func (c *Controller) selfPaused(cm *corev1.ConfigMap) bool {
	st, ok := fleetswitch.ReadStatus(cm)
	return ok && len(st.FailedReboots) >= c.cfg.MaxFailedReboots
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

// pauseReason says why the fleet paused itself (fleet.mu held).
func (c *Controller) pauseReason() string {
	return fmt.Sprintf("max-failed-reboots: %d nodes failed in this roll-out (%s); fix them, then resume (kubectl slipway resume)", len(c.fleet.failed), strings.Join(c.fleet.failed, ", "))
}

// fleetSwitch is the pause switch as admissions must see it: the ConfigMap, plus a self-pause decided
// but not yet visible in the informer.
func (c *Controller) fleetSwitch() fleetswitch.Switch {
	sw := fleetswitch.Read(c.fleetConfigMap())
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	if !sw.Paused && c.fleet.pausing != "" {
		sw.Paused, sw.Reason, sw.By = true, c.fleet.pausing, operatorIdentity
	}
	return sw
}

// firingAfterReturn is the first fleet-wide blocker that fires now, as "name: reason" ("" none): a node
// back while one fires counts against --max-failed-reboots.
func (c *Controller) firingAfterReturn(ctx context.Context, n *corev1.Node) string {
	return c.admitter.FleetWideFiring(ctx, n)
}
