package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/fleetlock"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// docs splits rendered manifests into documents, keyed "Kind/name".
func docs(t *testing.T, rendered string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		out[meta.Kind+"/"+meta.Metadata.Name] = doc
	}
	return out
}

func decodeDoc(t *testing.T, all map[string]string, key string, into any) {
	t.Helper()
	doc, ok := all[key]
	if !ok {
		t.Fatalf("rendered overlay has no %s (it has %v)", key, slices.Sorted(func(yield func(string) bool) {
			for k := range all {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if err := yaml.Unmarshal([]byte(doc), into); err != nil {
		t.Fatal(err)
	}
}

// agentAvoidsEnrolledNodes: Slipway's agent is kept off enrolled nodes (its boot-id would make the
// FleetLock server refuse them).
func agentAvoidsEnrolledNodes(t *testing.T, all map[string]string) {
	t.Helper()
	var ds appsv1.DaemonSet
	decodeDoc(t, all, "DaemonSet/slipway-update-agent", &ds)
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("the agent DaemonSet has no required node affinity keeping it off FleetLock nodes")
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
		t.Fatalf("agent affinity: %+v", terms)
	}
	e := terms[0].MatchExpressions[0]
	if e.Key != protocol.FleetLockEnrolled || e.Operator != corev1.NodeSelectorOpNotIn || !slices.Equal(e.Values, []string{protocol.True}) {
		t.Errorf("agent affinity %+v, want %s NotIn [true]", e, protocol.FleetLockEnrolled)
	}
}

// noFleetLockInOperator: the operator's Deployment serves no FleetLock (a server anyone on the
// network reaches does not run with the operator's token).
func noFleetLockInOperator(t *testing.T, all map[string]string) {
	t.Helper()
	var dep appsv1.Deployment
	decodeDoc(t, all, "Deployment/slipway-update-operator", &dep)
	for _, c := range dep.Spec.Template.Spec.Containers {
		if strings.Contains(strings.Join(c.Args, " "), "fleetlock") {
			t.Errorf("operator args %v mention FleetLock", c.Args)
		}
		for _, p := range c.Ports {
			if p.Name == "fleetlock" {
				t.Errorf("operator container declares a fleetlock port")
			}
		}
	}
}

// deploy/fleetlock/: the per-node server. A hostNetwork DaemonSet on enrolled nodes, under a
// ServiceAccount of its own, listening on the loopback address the Butane snippet points Zincati at,
// with no Service or NetworkPolicy (nothing on the pod network to reach); the agent stays off those
// nodes; the operator serves no FleetLock. The API server takes the DaemonSet.
func TestFleetLockOverlay(t *testing.T) {
	all := docs(t, kustomize(t, "fleetlock"))
	var ds appsv1.DaemonSet
	decodeDoc(t, all, "DaemonSet/slipway-fleetlock", &ds)
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.NodeSelector[protocol.FleetLockEnrolled] != protocol.True || spec.ServiceAccountName != "slipway-fleetlock" {
		t.Errorf("DaemonSet: hostNetwork=%v nodeSelector=%v serviceAccount=%q", spec.HostNetwork, spec.NodeSelector, spec.ServiceAccountName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("containers: %+v", spec.Containers)
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/update-agent", "fleetlock"}) {
		t.Errorf("command %v", c.Command)
	}
	var listen string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			listen = v
		}
	}
	if err := fleetlock.LoopbackOnly(listen); err != nil {
		t.Errorf("args %v: %v", c.Args, err)
	}
	_, port, _ := net.SplitHostPort(listen)
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.String() != port || p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe %+v, want GET http://127.0.0.1:%s/healthz", name, p, port)
		}
	}
	// A port below 1024 (no unprivileged process on the node can take it over while the pod restarts),
	// bound with one capability and nothing else.
	if n, _ := strconv.Atoi(port); n <= 0 || n >= 1024 {
		t.Errorf("listens on port %s: an unprivileged process on the node could take it over", port)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Errorf("container securityContext %+v: want no escalation, a read-only root, only NET_BIND_SERVICE", sc)
	}
	var nsFromPod bool
	for _, e := range c.Env {
		nsFromPod = nsFromPod || e.Name == "UPDATE_AGENT_FLEETLOCK_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}
	if !nsFromPod {
		t.Error("the fleet switch's namespace is not the pod's own (an overlay that moves the namespace would break it)")
	}
	for k := range all {
		if strings.HasPrefix(k, "Service/") || strings.HasPrefix(k, "NetworkPolicy/") {
			t.Errorf("the per-node overlay renders %s: nothing should be reachable from the pod network", k)
		}
	}
	agentAvoidsEnrolledNodes(t, all)
	noFleetLockInOperator(t, all)
	snippet, err := os.ReadFile("../butane/snippets/fcos-fleetlock.bu")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`base_url = "http://%s/"`, listen); !strings.Contains(string(snippet), want) {
		t.Errorf("butane/snippets/fcos-fleetlock.bu does not point Zincati at the per-node server (%s)", want)
	}
	cp := controlPlane(t)
	if _, err := cp.Client().AppsV1().DaemonSets(ns).Create(context.Background(), &ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the API server refuses the DaemonSet: %v", err)
	}
}

// deploy/fleetlock-central/: the opt-in central server, in a Deployment of its own under its own
// ServiceAccount (not the operator's), behind a Service with a fixed ClusterIP and a NetworkPolicy
// that opens its port only to node addresses.
func TestFleetLockCentralOverlay(t *testing.T) {
	all := docs(t, kustomize(t, "fleetlock-central"))
	var dep appsv1.Deployment
	decodeDoc(t, all, "Deployment/slipway-fleetlock-central", &dep)
	var svc corev1.Service
	decodeDoc(t, all, "Service/slipway-fleetlock", &svc)
	var np networkingv1.NetworkPolicy
	decodeDoc(t, all, "NetworkPolicy/slipway-fleetlock-central", &np)
	spec := dep.Spec.Template.Spec
	if spec.ServiceAccountName != "slipway-fleetlock-central" {
		t.Errorf("serviceAccount %q, want slipway-fleetlock-central", spec.ServiceAccountName)
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/update-agent", "fleetlock"}) || !slices.Contains(c.Args, "--central") {
		t.Errorf("command %v args %v", c.Command, c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != svc.Spec.Ports[0].TargetPort.StrVal || !slices.Contains(c.Args, fmt.Sprintf("--listen=:%d", c.Ports[0].ContainerPort)) {
		t.Errorf("the Service targets %q; the container declares %v and listens per %v", svc.Spec.Ports[0].TargetPort.StrVal, c.Ports, c.Args)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the server's pods", k, v)
		}
	}
	if svc.Spec.ClusterIP == "" {
		t.Error("the Service has no fixed ClusterIP (Zincati on the host cannot resolve a name)")
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("NetworkPolicy selector %s=%s does not select the server's pods", k, v)
		}
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 || np.Spec.Ingress[0].From[0].IPBlock == nil || np.Spec.Ingress[0].Ports[0].Port.StrVal != "fleetlock" {
		t.Errorf("NetworkPolicy ingress %+v: want the fleetlock port from node CIDRs only", np.Spec.Ingress)
	}
	agentAvoidsEnrolledNodes(t, all)
	noFleetLockInOperator(t, all)
	cp := controlPlane(t)
	if _, err := cp.Client().NetworkingV1().NetworkPolicies(ns).Create(context.Background(), &np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the API server refuses the NetworkPolicy: %v", err)
	}
}

// applyOverlay server-side applies what `kubectl kustomize deploy/<dir>` renders, but Services: the
// central overlay's fixed ClusterIP lies outside the test API server's service range.
func applyOverlay(t *testing.T, cp *testenv.ControlPlane, dir string) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for k, doc := range docs(t, kustomize(t, dir)) {
		if !strings.HasPrefix(k, "Service/") {
			keep = append(keep, doc)
		}
	}
	apply := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-")
	apply.Stdin = strings.NewReader(strings.Join(keep, "\n---\n"))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k %s: %v\n%s", dir, err, out)
	}
}

