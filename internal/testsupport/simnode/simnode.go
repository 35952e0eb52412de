// Package simnode simulates a Flatcar node for tests and the demo with real parts wherever they can
// run without a VM: its own dbus-daemon, the update_engine and logind stand-ins on it, the real
// update-agent talking to both over D-Bus, and a Node object in a real API server. Only the reboot
// itself is simulated: when the agent calls logind's Reboot, the agent is stopped, the boot ID
// changes, update_engine comes back idle, and the agent starts again. Real reboots are the e2e tier's.
package simnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/agent"
	"github.com/slipway-dev/slipway/internal/login1"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/standin"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// Node is one simulated node.
type Node struct {
	Name   string
	Dir    string
	Bus    *testenv.Bus
	UE     *standin.UpdateEngine
	Login  *standin.Login1
	client kubernetes.Interface
	log    klog.Logger

	// Hooks for tests and the demo.
	OnReboot func(n *Node, boot int) // after the simulated reboot completed (new agent running)
	// OnAgentExit: the agent process (AgentBinary) exited on its own, not stopped by the node: a crash
	// a DaemonSet's kubelet would restart. Called in a goroutine of its own.
	OnAgentExit func(n *Node, err error, log string)
	// RebootDelay is how long the simulated machine is "down".
	RebootDelay time.Duration
	// BackNotReady: the simulated kubelet reports the new boot as NotReady; the test says when it is
	// Ready (testenv.SetNodeStatus). Set before the reboot.
	BackNotReady bool

	mu      sync.Mutex
	boot    int
	bootID  string
	cancel  context.CancelFunc
	done    chan struct{}
	ctx     context.Context
	conns   []*dbus.Conn
	ueConn  *dbus.Conn
	version string
	// down: a reboot was accepted and the machine has not come back yet (forever if neverBack).
	down      bool
	neverBack bool
	// rollBack: the next reboot comes back on the old version (a failed update rolls back).
	rollBack bool
	// agentBin, when set, is an update-agent binary the node runs as a process (the DaemonSet's pod)
	// instead of the agent package in this process; kubeconfig is its API server. A later
	// SetAgentBinary takes effect at the next start (an agent restart or the next boot).
	agentBin, kubeconfig string
	labels               map[string]string // Options.Labels
	userConf             bool              // Options.UserUpdateConf
	// life serializes what stops and starts the agent (a simulated reboot, an agent restart), so an
	// agent restarted by a test never outlives the boot it was started in.
	life sync.Mutex
}

// ErrDown is what RestartAgent says while the simulated machine is down: there is no agent to restart.
var ErrDown = errors.New("simulated node is down (rebooting)")

// Options configure New.
type Options struct {
	Client      kubernetes.Interface
	Dir         string
	Log         klog.Logger
	RebootDelay time.Duration
	Version     string // OS version before the update
	// AgentBinary, when set, runs this update-agent binary as the node's agent process (talking to the
	// node's bus through DBUS_SYSTEM_BUS_ADDRESS and to the API server through Kubeconfig) instead of
	// the agent package in this process: another build of the agent, as a DaemonSet roll brings.
	AgentBinary string
	Kubeconfig  string
	// Labels are the kubelet's --node-labels: on the Node when it is registered, and again whenever it
	// is registered anew.
	Labels map[string]string
	// UserUpdateConf makes /etc/flatcar/update.conf the user's own (no "# managed-by: slipway" line,
	// so the agent must not edit it); by default it is the one Slipway's new-node snippet writes.
	UserUpdateConf bool
	// Offers is what the update server offers per GROUP to an AttemptUpdate over D-Bus (which reads
	// the node's update.conf first, as update_engine does); other groups get 4500.0.0.
	Offers map[string]string
}

