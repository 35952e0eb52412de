package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/window"
)

// fleetState is what the leader keeps about the fleet as a whole. Its sync (fleetKey) publishes
// fleetswitch.Status and writes the fleet record, one worker at a time (the workqueue never hands a
// key to two).
type fleetState struct {
	mu sync.Mutex // a leaf: nothing else is locked while it is held
	// rec is the fleet's memory (fleetrecord): the stored record, merged with every failure mark this
	// leader has seen on a Node and every failure and proof it decided itself. Admissions read it, so
	// a failure holds from the moment it is decided, before the record is written; syncFleet writes
	// it. Nothing is ever removed from it but by a person's resume (and Bound).
	rec fleetrecord.Record
	// recBroken says why the stored record cannot be read ("" it can): admissions hold until a person
	// mends it, since reading it as empty would lift every halt it holds.
	recBroken string
	// recWritten: the record's ConfigMap as this leader last wrote it (recordConfigMap).
	recWritten *corev1.ConfigMap
	failed     []string                       // nodes that failed in this roll-out, as last published (sorted)
	blockers   map[string]fleetswitch.Blocker // fleet-wide blockers active at the last admission
	// cycles: how long the last cycles that finished took, in seconds, oldest first
	// (fleetswitch.Status.CycleSeconds); cyclesRead: the ones an earlier leader published are in.
	cycles     []int
	cyclesRead bool
	// hist: cycles that ended and are not written yet (history.go); histWritten: the history's
	// ConfigMap as this leader last wrote it (nil: read it first).
	hist        history.Record
	histWritten *corev1.ConfigMap
	histSince   time.Time // when the oldest unwritten cycle ended (zero: none waits)
	// lazySince: when a fleet sync first found only lazy news to write (lazyNews), zero when none
	// waits; it is written Config.FleetLazyEvery after.
	lazySince time.Time
}

// DefaultFleetLazyEvery is how long news only the status view reads may wait before a fleet sync writes it:
// the last cycles' durations (its ETAs) and canary proofs while no policy runs canaries (its proven
// counts). Roll-outs finish a node every few seconds; writing both ConfigMaps with every finish was
// two of a cycle's 11.8 requests. Failures, halts, pauses, blockers and the policies are written at
// once, and proofs as the cycle ends while any policy runs canaries (proved).
const DefaultFleetLazyEvery = 30 * time.Second

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
// written: it stalled after its grant, or came back on its old version -- its own evidence only (a
// fleet-wide blocker firing when it is back holds the fleet; it says nothing about this node). The
// fleet record keeps it whatever happens to the Node later. When the budget is
// spent the fleet pauses itself (failures-paused); a person resumes it with resume --failures.
func (c *Controller) failedReboot(n *corev1.Node, why string, at time.Time) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.failed.WithLabelValues(failureReason(why)).Inc()
	}
	f := markFailure(n, why, at)
	if f.Reason == FailOldVersion {
		f.Version = n.Annotations[protocol.RebootVersion] // what failed-version is set to with this mark
	}
	c.learn(func(r *fleetrecord.Record) bool { return r.AddFailure(f) })
	if c.cfg.MaxFailedReboots == 0 {
		return
	}
	c.fleet.mu.Lock()
	failed := c.fleet.rec.BudgetFailures()
	c.fleet.mu.Unlock()
	c.log.Info("failed reboot counted", "node", n.Name, "uid", n.UID, "why", why, "failed", len(failed), "max", c.cfg.MaxFailedReboots)
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "RebootFailed", "counts against --max-failed-reboots (%d of %d): %s", len(failed), c.cfg.MaxFailedReboots, why)
}

// proved records that a cycle this operator ran for version ended well, the only canary proof. While
// any policy runs canaries it writes the fleet record before it returns (the caller then ends the
// cycle): a leader killed in between leaves a successor that knows the canary finished. Otherwise the
// proof only feeds the status view's counts, and a fleet sync writes it within Config.FleetLazyEvery.
func (c *Controller) proved(ctx context.Context, n *corev1.Node, version string, at time.Time) error {
	p := fleetrecord.Proof{Node: n.Name, UID: string(n.UID), Version: version, At: at, BootID: protocol.CurrentBootID(n)}
	c.learn(func(r *fleetrecord.Record) bool { return r.AddProof(p) })
	if c.cfg.Namespace == "" || !c.canaries() {
		return nil
	}
	_, err := c.writeRecord(ctx, true)
	return err
}

// canaries reports whether any policy in force (the flags' or a RebootPolicy's) sends canaries.
func (c *Controller) canaries() bool {
	if c.cfg.Canary.Nodes > 0 {
		return true
	}
	for _, p := range c.pools.Load().Pools() {
		if p.Policy != nil && p.Policy.Canary.Nodes > 0 {
			return true
		}
	}
	return false
}

