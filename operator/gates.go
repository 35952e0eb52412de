package operator

import (
	"context"
	"errors"
	"sync"

	"github.com/slipway-dev/slipway/internal/onchange"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
)

// gates are the roll-out gates' cluster-wide informers, from one factory: the PodDisruptionBudgets of
// --settle-pdbs (settle.go) and the VolumeAttachments of --wait-for-volume-detach (volumes.go). Each
// is made only when its flag is on; Run waits for them, each with what to check when it never syncs.
type gates struct {
	cfg     Config
	factory informers.SharedInformerFactory // nil when no gate is on
	synced  []gateInformer
	pdbs    policylisters.PodDisruptionBudgetLister // nil when --settle-pdbs is off
	volumes cache.SharedIndexInformer               // nil when --wait-for-volume-detach is off
	// settleTimeouts: node -> the cycle (last-reboot-time) whose settle timeout was reported.
	settleTimeouts sync.Map
}

// gateInformer is an informer Run waits for, and what to say when it never syncs.
type gateInformer struct {
	inf      cache.SharedIndexInformer
	unsynced string
}

// newGates makes the gates cfg's flags turn on: a VolumeAttachment change looks at the node it names
// again (look), a PDB change at the nodes settling now.
func newGates(cfg Config, look func(node string), settling func() []string) (*gates, error) {
	g := &gates{cfg: cfg}
	if cfg.Drain.WaitForVolumeDetach || cfg.Settle.PDBs {
		g.factory = informers.NewSharedInformerFactory(cfg.Client, 0)
	}
	if cfg.Drain.WaitForVolumeDetach {
		g.volumes = g.factory.Storage().V1().VolumeAttachments().Informer()
		if err := g.volumes.AddIndexers(cache.Indexers{byNode: vaByNode}); err != nil {
			return nil, err
		}
		touch := func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
				look(va.Spec.NodeName)
			}
		}
		if _, err := g.volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: touch, UpdateFunc: func(_, o interface{}) { touch(o) }, DeleteFunc: touch}); err != nil {
			return nil, err
		}
		g.synced = append(g.synced, gateInformer{g.volumes, "VolumeAttachment informer never synced: check the operator's RBAC (list/watch volumeattachments), or turn --wait-for-volume-detach off"})
	}
	if cfg.Settle.PDBs { // the flags' say whether PDBs are watched: a pool may only use them then (policy.CompilePool)
		pdbs := g.factory.Policy().V1().PodDisruptionBudgets()
		g.pdbs = pdbs.Lister()
		// A PDB recovering ends the settling of the nodes whose drain consumed it.
		if _, err := pdbs.Informer().AddEventHandler(onchange.Any(func() {
			for _, name := range settling() {
				look(name)
			}
		})); err != nil {
			return nil, err
		}
		g.synced = append(g.synced, gateInformer{pdbs.Informer(), "PodDisruptionBudget informer never synced: check the operator's RBAC (list/watch poddisruptionbudgets), or turn --settle-pdbs off"})
	}
	return g, nil
}

// start starts the gates' informers and waits for them.
func (g *gates) start(ctx context.Context) error {
	if g.factory == nil {
		return nil
	}
	g.factory.Start(ctx.Done())
	for _, s := range g.synced {
		if !cache.WaitForCacheSync(ctx.Done(), s.inf.HasSynced) {
			return errors.New(s.unsynced)
		}
	}
	return nil
}

func (g *gates) shutdown() {
	if g.factory != nil {
		g.factory.Shutdown()
	}
}

// forget drops what the gates remember of a deleted node.
func (g *gates) forget(node string) { g.settleTimeouts.Delete(node) }

// attachedAny reports whether any VolumeAttachment names node (or the index cannot tell): the drainer
// reads the pods' volumes only then. Only called with --wait-for-volume-detach on.
func (g *gates) attachedAny(node string) bool {
	objs, err := g.volumes.GetIndexer().ByIndex(byNode, node)
	return err != nil || len(objs) > 0
}
