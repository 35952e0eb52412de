package operator_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/fluomodule"
	"github.com/slipway-dev/slipway/internal/testsupport/standin"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// FLUO's own agent -- FLUO v0.9.0's update-agent binary, built from FLUO's module -- on a real D-Bus
// (dbus-daemon with the update_engine and logind stand-ins), against the real API server, with
// Slipway's operator deciding: update_engine stages an update, FLUO's agent asks with its own
// annotations, Slipway admits, cordons, drains and grants, FLUO's agent reboots through logind, comes
// back on the new version and resets its flags, and Slipway verifies the reboot and ends the cycle.
// Nothing on the Node is written by hand.
//
// FLUO's agent only runs in a pod (rest.InClusterConfig, /usr/share/flatcar/update.conf,
// /etc/os-release): it runs here in a private mount namespace (unshare -m) where those paths are the
// test's files, so it needs root and util-linux's unshare, and skips without them.
func TestFLUOAgentBinary(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	if os.Geteuid() != 0 {
		t.Skip("FLUO's agent reads fixed in-pod paths: it runs in a private mount namespace, which needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("util-linux's unshare not found: FLUO's agent needs a private mount namespace")
	}
	agentBin := fluomodule.AgentBinary(t, testenv.CacheDir("tools"))
	ctx := context.Background()
	const name, oldV, newV = "fluo-bin-0", "4459.2.1", "4459.2.2"
	dir := t.TempDir()

	// The machine: a bus with update_engine and logind, the files FLUO's agent reads in its pod.
	bus, err := testenv.StartBus(filepath.Join(dir, "dbus"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	conn, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ue, err := standin.ServeUpdateEngine(conn, newV)
	if err != nil {
		t.Fatal(err)
	}
	writeOSRelease := func(v string) {
		t.Helper()
		// In place (same inode): the agent's namespace has this file bind-mounted over /etc/os-release.
		f, err := os.OpenFile(filepath.Join(dir, "os-release"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION=%s\nVERSION_ID=%s\n", v, v)
		f.Close()
	}
	writeOSRelease(oldV)
	ca, err := os.ReadFile(filepath.Join(cp.Dir, "apiserver-certs", "apiserver.crt"))
	if err != nil {
		t.Fatalf("the API server's serving certificate (FLUO's agent trusts it as its pod's ca.crt): %v", err)
	}
	for f, b := range map[string]string{"update.conf": "GROUP=stable\n", "token": cp.Token, "ca.crt": string(ca)} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
cp "$D/token" "$D/ca.crt" /run/secrets/kubernetes.io/serviceaccount/
mount --bind "$D/os-release" /etc/os-release
mount -t tmpfs tmpfs /usr/share
mkdir -p /usr/share/flatcar
cp "$D/update.conf" /usr/share/flatcar/update.conf
exec "$AGENT" --node="$NODE" -v=2`
	logPath := filepath.Join(dir, "fluo-agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var agent *exec.Cmd
	ended := false // the test is over: a reboot in flight starts no agent any more
	start := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", script)
		// Dies with the test binary, whatever ends it: no agent is left running as root.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Env = append(os.Environ(), "D="+dir, "AGENT="+agentBin, "NODE="+name,
			"DBUS_SYSTEM_BUS_ADDRESS="+bus.Address,
			"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+strconv.Itoa(cp.Port))
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Errorf("starting FLUO's agent: %v", err)
			return
		}
		agent = cmd
	}
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		if agent != nil {
			_ = agent.Process.Kill()
			_ = agent.Wait()
			agent = nil
		}
	}
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		stop()
	})
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("FLUO's agent log (its end):\n%s", b)
		}
	})

	// A reboot: the agent dies with the machine, which comes back with a new boot ID on the version
	// update_engine staged, update_engine idle again; the agent starts again.
	rebooted := make(chan struct{}, 4)
	login1, err := standin.ServeLogin1(conn, func(bool) {
		go func() {
			stop()
			writeOSRelease(newV)
			if err := ue.Set(updateengine.Status{CurrentOperation: updateengine.StatusIdle, NewVersion: "0.0.0"}); err != nil {
				t.Errorf("update_engine after the reboot: %v", err)
			}
			if _, err := testenv.SetNodeStatus(ctx, client, name, "boot-2", true); err != nil {
				t.Errorf("the kubelet after the reboot: %v", err)
			}
			start()
			rebooted <- struct{}{}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}

	// Registered as a kubelet registers it, with labels and annotations: FLUO's agent panics on a Node
	// without any (it writes into the object's nil map).
	if _, err := testenv.CreateNode(ctx, client, name, "boot-1", map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}); err != nil {
		t.Fatal(err)
	}
	annotate(t, name, map[string]*string{"node.alpha.kubernetes.io/ttl": ptr("0"),
		"volumes.kubernetes.io/controller-managed-attach-detach": ptr("true")})
	startOperator(t, opOptions{})
	start()
	// FLUO's agent starts by labelling its node from os-release and update.conf: it runs and talks to
	// the API server.
	waitNode(t, name, time.Minute, "FLUO's agent's labels", func(n *corev1.Node) bool {
		return n.Labels[protocol.Version] == oldV && n.Labels["flatcar-linux-update.v1.flatcar-linux.net/group"] == "stable" &&
			n.Annotations[protocol.RebootNeeded] == protocol.False
	})

	ue.AttemptUpdate() // update_engine downloads, verifies and stages newV: UPDATE_STATUS_UPDATED_NEED_REBOOT
	n := waitNode(t, name, time.Minute, "FLUO's agent asking", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootNeeded] == protocol.True || n.Annotations[protocol.RebootOK] == protocol.True
	})
	if v := n.Annotations[protocol.NewVersion]; v != newV {
		t.Errorf("FLUO's agent says new-version %q, want %q", v, newV)
	}
	select {
	case <-rebooted:
	case <-time.After(time.Minute):
		t.Fatalf("FLUO's agent never rebooted through logind (node: %v)", getNode(t, name).Annotations)
	}
	n = waitNode(t, name, time.Minute, "cycle finished", finished)
	if n.Labels[protocol.Version] != newV {
		t.Errorf("version label %q after the cycle, want %q (FLUO's agent relabels from os-release)", n.Labels[protocol.Version], newV)
	}
	if n.Spec.Unschedulable {
		t.Error("the node stayed cordoned")
	}
	if calls := login1.Calls(); len(calls) != 1 {
		t.Errorf("logind Reboot called %d times, want once", len(calls))
	}
	for _, reason := range []string{"RebootGranted", "RebootCompleted"} {
		if !waitEvent(t, name, reason) {
			t.Errorf("no %s event on the node", reason)
		}
	}
	if strings.Contains(n.Annotations[protocol.BlockedBy], "agent") {
		t.Errorf("held for its agent: %s", n.Annotations[protocol.BlockedBy])
	}
}
