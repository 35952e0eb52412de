package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/slipway-dev/slipway/e2e/harness"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const ns = "slipway-e2e"

func clientset(t *testing.T, cfg *envconf.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return c
}

func skipIfNeeded(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// nodeState is what a test remembers about a node before firing an update at it.
type nodeState struct {
	name   string
	bootID string
	boots  int // boot counter on the guest's disk (-1 when there is no shell into the node)
}

func before(t *testing.T, ctx context.Context, c kubernetes.Interface, name string) nodeState {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := nodeState{name: name, bootID: n.Status.NodeInfo.BootID, boots: -1}
	if cluster != nil {
		if s.boots, err = cluster.VM(name).BootCount(ctx); err != nil {
			t.Fatalf("%s: reading the boot counter: %v", name, err)
		}
	}
	return s
}

// fireLocksmith emits, on the node's own system bus, exactly what `locksmithctl send-need-reboot`
// emits, from a pod on that node running `update-agent send-need-reboot` with the host's D-Bus.
func fireLocksmith(t *testing.T, ctx context.Context, c kubernetes.Interface, node string) {
	t.Helper()
	name := fmt.Sprintf("fire-%s-%d", node, time.Now().UnixNano()%100000)
	root := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "send-need-reboot", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/update-agent", "send-need-reboot"},
				Env:             []corev1.EnvVar{{Name: "DBUS_SYSTEM_BUS_ADDRESS", Value: "unix:path=/var/run/dbus/system_bus_socket"}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root},
				VolumeMounts:    []corev1.VolumeMount{{Name: "dbus", MountPath: "/var/run/dbus"}},
			}},
			Volumes: []corev1.Volume{{Name: "dbus", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/dbus"}}}},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("send-need-reboot pod failed: %+v", p.Status.ContainerStatuses)
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		t.Fatalf("firing on %s: %v", node, err)
	}
	t.Logf("%s: StatusUpdate(UPDATE_STATUS_UPDATED_NEED_REBOOT) sent on its system bus, locksmithctl-style", node)
}

// fireAttemptUpdate asks the node's update_engine (stand-in) to update, over D-Bus inside the VM.
func fireAttemptUpdate(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	out, err := cluster.VM(node).Exec(ctx, "/usr/bin/dbus-send", "--system", "--print-reply", "--dest=com.coreos.update1",
		"/com/coreos/update1", "com.coreos.update1.Manager.AttemptUpdate")
	if err != nil {
		t.Fatalf("AttemptUpdate on %s: %v %s", node, err, out)
	}
	t.Logf("%s: com.coreos.update1.Manager.AttemptUpdate called inside the VM", node)
}

// waitRebooted waits for FLUO's final state after a verified reboot and checks the proof of it.
func waitRebooted(t *testing.T, ctx context.Context, c kubernetes.Interface, s nodeState, timeout time.Duration) {
	t.Helper()
	n, err := testenv.WaitNode(ctx, c, s.name, timeout, func(n *corev1.Node) bool {
		a := n.Annotations
		return n.Status.NodeInfo.BootID != s.bootID && protocol.NodeReady(n) && !n.Spec.Unschedulable &&
			a[protocol.RebootOK] == protocol.False && a[protocol.RebootNeeded] == protocol.False &&
			a[protocol.RebootInProgress] == protocol.False && a[protocol.LastRebootTime] != ""
	})
	if err != nil {
		msg := ""
		if cluster != nil {
			msg = "\nserial console tail:\n" + cluster.VM(s.name).SerialTail(2000)
		}
		t.Fatalf("%s did not come back from a verified reboot: %v%s", s.name, err, msg)
	}
	if _, ok := n.Annotations[protocol.Cordoned]; ok {
		t.Errorf("%s: Slipway's cordon marker left behind", s.name)
	}
	if s.boots >= 0 {
		boots, err := cluster.VM(s.name).BootCount(ctx)
		if err != nil {
			t.Fatalf("%s: boot counter: %v", s.name, err)
		}
		if boots != s.boots+1 {
			t.Errorf("%s: boot counter went from %d to %d, want exactly one reboot", s.name, s.boots, boots)
		}
	}
	t.Logf("%s: rebooted (boot ID %s -> %s), Ready, uncordoned, reboot-ok=false", s.name, s.bootID, n.Status.NodeInfo.BootID)
}

func annotateNode(ctx context.Context, c kubernetes.Interface, node, key, value string) error {
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// slipwaySnippet is butane/snippets/flatcar-slipway.ign: what every node gets.
func slipwaySnippet(t *testing.T) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	snippet, err := os.ReadFile(harness.SlipwaySnippet(root))
	if err != nil {
		t.Fatal(err)
	}
	return snippet
}

// nodeShell runs a script in vm's shell and returns its output, trimmed; an error fails the test.
func nodeShell(ctx context.Context, t *testing.T, vm *harness.VM) func(script string) string {
	return func(script string) string {
		t.Helper()
		out, err := vm.Exec(ctx, "/bin/sh", "-c", script)
		if err != nil {
			t.Fatalf("%s on %s: %v", script, vm.Name, err)
		}
		return strings.TrimSpace(out)
	}
}

// unitStates is what systemctl says of locksmithd and update-engine, enabled and active each: a
// node in line is "masked inactive enabled active".
func unitStates(sh func(string) string) string {
	return sh("echo $(systemctl is-enabled locksmithd.service) $(systemctl is-active locksmithd.service) $(systemctl is-enabled update-engine.service) $(systemctl is-active update-engine.service)")
}

// inLine is unitStates of a node as the snippet leaves it.
const inLine = "masked inactive enabled active"

// putBackInLine brings vm's units back to what the snippet says (locksmithd masked, update-engine
// enabled and running), with a budget of its own: a scenario that drifted the node and then failed
// must not leave a running locksmithd (which reboots on its own) or a stopped update-engine (the
// scenarios after it fire updates through it) to the next scenario.
func putBackInLine(t *testing.T, vm *harness.VM) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := vm.Exec(ctx, "/bin/sh", "-c", "echo $(systemctl is-enabled locksmithd.service) $(systemctl is-active locksmithd.service) $(systemctl is-enabled update-engine.service) $(systemctl is-active update-engine.service)")
	if err == nil && strings.TrimSpace(out) == inLine {
		return
	}
	t.Logf("%s is not in line after this scenario (%q, %v): applying the snippet", vm.Name, strings.TrimSpace(out), err)
	if out, err := vm.ExecInput(ctx, slipwaySnippet(t), cluster.AgentPath, "node-config", "apply", "--config", "-"); err != nil {
		t.Errorf("putting %s back in line: %v\n%s", vm.Name, err, out)
	}
}

// restoreAfterFailure runs after every test of the local provider: when one failed, every node it may
// have drifted is put back in line, so one failure does not fail the scenarios after it.
func restoreAfterFailure(ctx context.Context, _ *envconf.Config, t *testing.T) (context.Context, error) {
	if cluster == nil || !t.Failed() {
		return ctx, nil
	}
	for _, vm := range cluster.VMs {
		if vm.Alive() {
			putBackInLine(t, vm)
		}
	}
	return ctx, nil
}