// New starts the node's bus and stand-ins, registers its Node object (Ready, with a boot ID) and
// starts its agent.
func New(ctx context.Context, name string, o Options) (*Node, error) {
	n := &Node{Name: name, Dir: o.Dir, client: o.Client, log: o.Log.WithValues("simnode", name), RebootDelay: o.RebootDelay, ctx: ctx, version: o.Version,
		agentBin: o.AgentBinary, kubeconfig: o.Kubeconfig, labels: o.Labels, userConf: o.UserUpdateConf}
	if n.version == "" {
		n.version = "4459.2.1"
	}
	if err := n.writeHostFiles(true); err != nil {
		return nil, err
	}
	bus, err := testenv.StartBus(filepath.Join(o.Dir, "dbus"))
	if err != nil {
		return nil, err
	}
	n.Bus = bus
	ueConn, err := bus.Connect()
	if err != nil {
		n.Stop()
		return nil, err
	}
	n.conns = append(n.conns, ueConn)
	n.ueConn = ueConn
	if n.UE, err = standin.ServeUpdateEngine(ueConn, "4500.0.0"); err != nil {
		n.Stop()
		return nil, err
	}
	n.UE.ReadUpdateConf(filepath.Join(o.Dir, "host"), o.Offers)
	loginConn, err := bus.Connect()
	if err != nil {
		n.Stop()
		return nil, err
	}
	n.conns = append(n.conns, loginConn)
	if n.Login, err = standin.ServeLogin1(loginConn, func(bool) { n.rebootRequested() }); err != nil {
		n.Stop()
		return nil, err
	}
	n.bootID = bootID(name, 0)
	if _, err := testenv.CreateNode(ctx, o.Client, name, n.bootID, o.Labels); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.startAgent(); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func bootID(name string, boot int) string { return fmt.Sprintf("%s-boot-%d", name, boot) }

// writeHostFiles writes os-release (the running version) and, when the machine is new, the image's and
// the node's update.conf; a reboot keeps /etc, so what the agent wrote there stays.
func (n *Node) writeHostFiles(first bool) error {
	files := map[string]string{
		"etc/os-release": "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION=" + n.version + "\nVERSION_ID=" + n.version + "\n",
	}
	if first {
		files["usr/share/flatcar/update.conf"] = "SERVER=https://public.update.flatcar-linux.net/v1/update/\nGROUP=stable\n"
		files["etc/flatcar/update.conf"] = updateconf.Marker + "\nGROUP=stable\nREBOOT_STRATEGY=off\n"
		if n.userConf {
			files["etc/flatcar/update.conf"] = "GROUP=\"stable\"\nREBOOT_STRATEGY=off\n"
		}
	}
	for p, content := range files {
		full := filepath.Join(n.Dir, "host", p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// RollBackNextUpdate makes the next reboot come back on the version the node runs now, as a Flatcar
// node does when the new partition fails to boot.
func (n *Node) RollBackNextUpdate() { n.SetRollBack(true) }

// SetRollBack says whether the next reboot rolls back (true) or boots the staged update (false).
func (n *Node) SetRollBack(b bool) { n.mu.Lock(); n.rollBack = b; n.mu.Unlock() }

// Version is the OS version the node runs (its os-release).
func (n *Node) Version() string { n.mu.Lock(); defer n.mu.Unlock(); return n.version }

// BootID is the node's current boot ID; Boots how many times it rebooted.
func (n *Node) BootID() string { n.mu.Lock(); defer n.mu.Unlock(); return n.bootID }
func (n *Node) Boots() int     { n.mu.Lock(); defer n.mu.Unlock(); return n.boot }

// SetAgentBinary makes the node run bin as its agent from the next start on (its next boot, or
// RestartAgent: what a DaemonSet roll does to the pod); "" goes back to the in-process agent.
func (n *Node) SetAgentBinary(bin string) { n.mu.Lock(); n.agentBin = bin; n.mu.Unlock() }

// AgentBinary is what the node's agent runs ("" the in-process agent) from its next start on.
func (n *Node) AgentBinary() string { n.mu.Lock(); defer n.mu.Unlock(); return n.agentBin }

func (n *Node) startAgent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agentBin != "" {
		return n.startAgentProcess()
	}
	rebootConn, err := n.Bus.Connect()
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		NodeName: n.Name,
		Client:   n.client,
		Status: func(ctx context.Context, out chan<- updateengine.Status, problems func(error)) {
			updateengine.Watch(ctx, n.Bus.Connect, out, problems)
		},
		Rebooter: login1.NewRebooter(rebootConn),
		CheckForUpdate: func(ctx context.Context) error {
			conn, err := n.Bus.Connect()
			if err != nil {
				return err
			}
			defer conn.Close()
			return updateengine.NewClient(conn).AttemptUpdate(ctx)
		},
		BootID:             n.bootID,
		HostRoot:           filepath.Join(n.Dir, "host"),
		RebootRequiredPath: filepath.Join(n.Dir, "run", fmt.Sprintf("reboot-required-%d", n.boot)),
		FilePoll:           time.Second,
		RebootBackoff:      fastBackoff,
		Version:            "simnode",
		Log:                n.log.WithName("agent"),
	})
	if err != nil {
		rebootConn.Close()
		return err
	}
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	n.cancel, n.done = cancel, done
	go func() {
		defer close(done)
		defer rebootConn.Close()
		if err := a.Run(ctx); err != nil {
			n.log.Error(err, "agent stopped with an error")
		}
	}()
	return nil
}

// startAgentProcess runs the agent binary as this boot's agent (n.mu held): the flags and environment
// the DaemonSet gives it, pointed at the node's bus, host files and boot ID.
func (n *Node) startAgentProcess() error {
	run := filepath.Join(n.Dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	bootFile := filepath.Join(run, "boot_id")
	if err := os.WriteFile(bootFile, []byte(n.bootID+"\n"), 0o644); err != nil {
		return err
	}
	args := []string{"--node=" + n.Name, "--kubeconfig=" + n.kubeconfig, "--host-root=" + filepath.Join(n.Dir, "host"),
		"--boot-id-file=" + bootFile, "--reboot-required-file=" + filepath.Join(run, fmt.Sprintf("reboot-required-%d", n.boot)),
		"--reboot-required-poll=1s"}
	p, err := operatorproc.StartEnv(n.agentBin, args, []string{"DBUS_SYSTEM_BUS_ADDRESS=" + n.Bus.Address},
		filepath.Join(n.Dir, "agent.log"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	n.cancel, n.done = cancel, done
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			p.Stop(5 * time.Second) // SIGTERM, as the kubelet ends a pod
		case <-p.Done():
			n.log.Error(p.Err(), "agent process exited on its own", "log", p.Log())
			if n.OnAgentExit != nil {
				go n.OnAgentExit(n, p.Err(), p.Log())
			}
		}
	}()
	return nil
}

func (n *Node) stopAgent() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel, n.done = nil, nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// RestartAgent stops and starts the agent within the same boot (a pod restart).
func (n *Node) RestartAgent() error { return n.RestartAgentAfter(0) }

// RestartAgentAfter kills the agent, leaves it dead for down, and starts it again within the same
// boot (a pod killed and restarted). While the machine is down in a simulated reboot there is no
// agent to kill: it returns ErrDown and changes nothing.
func (n *Node) RestartAgentAfter(down time.Duration) error {
	n.life.Lock()
	defer n.life.Unlock()
	if n.Down() {
		return ErrDown
	}
	n.stopAgent()
	if down > 0 {
		time.Sleep(down)
	}
	return n.startAgent()
}

// Down reports whether the simulated machine is down: a reboot was accepted and it has not come back.
func (n *Node) Down() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.down }

// NeverComeBack makes the next simulated reboot one the machine never returns from: the agent is
// stopped and the boot ID never changes, as with a node that hangs in firmware.
func (n *Node) NeverComeBack() { n.mu.Lock(); n.neverBack = true; n.mu.Unlock() }

// RestartUpdateEngine restarts the update_engine stand-in: it leaves the bus (its connection closes,
// so com.coreos.update1 loses its owner), stays away for gap, then a new one takes the name with the
// same status and announces it, as update_engine does after a restart (it keeps its state on disk).
func (n *Node) RestartUpdateEngine(gap time.Duration) error {
	n.mu.Lock()
	old, oldConn := n.UE, n.ueConn
	n.mu.Unlock()
	status := old.Status()
	oldConn.Close()
	time.Sleep(gap)
	conn, err := n.Bus.Connect()
	if err != nil {
		return err
	}
	ue, err := standin.ServeUpdateEngine(conn, old.NewVersion)
	if err != nil {
		conn.Close()
		return err
	}
	ue.StepDelay, ue.OnNeedReboot = old.StepDelay, old.OnNeedReboot
	ue.ReadUpdateConf(old.UpdateConf())
	n.mu.Lock()
	n.UE, n.ueConn = ue, conn
	n.conns = append(n.conns, conn)
	n.mu.Unlock()
	return ue.Set(status)
}

// rebootRequested is logind's side of an accepted Reboot: the first call in a boot starts the
// simulated reboot; later ones change nothing, as systemd queues one reboot job, not two.
func (n *Node) rebootRequested() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return
	}
	n.down = true
	go n.reboot()
}

