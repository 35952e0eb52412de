package fleetlock

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/httpserve"
	"github.com/slipway-dev/slipway/internal/nodes"
)

// Serve starts the FleetLock server on addr: a Node informer of its own (every operator replica
// answers Zincati, leader or not: it only writes the agent's keys, the leader does the rest), synced
// before the port opens. It returns once the server listens; it stops with ctx.
func Serve(ctx context.Context, addr string, client kubernetes.Interface, log klog.Logger) (net.Addr, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(nodes.Strip))
	lister := factory.Core().V1().Nodes().Lister()
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
		Client:      client,
		List:        func() ([]*corev1.Node, error) { return lister.List(labels.Everything()) },
		RebootGrace: 10 * time.Minute,
	}
	httpserve.Serve(ctx, ln, Handler(backend, log), log)
	log.Info("serving FleetLock (POST /v1/pre-reboot, /v1/steady-state)", "address", ln.Addr().String())
	return ln.Addr(), nil
}