// tokenKubeconfig writes a kubeconfig that authenticates with token alone.
func tokenKubeconfig(t *testing.T, cp *testenv.ControlPlane, token string) string {
	t.Helper()
	admin := cp.RestConfig()
	cfg := clientcmdapi.NewConfig()
	// The test API server's certificate is verified as the admin client verifies it (not at all: it
	// is a throwaway); what is under test is the token.
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.TLSClientConfig.CAData, InsecureSkipTLSVerify: admin.TLSClientConfig.Insecure}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeLowLoopback is a loopback address with a port below 1024 nobody listens on now (the per-node
// server refuses others); binding one needs root, as the server's pod has NET_BIND_SERVICE.
func freeLowLoopback(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("binding a port below 1024 needs root (the per-node FleetLock server listens on one)")
	}
	for p := 700; p < 1024; p++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("no free port in 127.0.0.1:700-1023")
	return ""
}

// zincatiAsks posts what Zincati posts (its exact body and header) and returns status and kind.
func zincatiAsks(t *testing.T, base, op, id, group string) (int, string) {
	t.Helper()
	status, kind, err := fleetlock.Ask(context.Background(), base, op, id, group)
	if err != nil {
		t.Fatal(err)
	}
	return status, kind
}

// startFleetLock runs the real `update-agent fleetlock` with args and kubeconfig until the test
// ends, and waits until it answers on listen.
func startFleetLock(t *testing.T, bin, kubeconfig, listen string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "fleetlock.log")
	p, err := operatorproc.Start(bin, append([]string{"fleetlock", "--kubeconfig=" + kubeconfig, "--listen=" + listen, "--namespace=" + ns}, args...), logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	base := "http://" + listen
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := p.Alive(); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("update-agent fleetlock did not answer on %s within 1m: %s", listen, testenv.LogTail(logPath))
		}
	}
}

