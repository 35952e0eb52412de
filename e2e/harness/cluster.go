package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Config describes the local cluster.
type Config struct {
	Nodes     int
	Dir       string // everything of this cluster: control plane data, VM disks, serial logs, kubeconfig
	MemoryMB  int
	CPUs      int
	Operator  []string // extra update-operator flags
	Log       func(format string, args ...interface{})
	BootLimit time.Duration // how long nodes may take to become Ready
	// FlatcarImage boots a real Flatcar QEMU image instead of the Debian node image ($FLATCAR_IMAGE).
	FlatcarImage string
}

// Cluster is a running local cluster.
type Cluster struct {
	Config
	CP         *testenv.ControlPlane
	Client     kubernetes.Interface
	VMs        []*VM
	Kubeconfig string
	AgentPath  string // update-agent inside the VMs
	bins       string // built update-operator etc. (hack/build-node-image.sh inputs)
	stopServer func() // the file server of Flatcar nodes' Ignition
	mu         sync.Mutex
	operator   *operatorproc.Proc
	start      time.Time
}

// Controllers the VMs' kubelets need from kube-controller-manager (checked one by one: without
// node-lifecycle the not-ready taint never lifts, without serviceaccount pods fail, without the root
// CA publisher token volumes fail, without disruption every PDB blocks, without daemonset no agents).
var vmControllers = []string{
	"node-lifecycle-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"taint-eviction-controller", "disruption-controller", "replicaset-controller", "deployment-controller",
	"daemonset-controller", "garbage-collector-controller",
}

func (c *Cluster) logf(format string, args ...interface{}) {
	if c.Log != nil {
		c.Log("[+%5.1fs] "+format, append([]interface{}{time.Since(c.start).Seconds()}, args...)...)
	}
}

