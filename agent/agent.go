// Package agent is Slipway's update-agent: one per node, it reports what update_engine says onto its
// own Node and, once the operator grants reboot-ok, reboots the node through logind. It never cordons
// or drains (that is the operator's job), so it needs only get/list/watch/patch on its own Node.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// StatusWatcher delivers update_engine's status (first GetStatus, then every StatusUpdate) until ctx
// ends; updateengine.Watch is the real one.
type StatusWatcher func(ctx context.Context, out chan<- updateengine.Status, problems func(error))

// Rebooter reboots the machine; login1.Rebooter is the real one.
type Rebooter interface {
	Reboot(ctx context.Context) error
}

// Config wires an Agent.
type Config struct {
	NodeName string
	Client   kubernetes.Interface
	Status   StatusWatcher
	Rebooter Rebooter
	// BootID of the boot the agent runs in (/proc/sys/kernel/random/boot_id).
	BootID string
	// HostRoot is where the host's /etc and /usr are mounted ("/" when not in a container).
	HostRoot string
	// RebootRequiredPath is the file update_engine (Flatcar >= 3067) creates when a reboot is
	// needed; "" disables the check.
	RebootRequiredPath string
	// FilePoll is how often RebootRequiredPath is checked (a stat, no API call).
	FilePoll time.Duration
	// RebootBackoff paces retries of a failed logind Reboot call.
	RebootBackoff wait.Backoff
	// RebootRepeat is how long after a successful Reboot call the agent asks again if it is still
	// alive (an inhibitor may have delayed the first one).
	RebootRepeat time.Duration
	// CheckForUpdate asks update_engine to check now (updateengine.Client.AttemptUpdate over a fresh
	// system-bus connection); called after the agent changed update.conf. nil: not asked (the change
	// then takes effect at update_engine's next periodic check).
	CheckForUpdate func(ctx context.Context) error
	Version        string
	Log            klog.Logger
}

// Agent is the update-agent. Its few fields of memory are all re-derivable after a restart from the
// Node, update_engine and the boot ID; what it does next is protocol.NodeTable's answer.
type Agent struct {
	cfg     Config
	info    HostInfo
	store   cache.Store
	overlay *nodes.Overlay
	notify  chan struct{}

	status       *updateengine.Status // last status heard, nil until update_engine answered
	needed       bool                 // a reboot is needed; sticky until the next boot
	initialized  bool                 // the first sync after start has decided what to reset
	inProgress   bool                 // we accepted a grant in this boot and are rebooting
	sawNoGrant   bool                 // reboot-ok was not "true" at some point in this boot (FLUO-operator fallback)
	newBoot      bool                 // the agent is the first one in this boot
	reported     bool                 // this process has written (or confirmed) its keys once
	lastState    protocol.NodeState   // for logging changes only
	rebootAfter  time.Time            // earliest next Reboot call
	confError    string               // why update.conf does not say what the pool declares; "" it does
	confRetry    time.Time            // a failed write of update.conf is tried again from then on
	confDelay    time.Duration        // the backoff of the last failed write
	checkPending bool                 // update.conf changed; update_engine not yet asked to check
	checking     bool                 // an ask is under way (checkNow); its answer comes on checkDone
	checkDone    chan error
	checkError   string    // why the last ask failed ("" none)
	checkRetry   time.Time // a failed ask is repeated from then on
	backoff      wait.Backoff
}

// New checks the configuration.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("node name is empty: set --node or the NODE_NAME environment variable (downward API spec.nodeName)")
	case cfg.Client == nil:
		return nil, errors.New("no Kubernetes client")
	case cfg.Status == nil:
		return nil, errors.New("no update_engine status watcher")
	case cfg.Rebooter == nil:
		return nil, errors.New("no rebooter")
	case cfg.BootID == "":
		return nil, errors.New("boot ID is empty")
	}
	if cfg.HostRoot == "" {
		cfg.HostRoot = "/"
	}
	if cfg.FilePoll <= 0 {
		cfg.FilePoll = 10 * time.Second
	}
	if cfg.RebootBackoff.Duration == 0 {
		cfg.RebootBackoff = wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.1, Steps: 10, Cap: 5 * time.Minute}
	}
	if cfg.RebootRepeat <= 0 {
		cfg.RebootRepeat = 5 * time.Minute
	}
	return &Agent{cfg: cfg, overlay: nodes.NewOverlay(), notify: make(chan struct{}, 1), checkDone: make(chan error, 1), backoff: cfg.RebootBackoff}, nil
}

func (a *Agent) poke() {
	select {
	case a.notify <- struct{}{}:
	default:
	}
}