// The FleetLock servers on a real API server, with their real credentials (TokenRequest tokens bound
// to pods, as the kubelet mounts them), as real `update-agent fleetlock` processes receiving Zincati's
// exact requests; and the admission policy that confines their tokens, probed directly.
//
// Per node (fcos-a's server): its own id is asked for and written on its own Node; another enrolled
// node's id is refused 403 not_this_node and nothing is written. Its token, used directly, changes
// only its own enrolled, agentless Node, only the agent's and the FleetLock keys.
// Central: it answers for every enrolled agentless node; its token is held to the same keys, on
// enrolled agentless Nodes only. The agent's token may not write the FleetLock keys.
func TestFleetLockServersConfined(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	applyOverlay(t, cp, "fleetlock")
	applyOverlay(t, cp, "fleetlock-central")
	admin := cp.Client()
	machine := map[string]string{"fcos-a": "a0000000000000000000000000000001", "fcos-b": "b0000000000000000000000000000002", "fcos-agent": "c0000000000000000000000000000003", "fcos-plain": "d0000000000000000000000000000004"}
	ids := map[string]string{}
	for name, m := range machine {
		if _, err := testenv.CreateNode(ctx, admin, name, "boot-"+name, nil); err != nil {
			t.Fatal(err)
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.MachineID = m
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ids[name], _ = fleetlock.NodeID(m)
		meta := map[string]any{}
		if name != "fcos-plain" {
			meta["labels"] = map[string]string{protocol.FleetLockEnrolled: protocol.True}
		}
		if name == "fcos-agent" {
			meta["annotations"] = map[string]string{protocol.BootID: "boot-fcos-agent"}
		}
		body, _ := json.Marshal(map[string]any{"metadata": meta})
		if _, err := admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	perNodeToken := saToken(ctx, t, admin, "slipway-fleetlock", podOf(ctx, t, admin, "slipway-fleetlock", "fleetlock-fcos-a", "fcos-a"))
	centralToken := saToken(ctx, t, admin, "slipway-fleetlock-central", podOf(ctx, t, admin, "slipway-fleetlock-central", "fleetlock-central", "fcos-b"))
	perNode, central := tokenClient(cp, perNodeToken), tokenClient(cp, centralToken)
	agent := tokenClient(cp, agentToken(ctx, t, admin, podOf(ctx, t, admin, "slipway-update-agent", "update-agent-fcos-a", "fcos-a")))
	// A policy is enforced once compiled: wait until the per-node token is refused another node.
	waitEnforced(ctx, t, perNode, "slipway-update-agent", "fcos-b", `{"metadata":{"annotations":{"`+protocol.FleetLockGroup+`":"probe"}}}`)

	rv := func(name string) string {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.ResourceVersion
	}
	unchanged := func(t *testing.T, name, before string) {
		t.Helper()
		if after := rv(name); after != before {
			n, _ := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			t.Errorf("%s changed: %v %v", name, n.Annotations, n.Labels)
		}
	}

	// What RBAC gives each server: Nodes (read, patch) and the fleet switch (read); nothing that
	// drains, deletes or writes status.
	for _, sa := range []string{"slipway-fleetlock", "slipway-fleetlock-central"} {
		checkAccess(t, sa, as(t, cp, sa), []access{
			{"patch", "", "nodes", "", "", true},
			{"watch", "", "nodes", "", "", true},
			{"patch", "", "nodes", "status", "", false},
			{"delete", "", "nodes", "", "", false},
			{"create", "", "pods", "eviction", "default", false},
			{"delete", "", "pods", "", "default", false},
			{"list", "", "secrets", "", ns, false},
			{"update", "", "configmaps", "", ns, false},
			{"get", "coordination.k8s.io", "leases", "", ns, false},
		})
	}

	bin, err := operatorproc.BuildAgent(ctx, filepath.Join(t.TempDir(), "bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("per-node server answers for its own node only", func(t *testing.T) {
		base := startFleetLock(t, bin.Path, tokenKubeconfig(t, cp, perNodeToken), freeLowLoopback(t), "--node=fcos-a")
		before := rv("fcos-b")
		for _, op := range []string{"pre-reboot", "steady-state"} {
			if status, kind := zincatiAsks(t, base, op, ids["fcos-b"], "default"); status != http.StatusForbidden || kind != fleetlock.KindNotThisNode {
				t.Errorf("%s for fcos-b's id: %d %s, want 403 %s", op, status, kind, fleetlock.KindNotThisNode)
			}
		}
		unchanged(t, "fcos-b", before)
		if status, kind := zincatiAsks(t, base, "pre-reboot", ids["fcos-a"], "default"); status != http.StatusConflict || kind != fleetlock.KindWaiting {
			t.Fatalf("pre-reboot for its own id: %d %s, want 409 %s", status, kind, fleetlock.KindWaiting)
		}
		n, _ := admin.CoreV1().Nodes().Get(ctx, "fcos-a", metav1.GetOptions{})
		if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.FleetLockID] != ids["fcos-a"] || n.Annotations[protocol.FleetLockGroup] != "default" {
			t.Errorf("fcos-a after its ask: %v", n.Annotations)
		}
	})
	t.Run("per-node server refuses a non-loopback address", func(t *testing.T) {
		out, err := exec.Command(bin.Path, "fleetlock", "--node=fcos-a", "--listen=0.0.0.0:495").CombinedOutput()
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "loopback") {
			t.Errorf("--listen=0.0.0.0:495: %v %s, want exit 2 naming loopback", err, out)
		}
	})
	t.Run("central server answers for enrolled agentless nodes", func(t *testing.T) {
		base := startFleetLock(t, bin.Path, tokenKubeconfig(t, cp, centralToken), freeLowLoopback(t), "--central")
		if status, kind := zincatiAsks(t, base, "pre-reboot", ids["fcos-b"], "default"); status != http.StatusConflict || kind != fleetlock.KindWaiting {
			t.Errorf("pre-reboot for fcos-b: %d %s, want 409 %s", status, kind, fleetlock.KindWaiting)
		}
		for name, want := range map[string]string{"fcos-agent": fleetlock.KindAgentNode, "fcos-plain": fleetlock.KindNotEnrolled} {
			before := rv(name)
			if _, kind := zincatiAsks(t, base, "pre-reboot", ids[name], "default"); kind != want {
				t.Errorf("pre-reboot for %s: %s, want %s", name, kind, want)
			}
			unchanged(t, name, before)
		}
	})

	ann := func(k, v string) string { return `{"metadata":{"annotations":{"` + k + `":"` + v + `"}}}` }
	for _, c := range []struct {
		name   string
		client kubernetes.Interface
		node   string
		body   string
		allow  bool
		why    string
	}{
		{"per-node: FleetLock keys on its own node", perNode, "fcos-a", ann(protocol.FleetLockGroup, "g2"), true, ""},
		{"per-node: reboot-in-progress on its own node", perNode, "fcos-a", ann(protocol.RebootInProgress, "true"), true, ""},
		{"per-node: another enrolled node", perNode, "fcos-b", ann(protocol.RebootNeeded, "true"), false, "may change only its own Node"},
		{"per-node: reboot-ok on its own node", perNode, "fcos-a", ann(protocol.RebootOK, "true"), false, "does not own: " + protocol.RebootOK},
		{"per-node: cordon its own node", perNode, "fcos-a", `{"spec":{"unschedulable":true}}`, false, "spec"},
		{"per-node: an agent key it does not write (boot-id)", perNode, "fcos-a", ann(protocol.BootID, "boot-x"), false, "does not own: " + protocol.BootID},
		{"per-node: FLUO's group label", perNode, "fcos-a", `{"metadata":{"labels":{"` + protocol.Group + `":"g"}}}`, false, "does not own: " + protocol.Group},
		{"per-node: un-enrol its own node", perNode, "fcos-a", `{"metadata":{"labels":{"` + protocol.FleetLockEnrolled + `":null}}}`, false, "does not own: " + protocol.FleetLockEnrolled},
		{"central: FleetLock keys on an enrolled agentless node", central, "fcos-b", ann(protocol.FleetLockGroup, "g2"), true, ""},
		{"central: a node with an agent", central, "fcos-agent", ann(protocol.RebootNeeded, "true"), false, "run no update-agent"},
		{"central: a node not enrolled", central, "fcos-plain", ann(protocol.RebootNeeded, "true"), false, "labelled update.slipway.dev/fleetlock=true"},
		{"central: reboot-ok", central, "fcos-b", ann(protocol.RebootOK, "true"), false, "does not own: " + protocol.RebootOK},
		{"central: a taint", central, "fcos-b", `{"spec":{"taints":[{"key":"example.com/x","effect":"NoExecute"}]}}`, false, "spec"},
		{"agent: a FleetLock key on its own node", agent, "fcos-a", ann(protocol.FleetLockGroup, "g3"), false, "does not own: " + protocol.FleetLockGroup},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := rv(c.node)
			_, err := c.client.CoreV1().Nodes().Patch(ctx, c.node, types.MergePatchType, []byte(c.body), metav1.PatchOptions{})
			switch {
			case c.allow && err != nil:
				t.Errorf("refused: %v", err)
			case c.allow:
			case err == nil:
				t.Errorf("patch %s of %s was allowed", c.body, c.node)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'slipway-update-agent'"):
				t.Errorf("refused, but not by the policy: %v", err)
			case !strings.Contains(err.Error(), c.why):
				t.Errorf("refusal does not say %q: %v", c.why, err)
			}
			if !c.allow {
				unchanged(t, c.node, before)
			}
		})
	}
}

