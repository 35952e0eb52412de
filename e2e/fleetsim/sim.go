// Package fleetsim is the fleet benchmark's simulator: thousands of Flatcar nodes in one process, each
// playing the node side of FLUO's protocol exactly as Slipway's update-agent writes it (and a kubelet's
// Node registration and boot ID), against a real API server, while a real update-operator process
// rolls reboots over them. Bench runs the whole measurement (rolling reboot, signal→reboot-ok latency,
// API requests per cycle, idle writes, the operator's memory and profiles); e2e/cmd/fleetbench prints it.
//
// Why one process and not one agent per node, and not kwok: simnode (a dbus-daemon, stand-ins and a
// real agent per node) costs a process and a field-selected watch per node, which stops at a few
// hundred nodes on 2 cores; kwok needs container images (no registry here) and would still simulate
// only the kubelet, so the agent protocol would again need one agent per node. Here every node is a
// few fields of memory and a timer: one Node informer (one watch stream, each event decoded once)
// feeds a workqueue, a few workers play the agent's table (protocol.NodeDecide) for the nodes that
// changed, and writes are the agent's own minimal merge patches through one high-QPS client. Idle
// nodes cost nothing, so 5,000 fit beside etcd, kube-apiserver and the operator on 2 cores, and what
// the measurement sees is the operator and the API server, not the simulator.
//
// What is simulated is only what a machine does: update_engine staging an update (Signal) and the
// reboot itself (the node is "down" for RebootDelay, then the kubelet reports a new
// status.nodeInfo.bootID and the agent starts again in the new boot). The Node keeps Ready=True with
// the old boot ID while down, as a real node does during a short reboot (the node controller's grace
// period is longer); proof of the reboot is the boot ID. No kubelet heartbeats or node Leases are
// written: the operator reads neither, and their load is not what this benchmark measures.
package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// SimConfig configures a Sim.
type SimConfig struct {
	// Rest is the API server's admin config; the simulator raises its QPS and counts its requests.
	Rest *rest.Config
	// Prefix names the nodes: <prefix>-00000 ...
	Prefix string
	// RebootDelay is how long a simulated machine is down.
	RebootDelay time.Duration
	// Workers play the agent for changed nodes (default 32).
	Workers int
	// Logf receives one line per node event (nil: none).
	Logf func(format string, args ...interface{})
	// Pools > 0 labels node i PoolLabel=p<i mod Pools> (the bench's RebootPolicies select on it).
	Pools int
}

// PoolLabel is the node label the bench's RebootPolicies select on.
const PoolLabel = "fleetsim.slipway.dev/pool"

// Sim is a fleet of simulated nodes.
type Sim struct {
	cfg     SimConfig
	client  kubernetes.Interface
	Counter *Counter // every request the simulator sent
	queue   workqueue.TypedRateLimitingInterface[string]
	store   cache.Store
	overlay *nodes.Overlay
	ctx     context.Context

	mu    sync.RWMutex
	nodes map[string]*simNode
	names []string

	reboots atomic.Int64
}

// simNode is what one simulated machine knows: update_engine's status, its boot, and the agent's few
// fields of memory (the same as Slipway's agent keeps, see agent.Agent).
type simNode struct {
	mu   sync.Mutex
	name string
	idx  int // its number among the simulated nodes
	boot int
	// version is the OS version running; staged the one update_engine downloaded ("" when none).
	version, staged string
	status          updateengine.Status

	// The agent's memory, reset at every boot.
	needed     bool
	inProgress bool
	sawNoGrant bool
	newBoot    bool
	reported   bool

	down     bool // rebooting: no agent runs, nothing is written
	reboots  int
	signalAt time.Time
	// held: a reboot does not end before Release (Hold); overdue: RebootDelay passed while held.
	held, overdue bool
}

func (n *simNode) bootID() string { return fmt.Sprintf("%s-boot-%d", n.name, n.boot) }

// NewSim builds the simulator's client (QPS high enough never to throttle it; protobuf, which costs
// the API server and this process less than JSON) with a request counter.
func NewSim(cfg SimConfig) (*Sim, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "sim"
	}
	s := &Sim{cfg: cfg, Counter: &Counter{}, overlay: nodes.NewOverlay(), nodes: map[string]*simNode{}}
	rc := s.Counter.Config(cfg.Rest)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	s.client = c
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "fleetsim"})
	return s, nil
}