// Run reports and reacts until ctx ends. It returns an error only for what a restart cannot fix
// without help (e.g. the API server refusing to let it watch its Node).
func (a *Agent) Run(ctx context.Context) error {
	log := a.cfg.Log.WithValues("node", a.cfg.NodeName)
	a.rereadHostInfo(log)

	factory := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.cfg.NodeName).String()
		}),
		informers.WithTransform(nodes.Strip))
	inf := factory.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { a.observed(obj) },
		UpdateFunc: func(_, obj interface{}) { a.observed(obj) },
		DeleteFunc: func(interface{}) { a.poke() },
	})
	if err != nil {
		return err
	}
	a.store = inf.GetStore()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watching node %s never synced: check the agent's RBAC (get/list/watch nodes)", a.cfg.NodeName)
	}

	statuses := make(chan updateengine.Status, 16)
	go a.cfg.Status(ctx, statuses, func(err error) { log.Info("update_engine", "problem", err.Error()) })

	filePoll := time.NewTicker(a.cfg.FilePoll)
	defer filePoll.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	log.Info("agent started", "bootID", a.cfg.BootID, "version", a.cfg.Version, "hostInfo", a.info)
	for {
		wake, err := a.sync(ctx, log)
		if err != nil {
			log.Error(err, "sync failed; retrying")
			wake = time.Now().Add(a.backoff.Step())
		}
		if !wake.IsZero() {
			retry.Reset(time.Until(wake))
		}
		select {
		case <-ctx.Done():
			log.Info("agent stopping")
			return nil
		case s := <-statuses:
			log.Info("update_engine status", "operation", s.CurrentOperation, "newVersion", s.NewVersion, "lastChecked", s.LastCheckedTime)
			a.status = &s
			if s.NeedsReboot() {
				a.needed = true
			}
		case err := <-a.checkDone:
			a.checked(log, err)
		case <-a.notify:
		case <-filePoll.C:
		case <-retry.C:
		}
	}
}

func (a *Agent) observed(obj interface{}) {
	if n, ok := obj.(*corev1.Node); ok {
		a.overlay.Observed(n)
	}
	a.poke()
}

func (a *Agent) node() *corev1.Node {
	obj, ok, err := a.store.GetByKey(a.cfg.NodeName)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return a.overlay.View(n)
}

// rebootRequiredFile reports whether the reboot-required file exists.
func (a *Agent) rebootRequiredFile(log klog.Logger) bool {
	if a.cfg.RebootRequiredPath == "" {
		return false
	}
	_, err := os.Stat(a.cfg.RebootRequiredPath)
	if err == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		log.Info("cannot check reboot-required file", "path", a.cfg.RebootRequiredPath, "error", err.Error())
	}
	return false
}

