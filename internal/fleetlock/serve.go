package fleetlock

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
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

// Serve starts the central FleetLock server on addr, answering for every enrolled Node: a Node
// informer of its own, synced before the port opens. namespace holds the fleet switch ("" to ignore
// it). It returns once the server listens; it stops with ctx. Its identity check is only the id,
// which anyone who can read a Node's machine ID can compute: run it only where the per-node form
// cannot be (docs/operate.md "FleetLock").
func Serve(ctx context.Context, addr string, client kubernetes.Interface, namespace string, log klog.Logger) (net.Addr, error) {
	return start(ctx, addr, client, namespace, "", log)
}

// ServeNode starts FleetLock for the one Node it runs on, on a loopback address of that node (a
// hostNetwork pod), where only the node's own processes reach it. A request for any other id is
// refused (403 not_this_node) before anything is read or written; its informer holds only that Node.
func ServeNode(ctx context.Context, addr string, client kubernetes.Interface, node, namespace string, log klog.Logger) (net.Addr, error) {
	if node == "" {
		return nil, fmt.Errorf("FleetLock: no node name: the per-node server answers for the node it runs on (--node or $NODE_NAME)")
	}
	if err := LoopbackOnly(addr); err != nil {
		return nil, err
	}
	return start(ctx, addr, client, namespace, node, log)
}

// SyncTimeout bounds the wait for the first list at start: a server that cannot read what it needs
// (no route to the API server, a token RBAC refuses) exits saying so, rather than waiting unready.
var SyncTimeout = 2 * time.Minute

func waitSynced(ctx context.Context, wait func(<-chan struct{}) map[reflect.Type]bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	for _, ok := range wait(ctx.Done()) {
		if !ok {
			return fmt.Errorf("FleetLock: could not read %s within %s (is the API server reachable, and may this ServiceAccount list and watch them? The log above has the API server's answers)", what, SyncTimeout)
		}
	}
	return nil
}

// LoopbackOnly refuses an address other than a loopback IP and port: the per-node server must not
// be reachable from the pod network or other hosts.
func LoopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %v (want 127.0.0.1:PORT)", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: the per-node FleetLock server listens on a loopback IP only (127.0.0.1:PORT or [::1]:PORT), where only this node's Zincati reaches it", addr)
	}
	return nil
}

func start(parent context.Context, addr string, client kubernetes.Interface, namespace, node string, log klog.Logger) (_ net.Addr, err error) {
	// The informers live as long as the server; a start that fails stops what it started.
	ctx, cancel := context.WithCancel(parent)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	opts := []informers.SharedInformerOption{informers.WithTransform(nodes.Strip)}
	if node != "" {
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + node }))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
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
		if err := waitSynced(ctx, cmFactory.WaitForCacheSync, "the fleet switch ConfigMap "+namespace+"/"+fleetswitch.ConfigMapName); err != nil {
			return nil, err
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
	if err := waitSynced(ctx, factory.WaitForCacheSync, "Nodes"); err != nil {
		return nil, err
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
			if err == nil && node != "" {
				// Only this node, whatever the informer holds (its field selector should keep it to
				// this one): any other id is another machine's, or the kubelet has not reported this
				// one's machine ID yet. Nothing is written for it.
				out = slices.DeleteFunc(out, func(n *corev1.Node) bool { return n.Name != node })
				if len(out) == 0 {
					return nil, &Error{Status: http.StatusForbidden, Kind: KindNotThisNode,
						Value: fmt.Sprintf("this FleetLock server answers only for node %s, and id %s is not its Zincati id (from the machine ID its kubelet reports)", node, id)}
				}
			}
			return out, err
		},
		RebootGrace: 10 * time.Minute,
		Switch:      switchCM,
	}
	httpserve.Serve(ctx, ln, Handler(backend, log), log)
	if node != "" {
		log.Info("serving FleetLock for this node only (POST /v1/pre-reboot, /v1/steady-state)", "address", ln.Addr().String(), "node", node)
	} else {
		log.Info("serving FleetLock for every enrolled node (POST /v1/pre-reboot, /v1/steady-state)", "address", ln.Addr().String())
	}
	return ln.Addr(), nil
}