func (s *Sim) logf(format string, args ...interface{}) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// Start runs the Node informer and the workers until ctx ends.
func (s *Sim) Start(ctx context.Context) error {
	s.ctx = ctx
	f := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTransform(nodes.Strip))
	inf := f.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.observed,
		UpdateFunc: func(_, obj interface{}) { s.observed(obj) },
	})
	if err != nil {
		return err
	}
	s.store = inf.GetStore()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the simulator's Node informer never synced")
	}
	for i := 0; i < s.cfg.Workers; i++ {
		go s.work()
	}
	go func() { <-ctx.Done(); s.queue.ShutDown() }()
	return nil
}

func (s *Sim) observed(obj interface{}) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.overlay.Observed(n)
	if s.node(n.Name) != nil {
		s.queue.Add(n.Name)
	}
}

func (s *Sim) node(name string) *simNode {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes[name]
}

// Names are the simulated nodes, in creation order.
func (s *Sim) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string(nil), s.names...)
}

// Reboots is how often the node rebooted; Total how many reboots the fleet completed.
func (s *Sim) Reboots(name string) int {
	n := s.node(name)
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reboots
}

// TotalReboots is how many reboots the whole fleet completed.
func (s *Sim) TotalReboots() int64 { return s.reboots.Load() }

// SignalledAt is when update_engine last said UPDATED_NEED_REBOOT on the node.
func (s *Sim) SignalledAt(name string) time.Time {
	n := s.node(name)
	if n == nil {
		return time.Time{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.signalAt
}

// CreateNodes registers count nodes, `parallel` at a time, as kubelets do: one create with the node's
// status (Ready, a boot ID, node info). The agents then report through the informer, as a DaemonSet's
// pods start after the node is registered. progress is called with the number created so far.
func (s *Sim) CreateNodes(ctx context.Context, count, parallel int, progress func(int)) error {
	s.mu.Lock()
	start := len(s.names)
	var todo []*simNode
	for i := start; i < start+count; i++ {
		n := &simNode{name: fmt.Sprintf("%s-%05d", s.cfg.Prefix, i), idx: i, version: "4459.2.1", newBoot: true,
			status: updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0", LastCheckedTime: time.Now().Unix()}}
		s.nodes[n.name] = n
		s.names = append(s.names, n.name)
		todo = append(todo, n)
	}
	s.mu.Unlock()
	work := make(chan *simNode)
	errs := make(chan error, parallel)
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := s.register(ctx, n); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				if d := done.Add(1); progress != nil {
					progress(int(d))
				}
			}
		}()
	}
	for _, n := range todo {
		select {
		case work <- n:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		case <-ctx.Done():
			close(work)
			wg.Wait()
			return ctx.Err()
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return nil
}

// register is the kubelet's registration: the Node with its status in one create (the API server
// keeps a Node's status on create). A node left over from an earlier run is an error: its boot ID
// would not match.
func (s *Sim) register(ctx context.Context, n *simNode) error {
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", Message: "fleetsim kubelet", LastHeartbeatTime: now, LastTransitionTime: now}},
			NodeInfo: corev1.NodeSystemInfo{BootID: n.bootID(), OSImage: "Flatcar Container Linux by Kinvolk " + n.version,
				KubeletVersion: "v1.35.4", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	if s.cfg.Pools > 0 {
		node.Labels[PoolLabel] = fmt.Sprintf("p%d", n.idx%s.cfg.Pools)
	}
	out, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("registering %s: %w", n.name, err)
	}
	if out.Status.NodeInfo.BootID != n.bootID() {
		// An API server that drops status on create: report it through the status subresource.
		if err := s.reportBoot(ctx, n.name, n.bootID()); err != nil {
			return err
		}
	}
	return nil
}

// reportBoot is the kubelet reporting the boot it runs in: Ready and status.nodeInfo.bootID, one
// strategic merge patch of the status subresource (conditions merge by type).
func (s *Sim) reportBoot(ctx context.Context, name, bootID string) error {
	body, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{
		"conditions": []map[string]interface{}{{"type": "Ready", "status": "True", "reason": "KubeletReady",
			"message": "fleetsim kubelet", "lastHeartbeatTime": time.Now().UTC().Format(time.RFC3339)}},
		"nodeInfo": map[string]interface{}{"bootID": bootID},
	}})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// Signal is update_engine finishing an update (what `locksmithctl send-need-reboot` announces): the
// node's agent hears UPDATED_NEED_REBOOT and asks for a reboot.
func (s *Sim) Signal(name string) error {
	n := s.node(name)
	if n == nil {
		return fmt.Errorf("no simulated node %s", name)
	}
	n.mu.Lock()
	n.staged = nextVersion(n.version)
	n.status = updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: n.staged, LastCheckedTime: time.Now().Unix()}
	n.needed = true
	n.signalAt = time.Now()
	n.mu.Unlock()
	s.queue.Add(name)
	return nil
}

