package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

// A real etcd + kube-apiserver for the package, started by the first test that calls needCluster
// (the unit tests, and every test under -short, start nothing), and the update-agent binary, built
// by the first test that calls needAgentBinary. TestMain stops what was started.
var (
	shared      = &testenv.Shared{Name: "agent"}
	client      kubernetes.Interface // set by needCluster
	bins        string               // directory with the built update-agent binary, set by needAgentBinary
	clusterOnce sync.Once
	binsOnce    sync.Once
	binsErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// needCluster is the first call of every test that needs the control plane (and dbus-daemons): it
// skips the test under -short and otherwise fills client.
func needCluster(t *testing.T) {
	t.Helper()
	testenv.NeedRealParts(t, "dbus-daemon")
	cp := shared.Need(t)
	clusterOnce.Do(func() { client = cp.Client() })
}

// needAgentBinary is needCluster plus the update-agent binary in bins (built on first use).
func needAgentBinary(t *testing.T) {
	t.Helper()
	needCluster(t)
	binsOnce.Do(func() {
		dir := filepath.Join(shared.Dir(), "bin")
		if binsErr = testenv.GoBuild(context.Background(), "", "-o", dir+"/", "./cmd/update-agent"); binsErr == nil {
			bins = dir
		}
	})
	if binsErr != nil {
		t.Fatalf("building update-agent: %v", binsErr)
	}
}

// agentLog is every line the simulated nodes' agents log (newNode taps them): the agent's own word
// that it looked ("node side" state=..., "honouring it"), which checks that nothing happened wait for
// instead of sleeping.
var agentLog testenv.LogTap

// agentSaid waits for the agent of node to log msg after line after, with the given values
// ("state", "stale-grant", ...), and returns the line.
func agentSaid(t *testing.T, node string, after int, msg string, kv ...string) testenv.LogLine {
	t.Helper()
	return agentLog.Wait(t, after, 20*time.Second, fmt.Sprintf("agent of %s: %q %v", node, msg, kv), func(l testenv.LogLine) bool {
		if l.Values["simnode"] != node || l.Msg != msg {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if l.Values[kv[i]] != kv[i+1] {
				return false
			}
		}
		return true
	})
}

func newNode(t *testing.T, name string) *simnode.Node {
	t.Helper()
	needCluster(t)
	sn, err := simnode.New(context.Background(), name, simnode.Options{Client: client, Dir: t.TempDir(), Log: agentLog.Logger(klog.Background()), RebootDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Stop)
	waitNode(t, name, "agent reports", func(n *corev1.Node) bool { return n.Annotations[protocol.Status] == updateengine.StatusIdle })
	return sn
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitNode(t *testing.T, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	return testenv.MustWaitNode(t, client, name, 20*time.Second, what, cond)
}

func setAnnotation(t *testing.T, name, key, value string) {
	t.Helper()
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The agent's side of the protocol over a real dbus-daemon and a real API server, with the test in
// the operator's seat: report, reboot on reboot-ok (retrying a refused Reboot), reset after the reboot,
// and never reuse a stale reboot-ok.
func TestAgentReportsAndReboots(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-0")
	n := getNode(t, "agent-0")
	for k, want := range map[string]string{protocol.ID: "flatcar", protocol.Version: "4459.2.1", protocol.Group: "stable", protocol.RebootNeeded: protocol.False} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if n.Annotations[protocol.RebootNeeded] != protocol.False || n.Annotations[protocol.RebootInProgress] != protocol.False || n.Annotations[protocol.BootID] != sn.BootID() {
		t.Errorf("initial annotations %v", n.Annotations)
	}

	// The stand-in's whole update path (AttemptUpdate's steps) ends in reboot-needed.
	sn.UE.AttemptUpdate()
	n = waitNode(t, "agent-0", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	if n.Labels[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.NewVersion] != "4500.0.0" ||
		n.Annotations[protocol.Status] != updateengine.StatusUpdatedNeedReboot || n.Annotations[protocol.LastCheckedTime] == "0" {
		t.Errorf("after update: annotations %v labels %v", n.Annotations, n.Labels)
	}
	if len(sn.Login.Calls()) != 0 {
		t.Fatal("rebooted without reboot-ok")
	}

	// reboot-ok: logind refuses twice, the error is reported, the third call goes through.
	sn.Login.FailNext(2)
	setAnnotation(t, "agent-0", protocol.RebootOK, protocol.True)
	waitNode(t, "agent-0", "reboot-error reported", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootError] != "" && n.Annotations[protocol.RebootInProgress] == protocol.True
	})
	n = waitNode(t, "agent-0", "back after the reboot", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-0-boot-1" })
	if calls := sn.Login.Calls(); len(calls) != 3 || calls[2] {
		t.Errorf("logind calls %v: want 3, interactive=false", calls)
	}
	if n.Annotations[protocol.RebootNeeded] != protocol.False || n.Annotations[protocol.RebootInProgress] != protocol.False || n.Labels[protocol.RebootNeeded] != protocol.False {
		t.Errorf("flags not reset after the reboot: %v", n.Annotations)
	}
	if _, ok := n.Annotations[protocol.RebootError]; ok {
		t.Error("reboot-error of the previous boot left on the node")
	}

	// A new update while the old cycle's reboot-ok is still set: reported, but no reboot on a stale grant
	// (the agent says it saw the grant as stale).
	mark := agentLog.Mark()
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "agent-0", "reboot-needed again", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	agentSaid(t, "agent-0", mark, "node side", "state", string(protocol.NodeStaleGrant))
	if sn.Boots() != 1 || len(sn.Login.Calls()) != 3 {
		t.Fatalf("rebooted on a stale reboot-ok (boots %d)", sn.Boots())
	}
	// The operator ends the old cycle (the agent sees reboot-ok false) and grants a new one: now it reboots.
	mark = agentLog.Mark()
	setAnnotation(t, "agent-0", protocol.RebootOK, protocol.False)
	agentSaid(t, "agent-0", mark, "node side", "state", string(protocol.NodeAsking))
	setAnnotation(t, "agent-0", protocol.RebootOK, protocol.True)
	waitNode(t, "agent-0", "second reboot", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-0-boot-2" })
}

// An agent restarted within the same boot (pod restart) keeps the node's flags and goes on with a
// granted reboot; it does not pretend the node rebooted.
func TestAgentRestartSameBoot(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-1")
	sn.Login.FailNext(1000) // logind refuses: the node stays up in the middle of its reboot
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "agent-1", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	setAnnotation(t, "agent-1", protocol.RebootOK, protocol.True)
	waitNode(t, "agent-1", "reboot in progress", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootInProgress] == protocol.True })
	before := len(sn.Login.Calls())
	if err := sn.RestartAgent(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(sn.Login.Calls()) <= before {
		if time.Now().After(deadline) {
			t.Fatal("restarted agent did not go on with the granted reboot")
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := getNode(t, "agent-1")
	if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.RebootInProgress] != protocol.True {
		t.Fatalf("restart within the same boot reset the flags: %v", n.Annotations)
	}
	sn.Login.FailNext(0)
	waitNode(t, "agent-1", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-1-boot-1" })
}

// Bad input changes nothing: StatusUpdate bodies of the wrong shape, and an unreadable os-release.
func TestAgentBadInput(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-2")
	rv := getNode(t, "agent-2").ResourceVersion
	conn, err := sn.Bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	changes, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=agent-2", ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer changes.Stop()
	mark := agentLog.Mark()
	// The bad bodies, then a good one on the same connection (the bus keeps one sender's order, the
	// agent takes statuses in order): the agent's write for the good one is its word that it has
	// looked at every bad one before, and it must be the first change of the Node.
	for _, body := range [][]interface{}{
		{},
		{"UPDATE_STATUS_UPDATED_NEED_REBOOT"},
		{int32(0), 0.0, "UPDATE_STATUS_UPDATED_NEED_REBOOT", "", int64(0)},
		{int64(0), 0.0, "UPDATE_STATUS_UPDATED_NEED_REBOOT", "", int64(0), "extra"},
		{int64(0), 0.0, "", "", int64(0)},
		{int64(0), 0.0, updateengine.StatusUpdatedNeedReboot, "", int64(0)},
	} {
		if err := conn.Emit(updateengine.ObjectPath, updateengine.Interface+".StatusUpdate", body...); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-changes.ResultChan():
		n, ok := ev.Object.(*corev1.Node)
		if !ok || n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.Status] != updateengine.StatusUpdatedNeedReboot {
			t.Fatalf("the first change after the bad StatusUpdate bodies is not the good one's: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the good StatusUpdate after the bad ones changed nothing: the agent is not alive")
	}
	for i := 0; i < 4; i++ { // the four bodies of the wrong shape, each reported
		mark = agentSaid(t, "agent-2", mark, "update_engine").Seq
	}

	// os-release becomes unreadable (a directory) and update.conf disappears: the restarted agent
	// leaves the id/version/group labels as they are and keeps working.
	host := filepath.Join(sn.Dir, "host")
	if err := os.Remove(filepath.Join(host, "etc/os-release")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(host, "etc/os-release"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(host, "etc/flatcar"))
	_ = os.RemoveAll(filepath.Join(host, "usr/share/flatcar"))
	if err := sn.RestartAgent(); err != nil {
		t.Fatal(err)
	}
	// Granted as Slipway's operator grants: naming this boot (a restarted agent that never saw
	// reboot-ok false takes no other grant, see TestAgentRestartNeverReusesStaleGrant).
	setAnnotation(t, "agent-2", protocol.RebootBootID, sn.BootID())
	setAnnotation(t, "agent-2", protocol.RebootOK, protocol.True)
	n := waitNode(t, "agent-2", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-2-boot-1" })
	if n.Labels[protocol.ID] != "flatcar" || n.Labels[protocol.Group] != "stable" {
		t.Errorf("labels changed although their files were unreadable: %v", n.Labels)
	}
}

// The shipped binary's send-need-reboot, pointed at a node's bus through DBUS_SYSTEM_BUS_ADDRESS,
// emits a signal the agent takes as locksmithctl's.
func TestSendNeedRebootCommand(t *testing.T) {
	needAgentBinary(t)
	sn := newNode(t, "agent-3")
	cmd := exec.Command(filepath.Join(bins, "update-agent"), "send-need-reboot")
	cmd.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+sn.Bus.Address)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-agent send-need-reboot: %v\n%s", err, out)
	}
	n := waitNode(t, "agent-3", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	if n.Annotations[protocol.Status] != updateengine.StatusUpdatedNeedReboot {
		t.Errorf("status %q", n.Annotations[protocol.Status])
	}
	// Without a bus it fails with a clear message and a non-zero exit.
	cmd = exec.Command(filepath.Join(bins, "update-agent"), "send-need-reboot")
	cmd.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+filepath.Join(t.TempDir(), "none"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "system bus") {
		t.Errorf("send-need-reboot without a bus: %v %s", err, out)
	}
}

// /run/reboot-required (Flatcar >= 3067, what kured watches) alone is enough to ask for a reboot.
func TestRebootRequiredFile(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-4")
	path := filepath.Join(sn.Dir, "run", "reboot-required-0")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, "agent-4", "reboot-needed from the file", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	if n.Annotations[protocol.Status] != updateengine.StatusIdle {
		t.Errorf("status %q: the file, not update_engine, asked", n.Annotations[protocol.Status])
	}
}

// FLUO's README test on a node running Slipway's agent: an admin's reboot-needed=true is honoured
// (not overwritten with update_engine's idle status), and the granted reboot happens.
func TestAgentHonoursManualRebootNeeded(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-5")
	mark := agentLog.Mark()
	setAnnotation(t, "agent-5", protocol.RebootNeeded, protocol.True)
	// The agent says it honours the admin's value, and writes the label to match.
	agentSaid(t, "agent-5", mark, "reboot-needed=true set on the node by someone else; honouring it")
	waitNode(t, "agent-5", "reboot-needed label", func(n *corev1.Node) bool { return n.Labels[protocol.RebootNeeded] != protocol.False })
	n := getNode(t, "agent-5")
	if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Labels[protocol.RebootNeeded] != protocol.True {
		t.Fatalf("the agent overwrote the admin's reboot-needed: %v", n.Annotations)
	}
	setAnnotation(t, "agent-5", protocol.RebootOK, protocol.True)
	n = waitNode(t, "agent-5", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-5-boot-1" })
	if n.Annotations[protocol.RebootNeeded] != protocol.False {
		t.Errorf("after the reboot reboot-needed = %q, want false", n.Annotations[protocol.RebootNeeded])
	}
	if sn.Boots() != 1 {
		t.Errorf("boots = %d", sn.Boots())
	}
}

// A reboot-ok the operator granted in this boot (it recorded this boot's ID) is fresh even if the
// agent never saw reboot-ok go false in between; one left from the previous boot is not.
func TestAgentFreshGrantByBootID(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-6")
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "agent-6", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	setAnnotation(t, "agent-6", protocol.RebootOK, protocol.True)
	waitNode(t, "agent-6", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-6-boot-1" })
	// New update; the old grant (recording boot 0) is still there: no reboot on it.
	setAnnotation(t, "agent-6", protocol.RebootBootID, "agent-6-boot-0")
	mark := agentLog.Mark()
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "agent-6", "reboot-needed again", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	agentSaid(t, "agent-6", mark, "node side", "state", string(protocol.NodeStaleGrant))
	if sn.Boots() != 1 {
		t.Fatal("rebooted on a grant recorded in the previous boot")
	}
	// The operator grants again in this boot without reboot-ok ever reading false.
	setAnnotation(t, "agent-6", protocol.RebootBootID, "agent-6-boot-1")
	waitNode(t, "agent-6", "second reboot", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-6-boot-2" })
}

// Why 3b: after a reboot, a reboot-ok left from the finished cycle (the operator has not cleared it
// yet) must never become a second reboot -- not even when the agent pod restarts within that boot,
// which used to re-arm it. Both with a recorded grant boot (Slipway's operator) and without one (FLUO's).
func TestAgentRestartNeverReusesStaleGrant(t *testing.T) {
	needCluster(t)
	for _, recorded := range []bool{true, false} {
		name := map[bool]string{true: "agent-7", false: "agent-8"}[recorded]
		sn := newNode(t, name)
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
		waitNode(t, name, "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
		if recorded {
			setAnnotation(t, name, protocol.RebootBootID, sn.BootID())
		}
		setAnnotation(t, name, protocol.RebootOK, protocol.True)
		waitNode(t, name, "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == name+"-boot-1" })
		// A second update in the new boot, the old grant still set; then the agent pod restarts.
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
		waitNode(t, name, "reboot-needed again", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
		mark := agentLog.Mark()
		if err := sn.RestartAgent(); err != nil {
			t.Fatal(err)
		}
		// The restarted agent says it sees the grant as stale.
		agentSaid(t, name, mark, "node side", "state", string(protocol.NodeStaleGrant))
		if sn.Boots() != 1 {
			t.Fatalf("recorded grant boot %v: a restarted agent rebooted on the finished cycle's reboot-ok (boots %d)", recorded, sn.Boots())
		}
		// The operator ends the old cycle and grants anew: one reboot, as asked.
		mark = agentLog.Mark()
		setAnnotation(t, name, protocol.RebootOK, protocol.False)
		agentSaid(t, name, mark, "node side", "state", string(protocol.NodeAsking))
		if recorded {
			setAnnotation(t, name, protocol.RebootBootID, sn.BootID())
		}
		setAnnotation(t, name, protocol.RebootOK, protocol.True)
		waitNode(t, name, "second reboot", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == name+"-boot-2" })
	}
}

// Why 5: reboot-paused freezes the node on the agent's side too, even after reboot-ok; and a typo
// ("True") holds as well.
func TestAgentHonoursPauseAfterGrant(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-9")
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "agent-9", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	// Paused (with a typo) and granted in this boot, in one write: the agent's first look at the grant
	// sees the pause too, and it says it holds.
	mark := agentLog.Mark()
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"True",%q:%q,%q:"true"}}}`, protocol.RebootPaused, protocol.RebootBootID, sn.BootID(), protocol.RebootOK)
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), "agent-9", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	agentSaid(t, "agent-9", mark, "node side", "state", string(protocol.NodeHeld))
	if sn.Boots() != 0 || len(sn.Login.Calls()) != 0 {
		t.Fatalf("rebooted while reboot-paused was set (boots %d)", sn.Boots())
	}
	if n := getNode(t, "agent-9"); n.Annotations[protocol.RebootInProgress] == protocol.True {
		t.Errorf("reboot-in-progress set while paused")
	}
	setAnnotation(t, "agent-9", protocol.RebootPaused, protocol.False)
	waitNode(t, "agent-9", "rebooted after unpause", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-9-boot-1" })
}

// Why 5: a new_version of 300 KiB (annotations are capped at 256 KiB in total) used to make every
// PATCH of the agent fail, reboot-in-progress included: a granted node never rebooted. It is now cut
// to 128 bytes, said so in the log, and the node reboots.
func TestAgentOversizedNewVersion(t *testing.T) {
	needCluster(t)
	sn := newNode(t, "agent-10")
	huge := strings.Repeat("4", 300<<10)
	if err := sn.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: huge}); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, "agent-10", "reboot-needed", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	if v := n.Annotations[protocol.NewVersion]; len(v) > updateengine.MaxVersionLen || !strings.HasSuffix(v, updateengine.CutMark) {
		t.Errorf("new-version annotation is %d bytes (%.40q...), want at most %d ending in %q", len(v), v, updateengine.MaxVersionLen, updateengine.CutMark)
	}
	setAnnotation(t, "agent-10", protocol.RebootBootID, sn.BootID())
	setAnnotation(t, "agent-10", protocol.RebootOK, protocol.True)
	waitNode(t, "agent-10", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "agent-10-boot-1" })
}