// Up builds what is missing (control plane binaries, node image), starts the control plane, boots the
// VMs, waits for every node to be Ready, installs the agent DaemonSet and waits for every agent to
// report. On error everything started is stopped again.
func Up(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 768
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 1
	}
	if cfg.BootLimit == 0 {
		cfg.BootLimit = DefaultBootLimit
	}
	if cfg.FlatcarImage == "" {
		cfg.FlatcarImage = os.Getenv("FLATCAR_IMAGE")
	}
	if cfg.FlatcarImage != "" {
		if _, err := os.Stat(cfg.FlatcarImage); err != nil {
			return nil, fmt.Errorf("FLATCAR_IMAGE=%s: %v; `make flatcar-image` downloads one on a machine with internet, or unset FLATCAR_IMAGE to boot the Debian node image", cfg.FlatcarImage, err)
		}
		if cfg.MemoryMB < 2048 {
			cfg.MemoryMB = 2048 // Flatcar's initramfs and Ignition want 2 GiB
		}
	}
	c = &Cluster{Config: cfg, start: time.Now(), AgentPath: "/usr/local/bin/update-agent"}
	if cfg.FlatcarImage != "" {
		c.AgentPath = FlatcarAgentPath
	}
	started := c // the returns below set c to nil; tear down what was started
	defer func() {
		if err != nil {
			started.Down()
		}
	}()
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := testenv.RefuseUnderShort("the VM cluster (node image, control plane, QEMU)"); err != nil {
		return nil, err
	}
	c.logf("building the node image if its inputs changed (hack/build-node-image.sh)")
	build := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-node-image.sh"))
	build.Stderr = os.Stderr
	out, err := build.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/build-node-image.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	image := lines[len(lines)-1]
	imgDir := filepath.Dir(image)
	c.bins = filepath.Join(imgDir, "inputs")

	tokens := map[string]string{}
	for i := 0; i < cfg.Nodes; i++ {
		tokens[nodeName(i)] = randomToken()
	}
	c.logf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
	c.CP, err = testenv.StartControlPlane(ctx, filepath.Join(cfg.Dir, "controlplane"), testenv.Options{
		ControllerManager: true, Controllers: vmControllers, Scheduler: true,
		ForKubelets: true, ServingIPs: []string{"10.0.2.2"}, NodeTokens: tokens,
	})
	if err != nil {
		return nil, err
	}
	c.Client = c.CP.Client()
	c.Kubeconfig = c.CP.Kubeconfig
	ca, err := os.ReadFile(c.CP.CAFile)
	if err != nil {
		return nil, err
	}
	snippet, err := os.ReadFile(SlipwaySnippet(root))
	if err != nil {
		return nil, err
	}
	var served FlatcarServed
	if cfg.FlatcarImage != "" {
		kubeletDir, err := testenv.BinDir()
		if err != nil {
			return nil, err
		}
		files := filepath.Join(cfg.Dir, "served")
		if err := FlatcarFiles(files, c.bins, filepath.Join(kubeletDir, "kubelet"), filepath.Join(c.bins, "cni")); err != nil {
			return nil, err
		}
		port, stop, err := serveFiles(files)
		if err != nil {
			return nil, err
		}
		c.stopServer = stop
		if served, err = HashServed(files, fmt.Sprintf("http://10.0.2.2:%d/", port)); err != nil {
			return nil, err
		}
		c.logf("Flatcar image %s; Ignition fetches kubelet, CNI plugins, update-agent and images from %s", cfg.FlatcarImage, served.Base)
	}
	c.logf("booting %d VMs (accel %s, %d MiB, %d vCPU each)", cfg.Nodes, Accel(), cfg.MemoryMB, cfg.CPUs)
	for i := 0; i < cfg.Nodes; i++ {
		name := nodeName(i)
		dir := filepath.Join(cfg.Dir, "vms", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		kubeconfig := kubeletConfig(c.CP.Port, ca, tokens[name])
		kc := filepath.Join(dir, "kubelet.conf")
		if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
			return nil, err
		}
		vmc := VMConfig{
			Image: image, Kernel: filepath.Join(imgDir, "vmlinuz"), Initrd: filepath.Join(imgDir, "initrd.img"),
			MemoryMB: cfg.MemoryMB, CPUs: cfg.CPUs, Files: map[string]string{"kubeconfig": kc},
		}
		if cfg.FlatcarImage != "" {
			ign, err := FlatcarIgnition(FlatcarNode{Name: name, Kubeconfig: kubeconfig}, snippet, served)
			if err != nil {
				return nil, err
			}
			vmc = VMConfig{Image: cfg.FlatcarImage, MemoryMB: cfg.MemoryMB, CPUs: cfg.CPUs, Ignition: filepath.Join(dir, "config.ign")}
			if err := os.WriteFile(vmc.Ignition, ign, 0o600); err != nil {
				return nil, err
			}
		}
		vm, err := StartVM(name, dir, vmc)
		if err != nil {
			return nil, err
		}
		c.VMs = append(c.VMs, vm)
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	for _, vm := range c.VMs {
		took, err := vm.WaitGuestAgent(ctx, guestAgentLimit)
		if err != nil {
			return nil, err
		}
		c.logf("%s guest agent answers guest-ping (%.1fs)", vm.Name, took.Seconds())
	}
	if err := c.convertNodes(ctx, snippet); err != nil {
		return nil, err
	}
	if err := c.installAgent(ctx, root); err != nil {
		return nil, err
	}
	return c, nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func kubeletConfig(port int, ca []byte, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://10.0.2.2:%d
    certificate-authority-data: %s
users:
- name: kubelet
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: kubelet}
current-context: local
`, port, base64.StdEncoding.EncodeToString(ca), token)
}

// DefaultBootLimit bounds the wait from starting the VMs to every Node Ready. Two guests under TCG with
// one vCPU each reach Ready in 250–260 s on an otherwise idle 2-core machine with today's node image;
// with a build or tests beside them the same boot passed 6 minutes (the login prompt alone came at
// ~150 s). 15 minutes is three times the quiet figure: a loaded machine stays inside it, a guest that
// hangs is still reported in a quarter of an hour, with its serial console, and the progress lines
// every minute say which node is at which step meanwhile.
const DefaultBootLimit = 15 * time.Minute

// guestAgentLimit: a Ready node's guest agent answered at once in every run; the wait is for an agent
// that starts late on a loaded machine, not for one that does not start.
const guestAgentLimit = 3 * time.Minute

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(c.BootLimit)
	ready := map[string]bool{}
	nextReport := time.Now().Add(time.Minute)
	for len(ready) < len(c.VMs) {
		if time.Now().After(nextReport) {
			nextReport = time.Now().Add(time.Minute)
			for _, vm := range c.VMs {
				if !ready[vm.Name] {
					c.logf("%s not Ready yet (budget %s); serial console: %s", vm.Name, c.BootLimit, lastLine(vm.SerialTail(400)))
				}
			}
		}
		if time.Now().After(deadline) {
			var tails []string
			for _, vm := range c.VMs {
				if !ready[vm.Name] {
					tails = append(tails, fmt.Sprintf("--- %s serial (%s), last lines:\n%s", vm.Name, vm.SerialLog, vm.SerialTail(3000)))
				}
			}
			return fmt.Errorf("nodes not Ready after %s:\n%s", c.BootLimit, strings.Join(tails, "\n"))
		}
		for _, vm := range c.VMs {
			if !vm.Alive() {
				return fmt.Errorf("qemu for %s exited; see %s and %s", vm.Name, filepath.Join(vm.Dir, "qemu.log"), vm.SerialLog)
			}
		}
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if protocol.NodeReady(n) && !ready[n.Name] {
					ready[n.Name] = true
					c.logf("%s Ready (kubelet %s, boot %s)", n.Name, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.BootID)
				}
			}
		}
		if err := testenv.WaitCtx(ctx, 2*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// lastLine is the last non-empty line of s, trimmed for a progress line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 120 {
		l = l[:120] + "…"
	}
	return fmt.Sprintf("%q", l)
}

// SlipwaySnippet is the Ignition every node is brought in line with (butane/snippets).
func SlipwaySnippet(root string) string {
	return filepath.Join(root, "butane", "snippets", "flatcar-slipway.ign")
}

// convertNodes does to every VM what a user does to an existing fleet: `update-agent node-config
// apply` with Slipway's snippet (locksmithd masked and stopped, update-engine enabled; the node's
// update.conf left as it is), over the guest agent as one would over SSH.
func (c *Cluster) convertNodes(ctx context.Context, snippet []byte) error {
	for _, vm := range c.VMs {
		out, err := vm.ExecInput(ctx, snippet, c.AgentPath, "node-config", "apply", "--config", "-")
		if err != nil {
			return fmt.Errorf("%s: update-agent node-config apply: %w", vm.Name, err)
		}
		if c.FlatcarImage != "" && !strings.Contains(out, "nothing to do") {
			// Ignition applied the same snippet at first boot: the two must agree.
			return fmt.Errorf("%s: Ignition applied flatcar-slipway.ign, yet node-config apply changed the node:\n%s", vm.Name, out)
		}
		_ = os.WriteFile(filepath.Join(vm.Dir, "node-config.log"), []byte(out), 0o644)
		c.logf("%s converted with node-config apply: %s", vm.Name, strings.SplitN(out, "\n", 2)[0])
	}
	return nil
}

// installAgent applies deploy/ through an overlay: the locally imported image (never pulled), the API
// server at 10.0.2.2 (the "kubernetes" Service has no proxy behind it here), and no operator
// Deployment (the operator runs on the host; see docs/development.md).
func (c *Cluster) installAgent(ctx context.Context, root string) error {
	_, err := c.ApplyOverlay(ctx, "deploy-e2e", filepath.Join(root, "deploy"), fmt.Sprintf(`
  - patch: |-
      $patch: delete
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: slipway-update-operator, namespace: slipway-system}
  - patch: |-
      $patch: delete
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: slipway-update-operator, namespace: slipway-system}
  - target: {kind: DaemonSet, name: slipway-update-agent}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: "10.0.2.2"}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: "%d"}`, c.CP.Port))
	if err != nil {
		return err
	}
	c.logf("agent DaemonSet applied; waiting for every agent to report its boot ID")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		reported := 0
		if err == nil {
			for _, n := range nodes.Items {
				if n.Annotations[protocol.BootID] != "" && n.Annotations[protocol.Status] != "" {
					reported++
				}
			}
		}
		if reported == len(c.VMs) {
			c.logf("all %d agents report (update_engine status and boot ID on every Node)", reported)
			return nil
		}
		if time.Now().After(deadline) {
			pods, _ := c.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
			return fmt.Errorf("only %d of %d agents reported after 3m; pods:\n%s", reported, len(c.VMs), pods)
		}
		if err := testenv.WaitCtx(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}

// ApplyOverlay applies, with `kubectl apply -k`, a kustomization in c.Dir/name over the directory
// base: the image imported into the VMs in place of the one deploy/ names (never pulled: set
// imagePullPolicy Never in patches), and patches (a YAML list, indented as a top-level key's items).
// It returns the overlay's directory (`kubectl delete -k` it to undo).
func (c *Cluster) ApplyOverlay(ctx context.Context, name, base, patches string) (string, error) {
	dir := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return "", err
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/slipway-dev/slipway
    newName: docker.io/library/slipway
    newTag: e2e
patches:%s
`, rel, patches)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", err
	}
	if out, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
		return "", fmt.Errorf("kubectl apply -k %s: %v\n%s", dir, err, out)
	}
	return dir, nil
}

// Kubectl runs the control plane's kubectl against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := testenv.BinDir()
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// StartOperator runs update-operator on the host (leader election on, in slipway-system), logging to
// the cluster directory. A second call after StopOperator starts a fresh process.
func (c *Cluster) StartOperator(extra ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The operator's own identity, as in a Deployment: its ServiceAccount's token (the admin's is in
	// the break-glass group, which the keys policy asks to say who and why).
	kc, err := c.operatorKubeconfig()
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig=" + kc, "--namespace=slipway-system", "--http-address=",
		"--lease-duration=8s", "--renew-deadline=6s", "--retry-period=1s", "--drain-timeout=2m"}, c.Operator...)
	args = append(args, extra...)
	if err := c.allowHooks(args); err != nil {
		return err
	}
	p, err := operatorproc.Start(filepath.Join(c.bins, "update-operator"), args, filepath.Join(c.Dir, "update-operator.log"))
	if err != nil {
		return err
	}
	c.operator = p
	c.logf("update-operator started on the host (pid %d)", p.Pid())
	return nil
}

// allowHooks does what deploy/operator-settings does for a kustomize user who starts the operator with
// hooks: it writes the values of the operator's --before-reboot-annotations and
// --after-reboot-annotations into its admission policy's variables of the same names, from which the
// policy makes its list of hook annotations the operator may remove. Helm renders them from its values.
func (c *Cluster) allowHooks(args []string) error {
	values := map[string][]string{"beforeRebootAnnotations": nil, "afterRebootAnnotations": nil}
	for _, a := range args {
		for flag, v := range map[string]string{"--before-reboot-annotations=": "beforeRebootAnnotations", "--after-reboot-annotations=": "afterRebootAnnotations"} {
			if value, ok := strings.CutPrefix(a, flag); ok {
				if strings.Contains(value, "'") {
					return fmt.Errorf("%s%s: not an annotation key list", flag, value)
				}
				values[v] = append(values[v], value) // a repeated flag adds to the list
			}
		}
	}
	want := map[string]string{}
	for v, l := range values {
		want[v] = "'" + strings.Join(l, ",") + "'"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vaps := c.CP.Client().AdmissionregistrationV1().ValidatingAdmissionPolicies()
	p, err := vaps.Get(ctx, "slipway-update-operator", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the operator's admission policy (is deploy/ applied?): %w", err)
	}
	changed, found := false, 0
	for i, v := range p.Spec.Variables {
		if e, ok := want[v.Name]; ok {
			found++
			if v.Expression != e {
				p.Spec.Variables[i].Expression, changed = e, true
			}
		}
	}
	if found != len(want) {
		return fmt.Errorf("the operator's admission policy has %d of the variables %v", found, want)
	}
	if !changed {
		return nil
	}
	if _, err := vaps.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the hook annotations %v into the operator's admission policy: %w", want, err)
	}
	c.logf("operator admission policy: %v", want)
	return nil
}

// operatorKubeconfig writes a kubeconfig for the update-operator ServiceAccount (deploy/ created it)
// with a TokenRequest token valid for a day.
func (c *Cluster) operatorKubeconfig() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	day := int64(24 * 3600)
	tok, err := c.CP.Client().CoreV1().ServiceAccounts("slipway-system").CreateToken(ctx, "slipway-update-operator",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for the update-operator ServiceAccount (is deploy/ applied?): %w", err)
	}
	path := filepath.Join(c.Dir, "update-operator.kubeconfig")
	return path, os.WriteFile(path, []byte(testenv.KubeconfigFor(c.CP.URL, tok.Status.Token)), 0o600)
}

// KillOperator SIGKILLs the operator (no lease release: the next one waits out the lease).
func (c *Cluster) KillOperator() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.operator != nil {
		c.operator.Kill()
		c.logf("update-operator killed (SIGKILL)")
		c.operator = nil
	}
}

// VM returns the VM of a node.
func (c *Cluster) VM(name string) *VM {
	for _, vm := range c.VMs {
		if vm.Name == name {
			return vm
		}
	}
	return nil
}

// Down stops the operator, every VM and the control plane. Logs stay in Dir: serial consoles, the
// operator's log, and each node's agent log (read from the guest, since `kubectl logs` cannot reach
// kubelets behind slirp).
func (c *Cluster) Down() {
	c.KillOperator()
	for _, vm := range c.VMs {
		if vm.Alive() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, _ := vm.Exec(ctx, "/bin/sh", "-c", "cat /var/log/pods/slipway-system_slipway-update-agent-*/update-agent/*.log 2>/dev/null")
			cancel()
			_ = os.WriteFile(filepath.Join(vm.Dir, "agent.log"), []byte(out), 0o644)
		}
		vm.Stop()
		// The disk overlay is hundreds of MiB and no artifact: logs are what a failed run needs.
		_ = os.Remove(filepath.Join(vm.Dir, "disk.qcow2"))
	}
	if c.CP != nil {
		c.CP.Stop()
		_ = os.RemoveAll(filepath.Join(c.CP.Dir, "etcd"))
	}
	if c.stopServer != nil {
		c.stopServer()
	}
}
