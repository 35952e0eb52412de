package fleetlock

import (
	"context"
	"fmt"
	"net"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/httpserve"
	"github.com/slipway-dev/slipway/internal/nodes"
)

const zincatiIndex = "zincati-id"

// indexByZincatiID indexes a Node by the id Zincati on it sends; nodes without a machine ID have none.
func indexByZincatiID(obj interface{}) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	id, err := NodeID(n.Status.NodeInfo.MachineID)
	if err != nil {
		return nil, nil
	}
	return []string{id}, nil
}

// Serve starts the FleetLock server on addr: a Node informer of its own (every operator replica
// answers Zincati, leader or not: it only writes the agent's keys, the leader does the rest), synced
// before the port opens. namespace holds the fleet switch ("" to ignore it). It returns once the
// server listens; it stops with ctx.
func Serve(ctx context.Context, addr string, client kubernetes.Interface, namespace string, log klog.Logger) (net.Addr, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(nodes.Strip))
	informer := factory.Core().V1().Nodes().Informer()
	if err := informer.AddIndexers(cache.Indexers{zincatiIndex: indexByZincatiID}); err != nil {
		return nil, err
	}
	var switchCM func() *corev1.ConfigMap
	if namespace != "" {
		cmFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + fleetswitch.ConfigMapName }))
		lister := cmFactory.Core().V1().ConfigMaps().Lister()
		cmFactory.Core().V1().ConfigMaps().Informer()
		cmFactory.Start(ctx.Done())
		for typ, ok := range cmFactory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return nil, fmt.Errorf("FleetLock: %v cache did not sync", typ)
			}
		}
		switchCM = func() *corev1.ConfigMap {
			cm, err := lister.ConfigMaps(namespace).Get(fleetswitch.ConfigMapName)
			if err != nil {
				return nil
			}
			return cm
		}
	}
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	for typ, ok := range synced {
		if !ok {
			return nil, fmt.Errorf("FleetLock: %v cache did not sync", typ)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	backend := &Nodes{
		Client: client,
		ByID: func(id string) ([]*corev1.Node, error) {
			objs, err := informer.GetIndexer().ByIndex(zincatiIndex, id)
			out := make([]*corev1.Node, 0, len(objs))
			for _, o := range objs {
				out = append(out, o.(*corev1.Node))
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			return out, err
		},
		RebootGrace: 10 * time.Minute,
		Switch:      switchCM,
	}
	httpserve.Serve(ctx, ln, Handler(backend, log), log)
	log.Info("serving FleetLock (POST /v1/pre-reboot, /v1/steady-state)", "address", ln.Addr().String())
	return ln.Addr(), nil
}
