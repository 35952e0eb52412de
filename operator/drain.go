package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/drain"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/policy"
)

// The drain's configuration is part of the policy (package policy); these names are kept for the
// package's callers.
type (
	DrainPolicy = policy.DrainPolicy
	DrainConfig = policy.DrainConfig
)

const (
	DrainRetry               = policy.DrainRetry
	DrainSkip                = policy.DrainSkip
	DrainForce               = policy.DrainForce
	DefaultSkipWaitForDelete = policy.DefaultSkipWaitForDelete
)

// drainResult is the outcome of the last drain attempt of one cycle of one node.
type drainResult struct {
	cycle    string // value of the drain-started annotation the attempt belonged to
	err      error
	at       time.Time
	failures int  // failed attempts in this cycle so far
	reported bool // the failure is on the Node already
	// waitingSince: the attempt's wait for volume detach was announced (its at); zero not yet.
	waitingSince time.Time
	// staying: the PersistentVolumes that pods still on the node after a successful attempt use
	// (--wait-for-volume-detach only). They stay attached through the reboot, so the wait for volume
	// detach does not wait for them.
	staying map[string]bool
	// pdbs: the settle-pdbs value (settle.go) read from the pods the cycle's first attempt listed,
	// before it evicted any; the grant writes it. pdbsRead: it was read (later attempts keep it: by
	// then the first one's evictions have consumed the budgets).
	pdbs     string
	pdbsRead bool
}

// drainer runs drains in the background, at most one per node, through kubectl's drain package: the
// Eviction API, PDBs respected, DaemonSet and mirror pods skipped. Results wait in memory until the
// controller picks them up; losing them on restart only means draining again, which is idempotent
// (but for the settle-pdbs snapshot: the drain again finds the pods already evicted, so that cycle
// settles on time alone).
type drainer struct {
	client kubernetes.Interface
	cfg    DrainConfig
	log    klog.Logger
	done   func(node string) // called when an attempt ends
	// attached reports whether any VolumeAttachment names node (nil: assume so). Without one there is
	// nothing to wait for, and no need to read the pods that stay.
	attached func(node string) bool
	// pdbs is the settle-pdbs value of the pods a drain is about to evict (settle.go), asked before
	// the first eviction of a cycle when the node's policy settles on PDBs.
	pdbs    func(node string, pods []corev1.Pod) string
	mu      sync.Mutex
	running map[string]context.CancelFunc
	results map[string]*drainResult
}

func newDrainer(c kubernetes.Interface, cfg DrainConfig, log klog.Logger, done func(string)) *drainer {
	return &drainer{client: c, cfg: cfg, log: log, done: done, running: map[string]context.CancelFunc{}, results: map[string]*drainResult{}}
}

// start begins an attempt for node in cycle unless one is running. It reports whether it started one.
// notReady: the node's kubelet is not Ready (pods deleted on it will not finish terminating).
// cfg: the node's policy's drain (its pool's timeout, grace period, pod selector); settlePDBs: its
// policy settles on PDBs (the attempt reads what they allow before it evicts).
func (d *drainer) start(ctx context.Context, node, cycle string, notReady bool, cfg DrainConfig, settlePDBs bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.running[node]; ok {
		return false
	}
	prev := drainResult{}
	if r, ok := d.results[node]; ok && r.cycle == cycle {
		prev = *r
	}
	delete(d.results, node)
	ctx, cancel := context.WithCancel(ctx)
	d.running[node] = cancel
	go func() {
		r := &drainResult{cycle: cycle, failures: prev.failures, pdbs: prev.pdbs, pdbsRead: prev.pdbsRead || !settlePDBs || d.pdbs == nil}
		staying, err := d.drain(ctx, node, notReady, cfg, r)
		cancelled := ctx.Err() != nil
		cancel()
		if cancelled {
			// forget() or shutdown: nobody waits for this attempt any more.
			return
		}
		r.err, r.at, r.staying = err, time.Now(), staying
		if err != nil {
			r.failures++
		}
		d.mu.Lock()
		delete(d.running, node)
		d.results[node] = r
		d.mu.Unlock()
		d.done(node)
	}()
	return true
}

// result returns the last finished attempt for node in cycle, if any.
func (d *drainer) result(node, cycle string) (drainResult, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.results[node]
	if !ok || r.cycle != cycle {
		return drainResult{}, false
	}
	return *r, true
}

// fail turns node's last successful attempt in cycle into a failed one (the wait after it failed).
func (d *drainer) fail(node, cycle string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.results[node]; ok && r.cycle == cycle && r.err == nil {
		r.err, r.reported = err, false
		r.failures++
		r.at = time.Now()
	}
}

// noteWaiting records that the wait for volume detach after the attempt finished at `at` was
// announced; it reports whether this is the first time.
func (d *drainer) noteWaiting(node, cycle string, at time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.results[node]
	if !ok || r.cycle != cycle || r.waitingSince.Equal(at) {
		return false
	}
	r.waitingSince = at
	return true
}

// markReported notes that the failure of the last attempt is on the Node.
func (d *drainer) markReported(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.results[node]; ok {
		r.reported = true
	}
}

// retryAt is when the next attempt after a failed one may start: exponential backoff per cycle.
func (d *drainer) retryAt(r drainResult) time.Time {
	delay := d.cfg.RetryBase
	for i := 1; i < r.failures && delay < d.cfg.RetryMax; i++ {
		delay *= 2
	}
	if delay > d.cfg.RetryMax {
		delay = d.cfg.RetryMax
	}
	return r.at.Add(delay)
}

