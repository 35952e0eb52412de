// Package fleetstore is the fleet's durable memory in Slipway's namespace: the fleet switch and the
// published status (ConfigMap slipway-fleet), the fleet record (halts, failures, proofs, resumes:
// fleetrecord) and the cycle history (history). It owns their informers and their one conditional
// writer, and what the leader keeps of the fleet between writes. It knows nothing of the node
// controller: it tells its owner what changed through the callbacks in Config.
//
// # Locks
//
// Store.mu is a leaf, and no API call is made while it is held (TestNoLockAcrossAPICalls): a write
// reads what it needs under the lock, calls the API server without it, and takes it again for the
// answer. Two writes of the same ConfigMap at once are both conditional on the resourceVersion they
// read; the loser reads it again and merges (storeConfigMap).
package fleetstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/onchange"
)

// Defaults of Config's intervals.
const (
	// DefaultLazyEvery is how long news only the status view reads may wait before a fleet sync
	// writes it: the last cycles' durations (its ETAs) and canary proofs while no policy runs canaries
	// (its proven counts). Roll-outs finish a node every few seconds; writing both ConfigMaps with
	// every finish was two of a cycle's 11.8 requests. Failures, halts, pauses, blockers and the
	// policies are written at once, and proofs as the cycle ends while any policy runs canaries.
	DefaultLazyEvery = 30 * time.Second
	// DefaultHistoryEvery: a roll-out writes its history every few minutes rather than with each
	// cycle (one more request per cycle otherwise).
	DefaultHistoryEvery = 5 * time.Minute
)

// Config wires a Store.
type Config struct {
	Client kubernetes.Interface
	// Namespace holds the ConfigMaps; "" stores nothing (the memory lives only in this process).
	Namespace string
	Log       klog.Logger
	Now       func() time.Time
	// LazyEvery and HistoryEvery: DefaultLazyEvery and DefaultHistoryEvery when 0.
	LazyEvery time.Duration
	// Quiet, when set, reports that a roll-out is over (admission.Index.Quiet): news only the status
	// view reads is then written at once, since no cycle follows to batch it with.
	Quiet        func() bool
	HistoryEvery time.Duration
	// MaxFailedReboots is --max-failed-reboots (0: no failure budget); MaxFailedPerVersion
	// --max-failed-per-version (Remembered's halts).
	MaxFailedReboots    int
	MaxFailedPerVersion int
	// Status is what the published Status says of this operator (its identity and version); the
	// store adds the failures, the cycle durations and the blockers. Policies is the value of
	// fleetswitch.KeyPolicies it publishes ("" none).
	Status   fleetswitch.Status
	Policies string

	// OnSync asks the owner for a fleet sync (Sync) after d (0: now).
	OnSync func(after time.Duration)
	// OnMemory: the memory admissions read changed (a failure, a proof); they see it from now on.
	OnMemory func()
	// OnRelease: what may release or hold waiting nodes changed (the switch, a resume merged, the
	// record became readable or unreadable); they should be looked at again.
	OnRelease func()
	// OnSelfPause: the store paused the fleet because the failure budget is spent (the metric, the
	// notification).
	OnSelfPause func(reason string)
}

// Store is the fleet's memory and its ConfigMaps.
type Store struct {
	cfg Config
	// The two watched ConfigMaps, each by name (a watch on one object); nil when Namespace is "".
	switchFactory, recordFactory informers.SharedInformerFactory
	switchInf, recordInf         cache.SharedIndexInformer
	switches, records            corelisters.ConfigMapLister

	mu sync.Mutex // a leaf; never held across an API call
	// rec is the fleet's memory (fleetrecord): the stored record, merged with every failure mark this
	// leader has seen on a Node and every failure and proof it decided itself. Admissions read it, so
	// a failure holds from the moment it is decided, before the record is written; Sync writes it.
	// Nothing is ever removed from it but by a person's resume (and Bound).
	rec fleetrecord.Record
	// recBroken says why the stored record cannot be read ("" it can): admissions hold until a person
	// mends it, since reading it as empty would lift every halt it holds. versBroken likewise for
	// the versions beside it (a person's halts are there): nodes asking for a version are held.
	recBroken, versBroken string
	// vers: when the fleet first saw each OS version staged (fleetrecord.Versions), kept beside the
	// record in its ConfigMap.
	vers fleetrecord.Versions
	// recWritten: the record's ConfigMap as this leader last wrote it (recordConfigMap).
	recWritten *corev1.ConfigMap
	failed     []string                       // nodes that failed in this roll-out, as last published (sorted)
	blockers   map[string]fleetswitch.Blocker // fleet-wide blockers active at the last admission
	// cycles: how long the last cycles that finished took, in seconds, oldest first
	// (fleetswitch.Status.CycleSeconds); cyclesRead: the ones an earlier leader published are in.
	cycles     []int
	cyclesRead bool
	// hist: cycles that ended and are not written yet; histWritten: the history's ConfigMap as this
	// leader last wrote it (nil: read it first); histSince: when the oldest unwritten cycle ended
	// (zero: none waits).
	hist        history.Record
	histWritten *corev1.ConfigMap
	histSince   time.Time
	// lazySince: when a fleet sync first found only lazy news to write, zero when none waits; it is
	// written LazyEvery after.
	lazySince time.Time
	// syncFailed: the last fleet sync returned an error (NewsWaits is false until one succeeds).
	syncFailed bool
}