var fleetlockKeysPattern = regexp.MustCompile(`'([^']*)'`)

// The keys the policy lets the FleetLock servers change are exactly what they write: the node side's
// effects (protocol.NodeEffects, NodeBack) and the keys protocol.Owners gives FleetLock; of those only
// reboot-needed is also a label.
func TestFleetLockPolicyKeys(t *testing.T) {
	b, err := os.ReadFile("base/agent-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Split(string(b), "\n---\n")[0]
	list := func(name string) []string {
		i := strings.Index(doc, "name: "+name+"\n")
		if i < 0 {
			t.Fatalf("base/agent-policy.yaml has no %s", name)
		}
		rest := doc[i:]
		rest = rest[:strings.Index(rest, "]")+1]
		var keys []string
		for _, m := range fleetlockKeysPattern.FindAllStringSubmatch(rest, -1) {
			keys = append(keys, m[1])
		}
		slices.Sort(keys)
		return keys
	}
	var wantAnn, wantLabels []string
	for k, w := range protocol.Owners {
		if w == protocol.WriterFleetLock {
			wantAnn = append(wantAnn, k)
		}
	}
	for _, effects := range protocol.NodeEffects {
		for _, e := range append(effects, protocol.NodeBack...) {
			if !slices.Contains(wantAnn, e.Key) {
				wantAnn = append(wantAnn, e.Key)
			}
			if e.Label && !slices.Contains(wantLabels, e.Key) {
				wantLabels = append(wantLabels, e.Key)
			}
		}
	}
	slices.Sort(wantAnn)
	slices.Sort(wantLabels)
	if got := list("fleetlockAnnotations"); !slices.Equal(got, wantAnn) {
		t.Errorf("fleetlockAnnotations = %q, want %q", got, wantAnn)
	}
	if got := list("fleetlockLabels"); !slices.Equal(got, wantLabels) {
		t.Errorf("fleetlockLabels = %q, want %q", got, wantLabels)
	}
}
