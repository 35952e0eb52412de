package fleetstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
)

// NoteCycle records how long a cycle that finished took, for the published Status (the status view's
// ETAs); the next fleet sync publishes it.
func (s *Store) NoteCycle(took time.Duration) {
	if took <= 0 {
		return
	}
	s.mu.Lock()
	s.cycles = lastCycles(append(s.cycles, int(took.Round(time.Second)/time.Second)))
	s.mu.Unlock()
	s.cfg.OnSync(0)
}

// lastCycles keeps the newest fleetswitch.MaxCycleSamples.
func lastCycles(c []int) []int {
	if len(c) > fleetswitch.MaxCycleSamples {
		c = append([]int(nil), c[len(c)-fleetswitch.MaxCycleSamples:]...)
	}
	return c
}

// NoteBlockers records which fleet-wide blockers held the last admission (name -> reason); a change
// republishes.
func (s *Store) NoteBlockers(active map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	changed := len(active) != len(s.blockers)
	next := map[string]fleetswitch.Blocker{}
	for name, reason := range active {
		b, ok := s.blockers[name]
		if !ok {
			b = fleetswitch.Blocker{Name: name, Since: now.UTC().Truncate(time.Second)}
		}
		if b.Reason != reason {
			changed = true
		}
		b.Reason = reason
		next[name] = b
	}
	s.blockers = next
	if changed {
		s.cfg.OnSync(0)
	}
}

// Sync writes the fleet record, publishes the fleet Status when it changed and pauses the fleet
// (failures-paused) when the failure budget is spent. News only the status view reads waits up to
// Config.LazyEvery. A record that cannot be written (or read) still leaves the status published (it
// says why admissions hold), and the error asks for a retry.
func (s *Store) Sync(ctx context.Context) error {
	if s.cfg.Namespace == "" {
		return nil
	}
	now := s.cfg.Now()
	s.mu.Lock()
	due := !s.lazySince.IsZero() && !now.Before(s.lazySince.Add(s.cfg.LazyEvery))
	s.mu.Unlock()
	due = due || s.cfg.Quiet != nil && s.cfg.Quiet()
	recLazy, recErr := s.WriteRecord(ctx, due)
	if wait, err := s.WriteHistory(ctx, false); err != nil {
		s.cfg.Log.Error(err, "history not written; will retry") // the history never holds admissions up
		s.cfg.OnSync(s.cfg.HistoryEvery)
	} else if wait > 0 {
		s.cfg.OnSync(wait)
	}
	cm := s.SwitchConfigMap()
	sw := fleetswitch.Read(cm)
	s.mu.Lock()
	if s.cfg.MaxFailedReboots > 0 {
		s.failed = s.rec.BudgetFailures()
	}
	if !s.cyclesRead {
		// A new leader goes on from the durations the last one published, before its own.
		if prev, ok := fleetswitch.ReadStatus(cm); ok {
			s.cycles = lastCycles(append(append([]int(nil), prev.CycleSeconds...), s.cycles...))
		}
		s.cyclesRead = true
	}
	max := s.cfg.MaxFailedReboots
	var pause []byte
	reason := ""
	if max > 0 && len(s.failed) >= max && !sw.FailuresPaused {
		reason = PauseReason(s.failed)
		pause = fleetswitch.FailuresPausePatch(reason)
		s.cfg.Log.Info("pausing the fleet: failure budget spent", "failed", s.failed)
	}
	st := s.status()
	s.mu.Unlock()
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	policies := s.cfg.Policies
	same := pause == nil && cm != nil && cm.Data[fleetswitch.KeyPolicies] == policies
	if same && cm.Data[fleetswitch.KeyStatus] == string(raw) {
		return s.lazyNews(now, recLazy, false, recErr)
	}
	if same && !due && onlyCycles(cm, st) {
		return s.lazyNews(now, recLazy, true, recErr)
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
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	_, err = cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: s.cfg.Namespace}}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			_, err = cms.Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, body, metav1.PatchOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("publishing the fleet status in ConfigMap %s/%s: %w", s.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	if pause != nil {
		s.cfg.OnSelfPause(reason)
	}
	return s.lazyNews(now, recLazy, false, recErr)
}

// NewsWaits reports whether news only the status view reads was left for a later fleet sync, and the
// last fleet sync succeeded (one that failed is retried on the queue's backoff, not sooner).
func (s *Store) NewsWaits() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.lazySince.IsZero() && !s.syncFailed
}

// lazyNews ends a fleet sync: when the record (record) or the status (status) has news left unwritten
// because only the status view reads it, the sync comes back for it LazyEvery after such news was
// first left; when neither has, none waits.
func (s *Store) lazyNews(now time.Time, record, status bool, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncFailed = err != nil
	switch {
	case record || status:
		if s.lazySince.IsZero() {
			s.lazySince = now
		}
		s.cfg.OnSync(s.lazySince.Add(s.cfg.LazyEvery).Sub(now))
	case err == nil:
		s.lazySince = time.Time{}
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

// status is the fleet Status to publish (mu held): Config.Status with what the store keeps.
func (s *Store) status() fleetswitch.Status {
	st := s.cfg.Status
	st.FailedReboots = append([]string(nil), s.failed...)
	st.CycleSeconds = append([]int(nil), s.cycles...)
	st.Blockers = nil
	for _, b := range s.blockers {
		st.Blockers = append(st.Blockers, b)
	}
	sort.Slice(st.Blockers, func(i, j int) bool { return st.Blockers[i].Name < st.Blockers[j].Name })
	return st
}

// PauseReason says why the fleet paused itself.
func PauseReason(failed []string) string {
	return fmt.Sprintf("max-failed-reboots: %d nodes failed in this roll-out (%s); fix them, then resume (kubectl slipway resume --failures)", len(failed), strings.Join(failed, ", "))
}

// StartPaused makes a fresh install start paused (reason, by whom): nodes that staged an update
// before Slipway was installed do not start rebooting the moment it is, at whatever hour that is.
// Only when the fleet's ConfigMap does not exist yet: one that exists (an earlier leader published its
// status, or a person paused or resumed) is never touched, so a restart or an upgrade never pauses a
// running fleet. It returns once the switch the admissions read shows the pause.
func (s *Store) StartPaused(ctx context.Context, reason, by string) error {
	if s.cfg.Namespace == "" || s.SwitchConfigMap() != nil {
		return nil
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(fleetswitch.PausePatch("", reason, by, s.cfg.Now()), &patch); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: s.cfg.Namespace}, Data: patch.Data}
	_, err := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil // written meanwhile: not a fresh install
	case err != nil:
		return fmt.Errorf("--start-paused: creating ConfigMap %s/%s paused: %w", s.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	s.cfg.Log.Info("fresh install: the fleet starts paused (--start-paused)", "configMap", s.cfg.Namespace+"/"+fleetswitch.ConfigMapName)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return s.Switch().Paused, nil
	})
	if err != nil {
		return fmt.Errorf("--start-paused: the paused ConfigMap %s/%s never reached the informer: %w", s.cfg.Namespace, fleetswitch.ConfigMapName, err)
	}
	return nil
}