// New builds a Store; Start starts its informers.
func New(cfg Config) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LazyEvery <= 0 {
		cfg.LazyEvery = DefaultLazyEvery
	}
	if cfg.HistoryEvery <= 0 {
		cfg.HistoryEvery = DefaultHistoryEvery
	}
	for _, f := range []*func(){&cfg.OnMemory, &cfg.OnRelease} {
		if *f == nil {
			*f = func() {}
		}
	}
	if cfg.OnSync == nil {
		cfg.OnSync = func(time.Duration) {}
	}
	if cfg.OnSelfPause == nil {
		cfg.OnSelfPause = func(string) {}
	}
	s := &Store{cfg: cfg}
	if cfg.Namespace == "" {
		return s, nil
	}
	byName := func(name string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	}
	s.switchFactory = byName(fleetswitch.ConfigMapName)
	s.switchInf = s.switchFactory.Core().V1().ConfigMaps().Informer()
	s.switches = s.switchFactory.Core().V1().ConfigMaps().Lister()
	if _, err := s.switchInf.AddEventHandler(onchange.Any(func() { cfg.OnSync(0); cfg.OnRelease() })); err != nil {
		return nil, err
	}
	// The fleet record, likewise by name: a person's resume lands there.
	s.recordFactory = byName(fleetrecord.ConfigMapName)
	s.recordInf = s.recordFactory.Core().V1().ConfigMaps().Informer()
	s.records = s.recordFactory.Core().V1().ConfigMaps().Lister()
	if _, err := s.recordInf.AddEventHandler(onchange.Any(func() { cfg.OnSync(0) })); err != nil {
		return nil, err
	}
	// Deleted (a person, a careless uninstall): this leader's memory is written again at once, as a
	// new ConfigMap. Its own last write no longer stands for what is stored.
	if _, err := s.recordInf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		s.mu.Lock()
		s.recWritten = nil
		s.mu.Unlock()
		cfg.Log.Info("the fleet record was deleted; writing it again from this operator's memory", "configMap", cfg.Namespace+"/"+fleetrecord.ConfigMapName)
		cfg.OnSync(0)
	}}); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the informers and waits for them; Shutdown stops them.
func (s *Store) Start(ctx context.Context) error {
	if s.cfg.Namespace == "" {
		return nil
	}
	s.switchFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.switchInf.HasSynced) {
		return fmt.Errorf("fleet switch informer never synced: check the operator's RBAC (configmaps in %s)", s.cfg.Namespace)
	}
	s.recordFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.recordInf.HasSynced) {
		return fmt.Errorf("fleet record informer never synced: check the operator's RBAC (configmaps in %s)", s.cfg.Namespace)
	}
	return nil
}

// Shutdown stops the informers Start started.
func (s *Store) Shutdown() {
	if s.cfg.Namespace == "" {
		return
	}
	s.switchFactory.Shutdown()
	s.recordFactory.Shutdown()
}

// Flush writes what waits (the history, proofs left for later) as the controller stops (an upgrade, a
// lost lease): conditional like every write, so it merges with a new leader's.
func (s *Store) Flush(ctx context.Context) {
	if s.cfg.Namespace == "" {
		return
	}
	if _, err := s.WriteHistory(ctx, true); err != nil {
		s.cfg.Log.Error(err, "history not written at stop")
	}
	if _, err := s.WriteRecord(ctx, true); err != nil {
		s.cfg.Log.Error(err, "fleet record not written at stop")
	}
}

// SwitchConfigMap is the fleet switch's ConfigMap, nil when there is none (or no namespace).
func (s *Store) SwitchConfigMap() *corev1.ConfigMap {
	if s.switches == nil {
		return nil
	}
	cm, err := s.switches.ConfigMaps(s.cfg.Namespace).Get(fleetswitch.ConfigMapName)
	if err != nil {
		return nil
	}
	return cm
}

// Switch is the pause switch as stored.
func (s *Store) Switch() fleetswitch.Switch { return fleetswitch.Read(s.SwitchConfigMap()) }