// refinished moves a proof written before its cycle's last PATCH to the moment that PATCH landed (the
// later finish wins, fleetrecord.AddProof); the next fleet sync stores it.
func (c *Controller) refinished(n *corev1.Node, version string, at time.Time) {
	p := fleetrecord.Proof{Node: n.Name, UID: string(n.UID), Version: version, At: at, BootID: protocol.CurrentBootID(n)}
	c.learn(func(r *fleetrecord.Record) bool { return r.AddProof(p) })
}

// learn changes the fleet's memory; when it changed, admissions look again and the next fleet sync
// writes it.
func (c *Controller) learn(change func(r *fleetrecord.Record) bool) {
	c.fleet.mu.Lock()
	changed := change(&c.fleet.rec)
	c.fleet.mu.Unlock()
	if changed {
		c.index.Bump() // admissions see it from now on
		c.queue.Add(fleetKey)
	}
}

// Failure reasons: the reason label of slipway_operator_failed_reboots_total, the first word of a
// reboot-failed mark's why, and the fleet record's Failure.Reason.
const (
	FailStalled    = fleetrecord.ReasonStalled
	FailBlocker    = fleetrecord.ReasonBlocker
	FailOldVersion = fleetrecord.ReasonOldVersion
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

// markFailure is the fleet record's entry for a reboot-failed mark written at with why: the same
// whether this leader decided it or a later one reads it off the Node, so the two are one entry.
func markFailure(n *corev1.Node, why string, at time.Time) fleetrecord.Failure {
	return fleetrecord.Failure{Node: n.Name, UID: string(n.UID), Reason: failureReason(why), At: at, Why: why, Budget: true}
}

// nodeFailures are the failures a Node's marks record: its reboot-failed mark (with the version of
// its failed-version when it came back on the old one), and a stall after its grant for a version.
// Failures read off Nodes only ever add to the record: a mark removed or a Node deleted lifts nothing.
func nodeFailures(n *corev1.Node, e admission.Node) []fleetrecord.Failure {
	var out []fleetrecord.Failure
	if v, ok := n.Annotations[protocol.RebootFailed]; ok {
		mark, why, _ := strings.Cut(v, " ")
		at, err := time.Parse(time.RFC3339, mark)
		if err != nil {
			at = n.CreationTimestamp.Time // a mark nobody can date still counts (only the operator writes it)
		}
		if !at.IsZero() {
			f := markFailure(n, why, at)
			if f.Reason == FailOldVersion {
				f.Version = n.Annotations[protocol.FailedVersion]
			}
			out = append(out, f)
		}
	}
	if e.StalledVersion != "" && !e.StalledAt.IsZero() {
		out = append(out, fleetrecord.Failure{Node: n.Name, UID: string(n.UID), Reason: FailStalled, Version: e.StalledVersion, At: e.StalledAt, Why: "stalled after its grant for " + e.StalledVersion})
	}
	return out
}

// noteNodeFailures adds what n's marks record to the fleet's memory.
func (c *Controller) noteNodeFailures(n *corev1.Node, e admission.Node) {
	fs := nodeFailures(n, e)
	if len(fs) == 0 {
		return
	}
	c.learn(func(r *fleetrecord.Record) bool {
		changed := false
		for _, f := range fs {
			changed = r.AddFailure(f) || changed
		}
		return changed
	})
}

// loadRecord reads the stored fleet record and every Node's failure marks: what a leader starts
// from, before its first admission. A new leader rebuilds the same memory its predecessor had (the
// stored record plus the marks it had not written yet). With no stored record yet (the first leader
// of this version) the resumes the fleet switch recorded before the record existed are taken over.
func (c *Controller) loadRecord() {
	stored, broken := c.storedRecord()
	if c.recordConfigMap() == nil {
		sw := fleetswitch.Read(c.fleetConfigMap())
		const by = "ConfigMap " + fleetswitch.ConfigMapName + " (before the fleet record)"
		if !sw.FailuresResetAt.IsZero() {
			stored.AddResume(fleetrecord.Resume{By: by, At: sw.FailuresResetAt})
		}
		for v, at := range sw.VersionsResumed {
			stored.AddResume(fleetrecord.Resume{Version: v, By: by, At: at})
		}
	}
	for _, n := range c.allNodes() {
		for _, f := range nodeFailures(n, admission.Of(n, c.cfg.GroupLabel, c.cfg.StallPolicy)) {
			stored.AddFailure(f)
		}
	}
	c.fleet.mu.Lock()
	c.fleet.rec.Merge(stored)
	c.fleet.recBroken = broken
	c.fleet.mu.Unlock()
}

// recordConfigMap is the fleet record's ConfigMap (nil: none yet, or no namespace): the informer's, or
// this leader's own last write when that is newer (the informer trails it; a write on the older one
// would only conflict).
func (c *Controller) recordConfigMap() *corev1.ConfigMap {
	if c.recordCMs == nil {
		return nil
	}
	cm, err := c.recordCMs.ConfigMaps(c.cfg.Namespace).Get(fleetrecord.ConfigMapName)
	if err != nil {
		cm = nil
	}
	c.fleet.mu.Lock()
	own := c.fleet.recWritten
	c.fleet.mu.Unlock()
	if own != nil && (cm == nil || newerRV(own.ResourceVersion, cm.ResourceVersion)) {
		return own
	}
	return cm
}

// newerRV reports whether resourceVersion a is newer than b (both etcd revisions; an unreadable one is
// not newer).
func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// storedRecord is the record as stored, and why it cannot be read ("" it can).
func (c *Controller) storedRecord() (fleetrecord.Record, string) {
	return decodeRecord(c.recordConfigMap())
}

// decodeRecord reads the record in cm (nil: none yet, the empty record), and why it cannot ("" it can).
func decodeRecord(cm *corev1.ConfigMap) (fleetrecord.Record, string) {
	if cm == nil {
		return fleetrecord.Record{}, ""
	}
	r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
	if err != nil {
		return fleetrecord.Record{}, fmt.Sprintf("ConfigMap %s/%s: %v; mend or restore it (never delete it: it holds the fleet's halts and failures)", cm.Namespace, cm.Name, err)
	}
	return r, ""
}

// writeRecord stores the fleet's memory when the stored record lacks any of it: merged onto the
// record as stored (a person's resume written meanwhile is kept), conditional on the resourceVersion
// it was read at, so no write of another leader or a person is ever lost. The informer's copy may
// trail this leader's own last write: a conflict reads the live object and merges again. Unless now,
// what lacks only proofs is left to a later sync (lazyNews): it returns lazy true then.
func (c *Controller) writeRecord(ctx context.Context, now bool) (lazy bool, err error) {
	c.recordWrite.Lock() // the fleet sync and a finishing node's sync: one write at a time
	defer c.recordWrite.Unlock()
	stored, err := c.storeConfigMap(ctx, fleetrecord.ConfigMapName, fleetrecord.Key, c.recordConfigMap(), false, func(cm *corev1.ConfigMap) (string, bool, error) {
		rec, broken := decodeRecord(cm)
		c.fleet.mu.Lock()
		wasBroken := c.fleet.recBroken != ""
		c.fleet.recBroken = broken
		learned := c.fleet.rec.Merge(rec) // a person's resume, another leader's entries
		c.fleet.rec.Bound()
		want := c.fleet.rec.Encode()
		onlyProofs := c.fleet.rec.SameButProofs(rec)
		c.fleet.mu.Unlock()
		if learned || wasBroken != (broken != "") {
			c.enqueueWaiting() // a resume may release waiting nodes; a broken record holds them
		}
		switch {
		case broken != "":
			return "", false, errors.New("not writing the fleet record over one it cannot read: " + broken)
		case cm != nil && cm.Data[fleetrecord.Key] == want:
			return "", false, nil
		case cm != nil && !now && onlyProofs:
			lazy = true
			return "", false, nil
		}
		lazy = false
		return want, true, nil
	})
	c.fleet.mu.Lock()
	c.fleet.recWritten = stored // nil after a failure: the informer's copy is the best known then
	c.fleet.mu.Unlock()
	return lazy, err
}

// Remembered is what the fleet record holds now (FleetView): the halted versions and the number of
// nodes whose failures count against --max-failed-reboots.
func (c *Controller) Remembered() (halted []string, failed int) {
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	return c.fleet.rec.Halted(c.cfg.Canary.MaxFailed), len(c.fleet.rec.BudgetFailures())
}

// syncFleet writes the fleet record, publishes the fleet Status when it changed and pauses the fleet
// (failures-paused) when the failure budget is spent, counted from the Nodes. News only the status
// view reads waits up to Config.FleetLazyEvery (lazyNews).
func (c *Controller) syncFleet(ctx context.Context) error {
	if c.cfg.Namespace == "" {
		return nil
	}
	now := c.cfg.Now()
	c.fleet.mu.Lock()
	due := !c.fleet.lazySince.IsZero() && !now.Before(c.fleet.lazySince.Add(c.cfg.FleetLazyEvery))
	c.fleet.mu.Unlock()
	// The record first; a record that cannot be written (or read) still leaves the status published
	// (it says why admissions hold), and the sync is retried.
	recLazy, recErr := c.writeRecord(ctx, due)
	if wait, err := c.writeHistory(ctx, false); err != nil {
		c.log.Error(err, "history not written; will retry") // the history never holds admissions up
		c.queue.AddAfter(fleetKey, c.cfg.HistoryEvery)
	} else if wait > 0 {
		c.queue.AddAfter(fleetKey, wait)
	}
	cm := c.fleetConfigMap()
	sw := fleetswitch.Read(cm)
	c.fleet.mu.Lock()
	if c.cfg.MaxFailedReboots > 0 {
		c.fleet.failed = c.fleet.rec.BudgetFailures()
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
	policies := c.published()
	same := pause == nil && cm != nil && cm.Data[fleetswitch.KeyPolicies] == policies
	if same && cm.Data[fleetswitch.KeyStatus] == string(raw) {
		return c.lazyNews(now, recLazy, false, recErr)
	}
	if same && !due && onlyCycles(cm, st) {
		return c.lazyNews(now, recLazy, true, recErr)
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
	if policies != "" {
		patch["data"].(map[string]interface{})[fleetswitch.KeyPolicies] = policies
	}
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
	return c.lazyNews(now, recLazy, false, recErr)
}

// lazyNews ends a fleet sync: when the record (record) or the status (status) has news left unwritten
// because only the status view reads it, the sync comes back for it Config.FleetLazyEvery after such news was
// first left; when neither has, none waits.
func (c *Controller) lazyNews(now time.Time, record, status bool, err error) error {
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	switch {
	case record || status:
		if c.fleet.lazySince.IsZero() {
			c.fleet.lazySince = now
		}
		c.queue.AddAfter(fleetKey, c.fleet.lazySince.Add(c.cfg.FleetLazyEvery).Sub(now))
	case err == nil:
		c.fleet.lazySince = time.Time{}
	}
	return err
}

// onlyCycles reports whether st differs from the Status published in cm in the cycle durations alone.
func onlyCycles(cm *corev1.ConfigMap, st fleetswitch.Status) bool {
	prev, ok := fleetswitch.ReadStatus(cm)
	if !ok {
		return false
	}
	st.CycleSeconds = prev.CycleSeconds
	raw, err := json.Marshal(st)
	return err == nil && string(raw) == cm.Data[fleetswitch.KeyStatus]
}

// published is the policies this operator runs as it publishes them (policy.Published): the Spec its
// policy was compiled from; "" when it was not compiled from one (a Config put together field by
// field), when the status view reads the Status's copy of the settings instead.
func (c *Controller) published() string {
	if !c.cfg.Compiled() {
		return ""
	}
	return policy.Publish(policy.Named{Spec: c.cfg.Spec})
}

// status is the fleet Status to publish (fleet.mu held). Its copy of the settings (MaxUnavailable to
// SettleTime) is what kubectl slipway before the published policies read; kept one release.
func (c *Controller) status() fleetswitch.Status {
	st := fleetswitch.Status{
		Leader:                     c.cfg.Identity,
		Version:                    version.String(),
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

// fleetView is what admissions read of the fleet: the pause switch and the fleet's memory
// (admission.Memory).
type fleetView struct {
	fleetswitch.Switch
	rec    fleetrecord.Record
	broken string
}

// Holds holds every node while the fleet record cannot be read, then as the switch says.
func (v fleetView) Holds(group string) (bool, string) {
	if v.broken != "" {
		return true, "fleet record unreadable: " + v.broken
	}
	return v.Switch.Holds(group)
}

func (v fleetView) VersionResumedAt(ver string) time.Time  { return v.rec.VersionResumedAt(ver) }
func (v fleetView) VersionFailures(ver string) []time.Time { return v.rec.VersionFailures(ver) }
func (v fleetView) VersionStalls(ver string) []time.Time   { return v.rec.VersionStalls(ver) }
func (v fleetView) VersionProofs(ver string, inCycle func(string) bool) []time.Time {
	return v.rec.VersionProofs(ver, inCycle)
}

// fleetSwitch is the fleet as admissions must see it: the ConfigMap's switch, plus the failure pause
// as soon as the fleet's memory spends the budget, before it is written.
func (c *Controller) fleetSwitch() fleetView {
	sw := fleetswitch.Read(c.fleetConfigMap())
	c.fleet.mu.Lock()
	v := fleetView{Switch: sw, rec: c.fleet.rec.Clone(), broken: c.fleet.recBroken}
	c.fleet.mu.Unlock()
	if max := c.cfg.MaxFailedReboots; max > 0 && !sw.FailuresPaused {
		if failed := v.rec.BudgetFailures(); len(failed) >= max {
			v.FailuresPaused, v.FailuresReason = true, pauseReason(failed)
		}
	}
	return v
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