// reboot simulates the machine going down and coming back: agent gone, new boot ID reported by the
// "kubelet", update_engine idle with the new version current, agent started again.
func (n *Node) reboot() {
	n.life.Lock()
	locked := true
	defer func() {
		if locked {
			n.life.Unlock()
		}
	}()
	n.stopAgent()
	if n.ctx.Err() != nil {
		return
	}
	n.log.Info("simulated reboot: down")
	n.mu.Lock()
	never := n.neverBack
	n.mu.Unlock()
	if never {
		n.log.Info("simulated reboot: this machine never comes back")
		return
	}
	time.Sleep(n.RebootDelay)
	n.mu.Lock()
	n.boot++
	n.bootID = bootID(n.Name, n.boot)
	id, boot, ue := n.bootID, n.boot, n.UE
	// The update update_engine staged is what boots, unless it rolls back.
	if st := ue.Status(); st.CurrentOperation == updateengine.StatusUpdatedNeedReboot && st.NewVersion != "" && st.NewVersion != "0.0.0" && !n.rollBack {
		n.version = st.NewVersion
	}
	n.rollBack = false
	err := n.writeHostFiles(false)
	n.mu.Unlock()
	if err != nil {
		n.log.Error(err, "simulated reboot: writing os-release")
	}
	_ = ue.Set(updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0", LastCheckedTime: time.Now().Unix()})
	// A kubelet keeps trying until the API server takes its status (it may be restarting), and
	// registers its Node again if someone deleted it meanwhile.
	for {
		_, err := testenv.SetNodeStatus(n.ctx, n.client, n.Name, id, !n.BackNotReady)
		if apierrors.IsNotFound(err) && !n.BackNotReady {
			_, err = testenv.RegisterNode(n.ctx, n.client, n.Name, id, n.labels)
		} else if apierrors.IsNotFound(err) {
			_, err = testenv.CreateNode(n.ctx, n.client, n.Name, id, n.labels)
		}
		if err == nil {
			break
		}
		n.log.Error(err, "simulated kubelet could not report the new boot ID; retrying")
		if testenv.WaitCtx(n.ctx, 500*time.Millisecond) != nil {
			return
		}
	}
	// Up again: a Reboot call from the new agent is a new reboot (it waits for life).
	n.mu.Lock()
	n.down = false
	n.mu.Unlock()
	if err := n.startAgent(); err != nil {
		n.log.Error(err, "agent did not start after the simulated reboot")
		return
	}
	n.log.Info("simulated reboot: up", "bootID", id)
	n.life.Unlock() // the hook may restart the agent
	locked = false
	if n.OnReboot != nil {
		n.OnReboot(n, boot)
	}
}

// Reregister deletes the node's Node object and, as its kubelet does once it notices, registers a new
// one under the same name (a new UID, none of the old labels or annotations) after gap. While the
// machine is down there is no kubelet to register it: the Node stays deleted until the machine is back
// (its kubelet creates it then). It reports whether the Node was re-created now.
func (n *Node) Reregister(ctx context.Context, gap time.Duration) (bool, error) {
	if err := n.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		return false, fmt.Errorf("deleting node %s: %w", n.Name, err)
	}
	if n.Down() {
		return false, nil
	}
	if err := testenv.WaitCtx(ctx, gap); err != nil {
		return false, err
	}
	for {
		if n.Down() {
			return false, nil // it went down meanwhile: its kubelet registers it when it is back
		}
		// Registered Ready in one request: the machine never stopped running, and a Node that is
		// NotReady for a moment would count against the budget for something Slipway did not do.
		_, err := testenv.RegisterNode(ctx, n.client, n.Name, n.BootID(), n.labels)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil // (already: the kubelet's reboot path registered it meanwhile)
		}
		n.log.Error(err, "simulated kubelet could not register its Node again; retrying")
		if testenv.WaitCtx(ctx, 500*time.Millisecond) != nil {
			return false, ctx.Err()
		}
	}
}

// SendNeedReboot emits what `locksmithctl send-need-reboot` emits, from a fresh connection of its own.
func (n *Node) SendNeedReboot() error {
	conn, err := n.Bus.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	return updateengine.SendNeedReboot(conn)
}

// Stop stops the agent, the stand-ins and the bus.
func (n *Node) Stop() {
	n.stopAgent()
	for _, c := range n.conns {
		c.Close()
	}
	if n.Bus != nil {
		n.Bus.Stop()
	}
}