// Learn changes the fleet's memory; when it changed, admissions see it from now on (OnMemory) and the
// next fleet sync writes it.
func (s *Store) Learn(change func(r *fleetrecord.Record) bool) {
	s.mu.Lock()
	changed := change(&s.rec)
	s.mu.Unlock()
	if changed {
		s.cfg.OnMemory()
		s.cfg.OnSync(0)
	}
}

// Proved reports whether the memory holds a finished cycle for version of the machine (node, uid).
func (s *Store) Proved(node, uid, version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Proved(node, uid, version)
}

// BudgetFailures are the nodes whose failures count against --max-failed-reboots now.
func (s *Store) BudgetFailures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.BudgetFailures()
}

// Remembered is what the fleet record holds now: the halted versions and the number of nodes whose
// failures count against --max-failed-reboots.
func (s *Store) Remembered() (halted []string, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Halted(s.cfg.MaxFailedPerVersion), len(s.rec.BudgetFailures())
}

// View is the fleet as admissions must see it: the ConfigMap's switch, plus the failure pause as soon
// as the fleet's memory spends the budget, before it is written.
func (s *Store) View() View {
	sw := s.Switch()
	s.mu.Lock()
	v := View{Switch: sw, rec: s.rec.Clone(), broken: s.recBroken, versBroken: s.versBroken,
		vers: fleetrecord.Versions{Seen: slices.Clone(s.vers.Seen), Halts: slices.Clone(s.vers.Halts)}}
	s.mu.Unlock()
	if max := s.cfg.MaxFailedReboots; max > 0 && !sw.FailuresPaused {
		if failed := v.rec.BudgetFailures(); len(failed) >= max {
			v.FailuresPaused, v.FailuresReason = true, PauseReason(failed)
		}
	}
	return v
}

// View is what admissions read of the fleet: the pause switch and the fleet's memory
// (admission.Switch and admission.Memory).
type View struct {
	fleetswitch.Switch
	rec        fleetrecord.Record
	broken     string
	versBroken string
	vers       fleetrecord.Versions
}

// Holds holds every node while the fleet record cannot be read, then as the switch says.
func (v View) Holds(group string) (bool, string) {
	if v.broken != "" {
		return true, "fleet record unreadable: " + v.broken
	}
	return v.Switch.Holds(group)
}

func (v View) VersionResumedAt(ver string) time.Time { return v.rec.VersionResumedAt(ver) }
func (v View) VersionFirstSeen(ver string) time.Time { return v.vers.FirstSeen(ver) }

// VersionHalt is a person's halt of ver in force (kubectl slipway pause --version, not yet lifted by
// resume --version). While the versions cannot be read every version is held: a halt may be in them.
func (v View) VersionHalt(ver string) (fleetrecord.Halt, bool) {
	if v.versBroken != "" {
		return fleetrecord.Halt{Version: ver, By: "the operator", Why: "the fleet's versions cannot be read (" + v.versBroken + "): a halt may be in them; mend the key"}, true
	}
	return v.vers.HaltOf(ver)
}

// HaltsInForce are the versions a person halted and nobody lifted ("*" while the versions cannot be
// read).
func (v View) HaltsInForce() []string {
	if v.versBroken != "" {
		return []string{"*"}
	}
	return v.vers.InForce()
}
func (v View) VersionFailures(ver string) []time.Time { return v.rec.VersionFailures(ver) }
func (v View) VersionStalls(ver string) []time.Time   { return v.rec.VersionStalls(ver) }
func (v View) VersionProofs(ver string, inCycle func(string) bool) []time.Time {
	return v.rec.VersionProofs(ver, inCycle)
}

// Seed puts cm (the fleet switch's or the record's ConfigMap) in the informers' cache as if it had
// been watched: for tests that drive syncs without running the informers.
func (s *Store) Seed(cm *corev1.ConfigMap) error {
	switch {
	case s.cfg.Namespace == "":
		return fmt.Errorf("no namespace: the store watches nothing")
	case cm.Name == fleetswitch.ConfigMapName:
		return s.switchInf.GetIndexer().Add(cm)
	case cm.Name == fleetrecord.ConfigMapName:
		return s.recordInf.GetIndexer().Add(cm)
	}
	return fmt.Errorf("ConfigMap %s is not watched", cm.Name)
}

// KnownVersions are the versions the fleet's memory names: those with a proof, a failure, a first
// sighting or a halt.
func (v View) KnownVersions() []string {
	seen := map[string]bool{}
	for _, p := range v.rec.Proofs {
		seen[p.Version] = true
	}
	for _, f := range v.rec.Failures {
		seen[f.Version] = true
	}
	for _, s := range v.vers.Seen {
		seen[s.Version] = true
	}
	for _, h := range v.vers.Halts {
		seen[h.Version] = true
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen))
}