// sync writes what the agent knows onto its Node (only keys whose value differs) and reboots when
// protocol.NodeTable says so. It returns when it wants to be called again at the latest (zero: no need).
func (a *Agent) sync(ctx context.Context, log klog.Logger) (time.Time, error) {
	n := a.node()
	if n == nil {
		log.Info("own Node not found (yet); waiting for it to appear")
		return time.Now().Add(5 * time.Second), nil
	}
	if !a.initialized {
		a.initialized = true
		if n.Annotations[protocol.BootID] == a.cfg.BootID {
			// Same boot as the agent that wrote this Node last: a restart of the agent, not of the node.
			// Nothing is reset. A reboot this boot's agent had accepted goes on; any other reboot-ok
			// must name this boot (or be seen going false first) before it counts.
			a.needed = a.needed || protocol.IsTrue(n.Annotations, protocol.RebootNeeded)
			a.inProgress = protocol.IsTrue(n.Annotations, protocol.RebootInProgress)
			log.Info("agent restarted within the same boot; keeping the node's flags", "rebootNeeded", a.needed, "rebootInProgress", a.inProgress)
		} else {
			// First start after a reboot (or ever): reboot-needed becomes what update_engine says now
			// and reboot-in-progress false, which tells the operator this node came back. A reboot-ok
			// still set belongs to the boot it was granted in, never to this one.
			a.newBoot = true
			log.Info("first start in this boot; resetting reboot-needed and reboot-in-progress", "previousBootID", n.Annotations[protocol.BootID])
		}
	}
	if !protocol.IsTrue(n.Annotations, protocol.RebootOK) {
		a.sawNoGrant = true
	}
	if a.rebootRequiredFile(log) {
		a.needed = true
	}
	if a.reported && protocol.IsTrue(n.Annotations, protocol.RebootNeeded) && !a.needed {
		// Someone else asked for a reboot (FLUO's README test: `kubectl annotate ... reboot-needed=true`).
		// Like FLUO's agent, honour it instead of writing our own "false" over it. Only after our first
		// write in this process: before that, a "true" may be the last boot's, which a reboot answers.
		log.Info("reboot-needed=true set on the node by someone else; honouring it")
		a.needed = true
	}

	row := protocol.NodeDecide(protocol.NodeFacts{
		Needed: a.needed,
		OK:     protocol.IsTrue(n.Annotations, protocol.RebootOK),
		// Without a recorded boot (FLUO's operator), a grant counts once reboot-ok was seen not true in
		// this boot, or when this boot's agent had already accepted it before a restart.
		GrantedThisBoot: protocol.GrantedThisBoot(n, a.cfg.BootID, a.sawNoGrant || a.inProgress),
		Paused:          protocol.IsPaused(n.Annotations),
	})
	if row.Is != a.lastState {
		log.Info("node side", "state", row.Is, "because", row.When, "action", row.Do)
		a.lastState = row.Is
	}
	rebootNow := row.Do == protocol.NodeReboot
	if rebootNow {
		a.inProgress = true
	}
	a.applyUpdateConf(ctx, log, n)
	p := a.desired(n)
	if a.newBoot {
		// A reboot error of an earlier boot is history.
		p.DeleteAnnotation(n, protocol.RebootError)
	}
	if !p.Empty() {
		out, err := p.Apply(ctx, a.cfg.Client, n)
		if err != nil {
			if rebootNow && !protocol.IsTrue(n.Annotations, protocol.RebootInProgress) {
				// Never reboot before the node says so: the operator counts on reboot-in-progress.
				a.inProgress = false
			}
			return time.Time{}, err
		}
		a.overlay.Wrote(out)
		n = out
		log.V(1).Info("node updated", "patch", p.String())
	}
	a.newBoot = false
	a.reported = true
	if !rebootNow {
		return time.Time{}, nil
	}
	if now := time.Now(); now.Before(a.rebootAfter) {
		return a.rebootAfter, nil
	}
	log.Info("reboot-ok granted in this boot; rebooting through logind")
	if err := a.cfg.Rebooter.Reboot(ctx); err != nil {
		if ctx.Err() != nil {
			// Shutting down, most likely because the reboot is under way.
			return time.Time{}, nil
		}
		delay := a.backoff.Step()
		a.rebootAfter = time.Now().Add(delay)
		log.Error(err, "reboot refused; will retry", "retryIn", delay.String())
		var ep nodes.Patch
		ep.SetAnnotation(n, protocol.RebootError, fmt.Sprintf("%s: %v", time.Now().UTC().Format(time.RFC3339), err))
		if out, perr := ep.Apply(ctx, a.cfg.Client, n); perr == nil {
			a.overlay.Wrote(out)
		} else {
			log.Error(perr, "cannot report the reboot error on the node")
		}
		return a.rebootAfter, nil
	}
	a.backoff = a.cfg.RebootBackoff
	a.rebootAfter = time.Now().Add(a.cfg.RebootRepeat)
	var ep nodes.Patch
	ep.DeleteAnnotation(n, protocol.RebootError)
	if out, err := ep.Apply(ctx, a.cfg.Client, n); err == nil && out != nil {
		a.overlay.Wrote(out)
	}
	return a.rebootAfter, nil
}

// desired is the patch that makes the agent's keys on n say what the agent knows.
func (a *Agent) desired(n *corev1.Node) *nodes.Patch {
	p := &nodes.Patch{}
	p.ApplyEffects(n, protocol.NodeWrites(a.inProgress, a.needed)...)
	p.SetAnnotation(n, protocol.BootID, a.cfg.BootID)
	p.SetAnnotation(n, protocol.AgentProtocol, protocol.AgentProtocolCurrent)
	if a.cfg.Version != "" {
		p.SetAnnotation(n, protocol.AgentVersion, a.cfg.Version)
	}
	if a.status != nil {
		p.SetAnnotation(n, protocol.Status, a.status.CurrentOperation)
		p.SetAnnotation(n, protocol.LastCheckedTime, strconv.FormatInt(a.status.LastCheckedTime, 10))
		p.SetAnnotation(n, protocol.NewVersion, a.status.NewVersion)
	}
	if a.info.HaveOS {
		p.SetLabel(n, protocol.ID, a.info.ID)
		p.SetLabel(n, protocol.Version, a.info.Version)
	}
	if a.info.HaveGroup {
		p.SetLabel(n, protocol.Group, a.info.Group)
	}
	if a.info.Server != "" {
		p.SetAnnotation(n, protocol.Server, a.info.Server)
	} else if a.info.HaveConf {
		p.DeleteAnnotation(n, protocol.Server) // update.conf read, and no SERVER in it
	}
	switch {
	case a.confError != "":
		p.SetAnnotation(n, protocol.UpdateConfError, a.confError)
	case a.checkError != "":
		p.SetAnnotation(n, protocol.UpdateConfError, a.checkError)
	default:
		p.DeleteAnnotation(n, protocol.UpdateConfError)
	}
	return p
}