func nextVersion(v string) string {
	major, rest, _ := strings.Cut(v, ".")
	m, err := strconv.Atoi(major)
	if err != nil {
		return v + "-next"
	}
	return fmt.Sprintf("%d.%s", m+1, rest)
}

func (s *Sim) work() {
	for {
		name, quit := s.queue.Get()
		if quit {
			return
		}
		if err := s.sync(name); err != nil {
			if s.ctx.Err() == nil {
				s.logf("%s: agent write failed, retrying: %v", name, err)
				s.queue.AddRateLimited(name)
			}
		} else {
			s.queue.Forget(name)
		}
		s.queue.Done(name)
	}
}

func (s *Sim) view(name string) *corev1.Node {
	obj, ok, err := s.store.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return s.overlay.View(n)
}

// sync is one pass of the agent on one node, as agent.Agent.sync does it: decide with the node-side
// table, write only the agent's keys that differ, reboot when granted in this boot.
func (s *Sim) sync(name string) error {
	sn := s.node(name)
	if sn == nil {
		return nil
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.down {
		return nil // no agent runs while the machine reboots
	}
	n := s.view(name)
	if n == nil {
		return nil // not registered yet (or the informer has not seen it)
	}
	bootID := sn.bootID()
	if !protocol.IsTrue(n.Annotations, protocol.RebootOK) {
		sn.sawNoGrant = true
	}
	if sn.reported && protocol.IsTrue(n.Annotations, protocol.RebootNeeded) && !sn.needed {
		sn.needed = true // someone else asked (kubectl annotate): honoured, as the agent does
	}
	row := protocol.NodeDecide(protocol.NodeFacts{
		Needed:          sn.needed,
		OK:              protocol.IsTrue(n.Annotations, protocol.RebootOK),
		GrantedThisBoot: protocol.GrantedThisBoot(n, bootID, sn.sawNoGrant || sn.inProgress),
		Paused:          protocol.IsPaused(n.Annotations),
	})
	rebootNow := row.Do == protocol.NodeReboot
	if rebootNow {
		sn.inProgress = true
	}
	p := sn.desired(n, bootID)
	if sn.newBoot {
		p.DeleteAnnotation(n, protocol.RebootError)
	}
	if !p.Empty() {
		out, err := p.Apply(s.ctx, s.client, n)
		if err != nil {
			if rebootNow && !protocol.IsTrue(n.Annotations, protocol.RebootInProgress) {
				sn.inProgress = false // never reboot before the node says so
			}
			return err
		}
		s.overlay.Wrote(out)
		s.logf("%s: agent wrote %s", name, p)
	}
	sn.newBoot = false
	sn.reported = true
	if rebootNow {
		// logind accepts the Reboot call: the machine goes down.
		sn.down = true
		s.logf("%s: rebooting (down for %s)", name, s.cfg.RebootDelay)
		time.AfterFunc(s.cfg.RebootDelay, func() { s.rebootOver(sn) })
	}
	return nil
}

// Hold keeps the named nodes' reboots from ending before Release: a held node is granted and goes
// down as any other, and comes back once RebootDelay has passed and it was released, whichever is
// later. The bench holds the background of its latency-rolling run, so that the background is in its
// cycle while every measured node is granted by construction, however slow the machine.
func (s *Sim) Hold(names ...string) error {
	for _, name := range names {
		n := s.node(name)
		if n == nil {
			return fmt.Errorf("no simulated node %s", name)
		}
		n.mu.Lock()
		n.held = true
		n.mu.Unlock()
	}
	return nil
}

// Release ends Hold: a node whose RebootDelay already passed comes back now, any other when it
// passes. overdue is how many came back later than RebootDelay because they were held.
func (s *Sim) Release(names ...string) (overdue int) {
	for _, name := range names {
		n := s.node(name)
		if n == nil {
			continue
		}
		n.mu.Lock()
		back := n.overdue
		n.held, n.overdue = false, false
		n.mu.Unlock()
		if back {
			overdue++
			go s.comeBack(n)
		}
	}
	return overdue
}

// rebootOver is RebootDelay passing on a node that went down: it comes back, unless held.
func (s *Sim) rebootOver(sn *simNode) {
	sn.mu.Lock()
	held := sn.held
	sn.overdue = held
	sn.mu.Unlock()
	if !held {
		s.comeBack(sn)
	}
}

// desired is the agent's patch (agent.Agent.desired): the node-side effects of its state, its boot
// ID and version, update_engine's status fields and the host labels.
func (sn *simNode) desired(n *corev1.Node, bootID string) *nodes.Patch {
	p := &nodes.Patch{}
	p.ApplyEffects(n, protocol.NodeWrites(sn.inProgress, sn.needed)...)
	p.SetAnnotation(n, protocol.BootID, bootID)
	p.SetAnnotation(n, protocol.AgentProtocol, protocol.AgentProtocolCurrent)
	p.SetAnnotation(n, protocol.AgentVersion, "fleetsim")
	p.SetAnnotation(n, protocol.Status, sn.status.CurrentOperation)
	p.SetAnnotation(n, protocol.LastCheckedTime, strconv.FormatInt(sn.status.LastCheckedTime, 10))
	p.SetAnnotation(n, protocol.NewVersion, sn.status.NewVersion)
	p.SetLabel(n, protocol.ID, "flatcar")
	p.SetLabel(n, protocol.Version, sn.version)
	p.SetLabel(n, protocol.Group, "stable")
	return p
}

// comeBack ends a simulated reboot: the staged version is running, update_engine is idle, the kubelet
// reports the new boot ID, and the agent starts fresh (its first sync resets reboot-needed and
// reboot-in-progress, which tells the operator the node is back).
func (s *Sim) comeBack(sn *simNode) {
	sn.mu.Lock()
	sn.boot++
	if sn.staged != "" {
		sn.version, sn.staged = sn.staged, ""
	}
	sn.status = updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0", LastCheckedTime: time.Now().Unix()}
	sn.needed, sn.inProgress, sn.sawNoGrant, sn.newBoot, sn.reported = false, false, false, true, false
	name, bootID := sn.name, sn.bootID()
	sn.mu.Unlock()
	// A kubelet keeps trying until the API server takes its status.
	for s.ctx.Err() == nil {
		err := s.reportBoot(s.ctx, name, bootID)
		if err == nil {
			break
		}
		if apierrors.IsNotFound(err) {
			return
		}
		s.logf("%s: kubelet could not report the new boot, retrying: %v", name, err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	sn.mu.Lock()
	sn.down = false
	sn.reboots++
	sn.mu.Unlock()
	s.reboots.Add(1)
	s.logf("%s: up in boot %s", name, bootID)
	s.queue.Add(name)
}

// Counter counts the HTTP requests of the clients it wraps, by verb as the API server names them
// (WATCH for watches, the HTTP method otherwise).
type Counter struct {
	mu sync.Mutex
	by map[string]int64
}

// Config returns a copy of rc with a QPS that never throttles and every request counted.
func (c *Counter) Config(rc *rest.Config) *rest.Config {
	cp := rest.CopyConfig(rc)
	cp.QPS, cp.Burst = 1e5, 1e5
	prev := cp.WrapTransport
	cp.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return countingTransport{c, rt}
	}
	return cp
}

type countingTransport struct {
	c  *Counter
	rt http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	verb := r.Method
	if r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	t.c.mu.Lock()
	if t.c.by == nil {
		t.c.by = map[string]int64{}
	}
	t.c.by[verb]++
	t.c.mu.Unlock()
	return t.rt.RoundTrip(r)
}

// Snapshot is the count so far by verb.
func (c *Counter) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for k, v := range c.by {
		out[k] = v
	}
	return out
}
