package policies

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/onchange"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/health"
	"github.com/slipway-dev/slipway/operator/policy"
)

// Blockers builds the blockers of the flags' policy and of every pool: the one place they are made,
// over one REST mapper (health checks) and one pod informer (pod selectors), each made on first use.
type Blockers struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface // nil: health checks are refused
	Log     klog.Logger
	// Nodes lists the Nodes as the node controller sees them (--min-ready-nodes).
	Nodes func() []*corev1.Node
	// WaitsUnder is the policy a waiting node waits under (the steering-label blocker reads its steering).
	WaitsUnder func(n *corev1.Node) *policy.Policy
	// OnChange: a blocker's objects changed (a pod); waiting nodes should be looked at again.
	OnChange func()

	mapperOnce sync.Once
	mapper     meta.ResettableRESTMapper
	podsMu     sync.Mutex
	pods       cache.SharedIndexInformer
	ctx        context.Context // Start's: a pod informer made later runs under it
}

// Flags are the blockers of the flags' policy p: its alerts, health checks, pod selectors on the node
// and in the cluster, --min-ready-nodes, and the steering-label conflict, in that order.
func (b *Blockers) Flags(p *policy.Policy) ([]admission.Blocker, error) {
	var bs []admission.Blocker
	if p.Alerts != nil {
		bs = append(bs, p.Alerts)
	}
	if len(p.HealthChecks) > 0 {
		h, err := b.health(p.HealthChecks)
		if err != nil {
			return nil, err
		}
		bs = append(bs, h)
	}
	for _, sel := range []struct {
		on []string
		mk func(blocker.PodSource, []string) (*blocker.Pods, error)
	}{{p.PodsOnNode, blocker.NewPodsOnNode}, {p.PodsInCluster, blocker.NewPodsInCluster}} {
		if len(sel.on) == 0 {
			continue
		}
		pb, err := sel.mk(b.podInformer(), sel.on)
		if err != nil {
			return nil, fmt.Errorf("blocking-pod-selector: %w", err)
		}
		bs = append(bs, pb)
	}
	if p.MinReady != nil {
		hooks := p.Hooks
		mr, err := blocker.NewMinReady(*p.MinReady, func() ([]*corev1.Node, error) { return b.Nodes(), nil },
			func(n *corev1.Node) bool { return protocol.Observe(n, hooks).Unavailable() })
		if err != nil {
			return nil, err
		}
		bs = append(bs, mr)
	}
	if len(p.Steer.Pre) > 0 {
		bs = append(bs, b.steeringConflict())
	}
	return bs, nil
}

// Pool are pool p's own blockers: its health checks, the steering-label conflict and its blocking
// pod selectors (until the pod informer has synced they hold the pool's nodes).
func (b *Blockers) Pool(p *policy.Pool) ([]admission.Blocker, error) {
	var bs []admission.Blocker
	if len(p.HealthChecks) > 0 {
		h, err := b.health(p.HealthChecks)
		if err != nil {
			return nil, fmt.Errorf("healthChecks: %w", err)
		}
		bs = append(bs, h)
	}
	if p.Policy != nil && len(p.Policy.Steer.Pre) > 0 {
		bs = append(bs, b.steeringConflict())
	}
	if len(p.PodSelectors) > 0 {
		pb, err := blocker.NewPodsOnNode(b.podInformer(), p.PodSelectors)
		if err != nil {
			return nil, fmt.Errorf("blockingPodSelectors: %w", err)
		}
		bs = append(bs, pb)
	}
	return bs, nil
}

func (b *Blockers) health(checks []*health.Check) (admission.Blocker, error) {
	if b.Dynamic == nil {
		return nil, fmt.Errorf("health checks need a dynamic client, and the operator has none")
	}
	b.mapperOnce.Do(func() {
		b.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Client.Discovery()))
	})
	return &health.Blocker{Checks: checks, Client: b.Dynamic, Mapper: b.mapper, Log: b.Log}, nil
}

// steeringConflict holds a node whose pre-reboot labels would change a label Slipway did not set
// (steer.Config.Conflict) rather than clobber it, under the labels of the policy it waits under (its
// RebootPolicy's steering, or the flags').
func (b *Blockers) steeringConflict() admission.Blocker {
	return admission.Func{N: string(admission.KindSteeringLabel), F: func(_ context.Context, n *corev1.Node) (bool, string) {
		why := b.WaitsUnder(n).Steer.Conflict(n)
		return why != "", why
	}}
}

// podInformer is the pod blockers' one informer, made on first use and watched for changes; one made
// before Start runs from Start, one made later at once.
func (b *Blockers) podInformer() blocker.PodSource {
	b.podsMu.Lock()
	defer b.podsMu.Unlock()
	if b.pods == nil {
		b.pods = blocker.NewPodInformer(b.Client)
		_, _ = b.pods.AddEventHandler(onchange.Any(b.OnChange))
		if b.ctx != nil {
			go b.pods.Run(b.ctx.Done())
		}
	}
	return b.pods
}

// Start runs the pod informer when the flags' blockers made one and waits for it: the first
// admission sees every pod. A pool's made later runs under ctx from then on.
func (b *Blockers) Start(ctx context.Context) error {
	b.podsMu.Lock()
	b.ctx = ctx
	pods := b.pods
	b.podsMu.Unlock()
	if pods == nil {
		return nil
	}
	go pods.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return fmt.Errorf("the pod informer of the blockers never synced: check the operator's RBAC (list/watch pods)")
	}
	return nil
}