// applyUpdateConf writes what the operator published for this node's pool (pool-group, pool-server)
// into update.conf, then has update_engine asked to check (checkNow) so the channel changes now, and
// re-reads what the agent reports. Nothing published: the file is left as it is. The values are
// checked again here, whoever wrote them (plain http is the operator's to refuse; the agent takes http
// or https). A refusal or failure is kept in confError, which the next patch reports: worded without
// anything that changes from one attempt to the next (a temporary file's name), so a failing write
// does not patch the Node at every sync; a failed write is tried again after a backoff.
func (a *Agent) applyUpdateConf(ctx context.Context, log klog.Logger, n *corev1.Node) {
	want := updateconf.Settings{Group: n.Annotations[protocol.PoolGroup], Server: n.Annotations[protocol.PoolServer]}
	_, hasGroup := n.Annotations[protocol.PoolGroup]
	_, hasServer := n.Annotations[protocol.PoolServer]
	if !hasGroup && !hasServer {
		a.confError, a.checkPending, a.checkError, a.confRetry = "", false, "", time.Time{}
		return
	}
	prev := a.confError
	now := time.Now()
	switch err := want.Validate(true); {
	case err != nil || (hasGroup && want.Group == "") || (hasServer && want.Server == ""):
		if err == nil {
			err = errors.New("an empty value")
		}
		a.confError = "refused the pool's update settings: " + err.Error()
	case now.Before(a.confRetry):
		// The last write failed: keep its error until the backoff passed.
	default:
		changed, err := updateconf.Apply(a.cfg.HostRoot, want)
		switch {
		case err != nil:
			a.confError = writeError(err)
			if !errors.Is(err, updateconf.ErrNotManaged) {
				a.confDelay = min(max(2*a.confDelay, time.Minute), 15*time.Minute)
				a.confRetry = now.Add(a.confDelay)
			}
		default:
			a.confError, a.confDelay, a.confRetry = "", 0, time.Time{}
			if changed {
				log.Info("update.conf now says what the node's pool declares", "group", want.Group, "server", want.Server)
				a.rereadHostInfo(log)
				a.checkPending, a.checkError, a.checkRetry = a.cfg.CheckForUpdate != nil, "", time.Time{}
			}
		}
	}
	if a.confError != prev && a.confError != "" {
		log.Info("update.conf not changed to what the node's pool declares", "why", a.confError)
	}
	a.checkNow(ctx)
}

// checkNow asks update_engine to check, on a goroutine of its own (a hung system bus must not stop
// the agent from reporting and rebooting); its answer comes back through checkDone to the Run loop.
// A failed ask is tried again a minute later.
func (a *Agent) checkNow(ctx context.Context) {
	if !a.checkPending || a.checking || time.Now().Before(a.checkRetry) {
		return
	}
	a.checking = true
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		a.checkDone <- a.cfg.CheckForUpdate(cctx)
	}()
}

// checked takes checkNow's answer (on the Run loop).
func (a *Agent) checked(log klog.Logger, err error) {
	a.checking = false
	if err != nil {
		a.checkError = "update.conf written; asking update_engine to check now failed (it reads the file at its next periodic check): " + err.Error()
		a.checkRetry = time.Now().Add(time.Minute)
		log.Info("asking update_engine to check failed; the file is written, and it is asked again in a minute", "error", err.Error())
		return
	}
	a.checkPending, a.checkError = false, ""
	log.Info("asked update_engine to check for an update with the new settings")
}

// writeError words a failure to write update.conf without what changes between attempts.
func writeError(err error) string {
	if errors.Is(err, updateconf.ErrNotManaged) {
		return err.Error()
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return "cannot write /" + updateconf.Path + ": " + pe.Op + ": " + pe.Err.Error()
	case errors.As(err, &le):
		return "cannot write /" + updateconf.Path + ": " + le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// rereadHostInfo refreshes what the agent reports from os-release and update.conf.
func (a *Agent) rereadHostInfo(log klog.Logger) {
	info, problems := ReadHostInfo(a.cfg.HostRoot)
	for _, p := range problems {
		log.Info("host info incomplete; leaving those labels alone", "problem", p.Error())
	}
	a.info = info
}
