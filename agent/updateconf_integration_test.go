package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

const publicServer = "https://public.update.flatcar-linux.net/v1/update/"

func newConfNode(t *testing.T, name string, o simnode.Options) *simnode.Node {
	t.Helper()
	needCluster(t)
	o.Client, o.Dir, o.Log, o.RebootDelay = client, t.TempDir(), agentLog.Logger(klog.Background()), 100*time.Millisecond
	sn, err := simnode.New(context.Background(), name, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Stop)
	waitNode(t, name, "agent reports", func(n *corev1.Node) bool { return n.Annotations[protocol.Status] == updateengine.StatusIdle })
	return sn
}

func readConf(t *testing.T, sn *simnode.Node) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sn.Dir, "host", updateconf.Path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The channel a pool declares reaches the node on a real dbus-daemon and a real API server: the agent
// writes pool-group into update.conf (the file's other lines kept), asks update_engine to check, and
// the stand-in, which reads update.conf at every check as update_engine does, stages what the server
// offers the new group; the agent reports the group label and the server.
func TestAgentWritesPoolUpdateSettings(t *testing.T) {
	sn := newConfNode(t, "conf-0", simnode.Options{Offers: map[string]string{"beta": "4600.0.0"}})
	n := getNode(t, "conf-0")
	if n.Labels[protocol.Group] != "stable" || n.Annotations[protocol.Server] != publicServer {
		t.Fatalf("before: group %q, server %q", n.Labels[protocol.Group], n.Annotations[protocol.Server])
	}

	setAnnotation(t, "conf-0", protocol.PoolGroup, "beta")
	n = waitNode(t, "conf-0", "group beta reported and its offer staged", func(n *corev1.Node) bool {
		return n.Labels[protocol.Group] == "beta" && n.Annotations[protocol.NewVersion] == "4600.0.0" &&
			n.Annotations[protocol.Status] == updateengine.StatusUpdatedNeedReboot
	})
	if e, ok := n.Annotations[protocol.UpdateConfError]; ok {
		t.Errorf("update-conf-error %q", e)
	}
	if got, want := readConf(t, sn), updateconf.Marker+"\nGROUP=beta\nREBOOT_STRATEGY=off\n"; got != want {
		t.Errorf("update.conf = %q, want %q", got, want)
	}
	checks := sn.UE.Checks()
	if len(checks) != 1 || checks[0] != (updateconf.Settings{Group: "beta", Server: publicServer}) {
		t.Errorf("update_engine's checks read %+v, want one with group beta", checks)
	}

	// A server too; then values no agent may write, whoever wrote them: refused, the file unchanged.
	setAnnotation(t, "conf-0", protocol.PoolServer, "https://nebraska.example/v1/update/")
	waitNode(t, "conf-0", "server reported", func(n *corev1.Node) bool {
		return n.Annotations[protocol.Server] == "https://nebraska.example/v1/update/"
	})
	before := readConf(t, sn)
	for _, bad := range []string{"beta\nSERVER=https://evil.example/", "my beta", ""} {
		setAnnotation(t, "conf-0", protocol.PoolGroup, bad)
		n = waitNode(t, "conf-0", "refusal reported", func(n *corev1.Node) bool {
			return strings.HasPrefix(n.Annotations[protocol.UpdateConfError], "refused the pool's update settings")
		})
		if got := readConf(t, sn); got != before {
			t.Errorf("group %q changed update.conf to %q", bad, got)
		}
		if n.Labels[protocol.Group] != "beta" {
			t.Errorf("group %q: label %q", bad, n.Labels[protocol.Group])
		}
		setAnnotation(t, "conf-0", protocol.PoolGroup, "beta")
		waitNode(t, "conf-0", "refusal gone", func(n *corev1.Node) bool {
			_, ok := n.Annotations[protocol.UpdateConfError]
			return !ok
		})
	}
	// A reboot keeps /etc: the node comes back on the staged version, still in beta.
	setAnnotation(t, "conf-0", protocol.RebootBootID, sn.BootID())
	setAnnotation(t, "conf-0", protocol.RebootOK, protocol.True)
	n = waitNode(t, "conf-0", "rebooted", func(n *corev1.Node) bool { return n.Annotations[protocol.BootID] == "conf-0-boot-1" })
	if n.Labels[protocol.Version] != "4600.0.0" || n.Labels[protocol.Group] != "beta" {
		t.Errorf("after the reboot: version %q, group %q", n.Labels[protocol.Version], n.Labels[protocol.Group])
	}
}

// A node whose update.conf is its user's own (no "# managed-by: slipway" line) is never edited: the
// agent says why on the Node and leaves the file byte for byte; once the user adds the line, the
// pool's group is written.
func TestAgentLeavesUsersUpdateConf(t *testing.T) {
	sn := newConfNode(t, "conf-1", simnode.Options{UserUpdateConf: true})
	before := readConf(t, sn)
	mark := agentLog.Mark()
	setAnnotation(t, "conf-1", protocol.PoolGroup, "beta")
	n := waitNode(t, "conf-1", "refusal reported", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.UpdateConfError], "# managed-by: slipway")
	})
	agentSaid(t, "conf-1", mark, "update.conf not changed to what the node's pool declares")
	if got := readConf(t, sn); got != before {
		t.Errorf("the user's update.conf changed to %q", got)
	}
	if n.Labels[protocol.Group] != "stable" {
		t.Errorf("group label %q", n.Labels[protocol.Group])
	}
	if len(sn.UE.Checks()) != 0 {
		t.Errorf("update_engine asked to check although nothing was written: %+v", sn.UE.Checks())
	}

	path := filepath.Join(sn.Dir, "host", updateconf.Path)
	if err := os.WriteFile(path, []byte("# managed-by: slipway\n"+before), 0o644); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "conf-1", "group beta once the file is Slipway's", func(n *corev1.Node) bool {
		_, errSet := n.Annotations[protocol.UpdateConfError]
		return n.Labels[protocol.Group] == "beta" && !errSet
	})
	if got, want := readConf(t, sn), "# managed-by: slipway\nGROUP=beta\nREBOOT_STRATEGY=off\n"; got != want {
		t.Errorf("update.conf = %q, want %q", got, want)
	}
}
