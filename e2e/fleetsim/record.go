package fleetsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/slipway-dev/slipway/internal/testsupport/referee"
)

// Recorder is the benchmark's own view of the fleet, from its own Node watch (not the simulator's):
// how many nodes are unavailable or in their cycle at each instant and the peak, when each node of
// the roll under way got reboot-ok, and when it was done. What counts as unavailable is the chaos
// referee's definition (referee.Unavailable: reboot-ok, Slipway's cordon mark, unschedulable, not
// Ready, reboot-in-progress), which shares no code with the operator it judges.
type Recorder struct {
	mu          sync.Mutex
	unavailable map[string]bool
	count, peak int
	ready       int // nodes Ready with a boot ID
	seen        map[string]bool
	roll        map[string]*Track
	done        int
	lastDone    time.Time
}

// Track is one node of a roll as the Recorder saw it.
type Track struct {
	OKAt    time.Time // first reboot-ok=true
	OKCount int       // transitions of reboot-ok to true (one per cycle)
	// UnavailableAtOK: nodes unavailable, this one included, as reboot-ok first turned true.
	UnavailableAtOK int
	DoneAt          time.Time // reboot-ok no longer true, reboot-needed not true, available again, after OKAt
	ok              bool
}

// NewRecorder starts the Recorder's informer on its own client and waits for its first list.
func NewRecorder(ctx context.Context, c kubernetes.Interface) (*Recorder, error) {
	r := &Recorder{unavailable: map[string]bool{}, seen: map[string]bool{}, roll: map[string]*Track{}}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTransform(func(obj interface{}) (interface{}, error) {
		if n, ok := obj.(*corev1.Node); ok {
			n.ManagedFields = nil
		}
		return obj, nil
	}))
	inf := f.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { r.observe(obj) },
		UpdateFunc: func(_, obj interface{}) { r.observe(obj) },
		DeleteFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok {
				r.forget(n.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the recorder's Node informer never synced")
	}
	return r, nil
}

func (r *Recorder) observe(obj interface{}) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	un := len(referee.Unavailable(n)) > 0
	okTrue := n.Annotations[referee.KeyRebootOK] == "true"
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[n.Name] && n.Status.NodeInfo.BootID != "" && !un {
		r.seen[n.Name] = true
		r.ready++
	}
	if was := r.unavailable[n.Name]; was != un {
		r.unavailable[n.Name] = un
		if un {
			r.count++
		} else {
			r.count--
		}
		if r.count > r.peak {
			r.peak = r.count
		}
	}
	t := r.roll[n.Name]
	if t == nil {
		return
	}
	if okTrue && !t.ok {
		t.OKCount++
		if t.OKAt.IsZero() {
			t.OKAt, t.UnavailableAtOK = now, r.count
		}
	}
	t.ok = okTrue
	if t.DoneAt.IsZero() && t.OKCount > 0 && !okTrue && !un && n.Annotations[referee.KeyRebootNeeded] != "true" {
		t.DoneAt = now
		r.done++
		r.lastDone = now
	}
}

func (r *Recorder) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unavailable[name] {
		r.count--
	}
	delete(r.unavailable, name)
}

// Ready is how many nodes the recorder has seen Ready and available with a boot ID.
func (r *Recorder) Ready() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

// StartRoll tracks names from now on and restarts the peak from the nodes unavailable now.
func (r *Recorder) StartRoll(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll = map[string]*Track{}
	for _, n := range names {
		r.roll[n] = &Track{}
	}
	r.peak, r.done, r.lastDone = r.count, 0, time.Time{}
}

// Progress is the roll so far: nodes granted at least once, nodes done, unavailable now, the peak.
func (r *Recorder) Progress() (granted, done, unavailable, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.roll {
		if t.OKCount > 0 {
			granted++
		}
	}
	return granted, r.done, r.count, r.peak
}

// Roll is the tracks of the roll and when its last node was done.
func (r *Recorder) Roll() (map[string]Track, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Track, len(r.roll))
	for k, v := range r.roll {
		out[k] = *v
	}
	return out, r.lastDone
}

// Unavailable is how many nodes are unavailable now.
func (r *Recorder) Unavailable() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}