// forget cancels a running attempt and drops results (the cycle ended).
func (d *drainer) forget(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cancel, ok := d.running[node]; ok {
		cancel()
		delete(d.running, node)
	}
	delete(d.results, node)
}

// drain evicts node's pods; with --wait-for-volume-detach it then returns the PersistentVolumes the
// pods left on the node use (staying). Before the first eviction it reads the settle-pdbs value of
// the pods it evicts into r, unless r has it: one pod LIST serves the drain and the snapshot.
func (d *drainer) drain(ctx context.Context, node string, notReady bool, cfg DrainConfig, r *drainResult) (staying map[string]bool, err error) {
	log := d.log.WithValues("node", node)
	var out logWriter
	out.log = log
	grace := -1
	if cfg.GracePeriod >= 0 {
		grace = int(cfg.GracePeriod / time.Second)
	}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              d.client,
		Force:               d.cfg.Force,
		GracePeriodSeconds:  grace,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		Timeout:             cfg.Timeout,
		PodSelector:         cfg.PodSelector,
		Out:                 &out,
		ErrOut:              &out,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, usingEviction bool, err error) {
			if err != nil {
				log.Info("pod not evicted", "pod", klog.KObj(pod), "error", err.Error())
				return
			}
			log.Info("pod evicted", "pod", klog.KObj(pod))
		},
	}
	if skip := d.skipWaitForDelete(notReady); skip > 0 {
		h.SkipWaitForDeleteTimeoutSeconds = max(int(skip/time.Second), 1)
		log.Info("pods deleted longer ago than the bound are taken as gone", "bound", skip.String(), "nodeReady", !notReady)
	}
	list, errs := h.GetPodsForDeletion(node)
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("listing pods to evict: %s", strings.Join(msgs, "; "))
	}
	if w := list.Warnings(); w != "" {
		log.Info("drain warnings", "warnings", w)
	}
	pods := list.Pods()
	if !r.pdbsRead {
		r.pdbs, r.pdbsRead = d.pdbs(node, pods), true
	}
	if len(pods) > 0 {
		log.Info("evicting pods", "count", len(pods))
		if err := h.DeleteOrEvictPods(pods); err != nil {
			return nil, fmt.Errorf("evicting pods: %w", err)
		}
	}
	if !d.cfg.WaitForVolumeDetach || d.attached != nil && !d.attached(node) {
		return nil, nil
	}
	staying, err = stayingVolumes(ctx, d.client, node)
	if err != nil {
		return nil, fmt.Errorf("finding the volumes of the pods that stay on the node: %w", err)
	}
	return staying, nil
}

// skipWaitForDelete is the bound after which a deleted pod is taken as gone (0: wait for it): kured's
// bound on every node, and on a NotReady node the NotReady bound too, whichever is shorter.
func (d *drainer) skipWaitForDelete(notReady bool) time.Duration {
	skip := d.cfg.SkipWaitForDeleteAll
	if notReady {
		nr := d.cfg.SkipWaitForDelete
		if nr <= 0 {
			nr = DefaultSkipWaitForDelete
		}
		if skip <= 0 || nr < skip {
			skip = nr
		}
	}
	return skip
}

// logWriter turns kubectl drain's progress lines into structured log lines.
type logWriter struct{ log klog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(string(p)); s != "" {
		w.log.V(1).Info("drain", "message", s)
	}
	return len(p), nil
}

// drain starts or follows a drain attempt of the node's current cycle (the one place besides the
// view that reads the drain result: right before it may start another attempt). A failed attempt is reported
// once on the Node (drain-error annotation + Event) and retried after a per-node exponential backoff.
func (c *Controller) drain(ctx context.Context, v view, log klog.Logger) (time.Duration, error) {
	n := v.n
	cycle := n.Annotations[protocol.DrainStarted]
	// Read again right before a new attempt may start: an attempt that failed since the sync's view
	// was gathered (its writes take round trips) is reported and backed off, never overwritten.
	if r, ok := c.drains.result(n.Name, cycle); ok && r.err != nil {
		if !r.reported {
			var p nodes.Patch
			msg := fmt.Sprintf("%s: attempt %d: %v", r.at.UTC().Format(time.RFC3339), r.failures, r.err)
			p.SetAnnotation(n, protocol.DrainError, truncate(msg, 1024))
			if _, err := c.apply(ctx, &p, n); err != nil {
				return 0, err
			}
			c.drains.markReported(n.Name)
			c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "DrainFailed", "drain attempt %d failed, no reboot-ok; will retry: %v", r.failures, r.err)
			log.Info("drain failed; not granting reboot-ok, will retry", "attempt", r.failures, "error", r.err.Error())
			if c.cfg.Metrics != nil {
				c.cfg.Metrics.drainFails.Inc()
			}
		}
		// The drainer dates its attempts by the wall clock (the controller's may be the API server's).
		if wait := time.Until(c.drains.retryAt(r)); wait > 0 {
			return wait, nil
		}
	}
	pol := v.pol
	if c.drains.start(ctx, n.Name, cycle, !protocol.NodeReady(n), pol.Drain, pol.Settle.PDBs) {
		dc := pol.Drain
		log.Info("draining", "timeout", dc.Timeout.String(), "podSelector", dc.PodSelector)
	}
	return 0, nil
}
