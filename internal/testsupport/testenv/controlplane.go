// Package testenv starts the real parts Slipway is proven against: etcd, kube-apiserver and
// kube-controller-manager (built offline by hack/build-controlplane.sh), private dbus-daemons, and
// small kubelet stand-ins that do only what a control plane without kubelets cannot (mark pods
// Running+Ready, finalize evicted pods, report a node's boot ID). Tests, the demo and the benchmarks
// share it.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/internal/clusterpki"
)

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager) on loopback.
type ControlPlane struct {
	Dir        string // scratch directory: data, keys, logs
	URL        string // https://127.0.0.1:PORT
	Token      string // bearer token of a system:masters user
	Kubeconfig string // path to an admin kubeconfig
	Port       int    // the apiserver's port on 127.0.0.1
	CAFile     string // cluster CA (ForKubelets only)
	procs      []*exec.Cmd
	bin        string   // directory of the binaries
	apiArgs    []string // kube-apiserver's command line, for RestartAPIServer
	clientCA   *clusterpki.CA
	etcdArgs   []string // etcd's command line, for RestartEtcd
	restarts   sync.Mutex
}

// Options select what to start.
type Options struct {
	// ControllerManager also starts kube-controller-manager with Controllers (default: what PDBs need).
	ControllerManager bool
	Controllers       []string
	// Scheduler also starts kube-scheduler (real kubelets need their pods scheduled).
	Scheduler bool
	// ForKubelets serves a certificate from the cluster CA valid for ServingIPs, accepts the node
	// tokens in NodeTokens (name -> token, user system:node:<name>), authorizes with Node,RBAC and
	// keeps the ServiceAccount admission plugin: what real kubelets in VMs need.
	ForKubelets bool
	ServingIPs  []string
	NodeTokens  map[string]string
	// Log receives progress lines (nil: none).
	Log func(format string, args ...interface{})
	// APIServerArgs are added to kube-apiserver's (a flag given again wins; without kubelets
	// --disable-admission-plugins is ServiceAccount, so repeat it in a list of your own).
	APIServerArgs []string
}

// DefaultControllers are the kube-controller-manager controllers tests without kubelets need.
var DefaultControllers = []string{"disruption-controller", "garbage-collector-controller"}

// RepoRoot finds the directory holding Slipway's go.mod, from the working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		// The product module's go.mod, not a nested module's (e2e/, butane/, ...).
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/slipway-dev/slipway\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the slipway repository")
		}
		dir = parent
	}
}

// CacheDir is where built and downloaded test machinery is kept, joined with sub: $SLIPWAY_CACHE, else
// $XDG_CACHE_HOME/slipway, else ~/.cache/slipway (the hack/ scripts use the same rule).
func CacheDir(sub ...string) string {
	root := os.Getenv("SLIPWAY_CACHE")
	if root == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		root = filepath.Join(base, "slipway")
	}
	return filepath.Join(append([]string{root}, sub...)...)
}

// ControlPlaneBinaries finds the cached control-plane binaries without building anything. ok says
// whether etcd, kube-apiserver and kube-controller-manager are there; dir is their directory when
// that is unambiguous ($SLIPWAY_CONTROLPLANE_DIR, or the only cached version), "" otherwise.
func ControlPlaneBinaries() (string, bool) {
	have := func(dir string) bool {
		for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("SLIPWAY_CONTROLPLANE_DIR"); d != "" {
		return d, have(d)
	}
	dirs, _ := filepath.Glob(CacheDir("controlplane", "k8s-*"))
	var found []string
	for _, d := range dirs {
		if have(d) {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 0:
		return "", false
	case 1:
		return found[0], true
	}
	return "", true // several versions: the build script knows which one is current
}

// BinDir returns the directory with the control-plane binaries: $SLIPWAY_CONTROLPLANE_DIR, or what
// hack/build-controlplane.sh prints (building only what is missing from its cache).
func BinDir() (string, error) {
	if err := RefuseUnderShort("the control-plane binaries (hack/build-controlplane.sh)"); err != nil {
		return "", err
	}
	if d := os.Getenv("SLIPWAY_CONTROLPLANE_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "build-controlplane.sh"), "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-controlplane.sh failed (run it by hand to see why): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartControlPlane starts etcd and kube-apiserver in dir and waits for /readyz.
func StartControlPlane(ctx context.Context, dir string, opt Options) (*ControlPlane, error) {
	if err := RefuseUnderShort("etcd and kube-apiserver"); err != nil {
		return nil, err
	}
	logf := opt.Log
	if logf == nil {
		logf = func(string, ...interface{}) {}
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, Token: "slipway-admin-token", bin: bin}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()

	etcdPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	start := time.Now()
	// No fsync: a SIGKILLed etcd (RestartEtcd) loses nothing the kernel was handed; only a machine
	// crash would.
	cp.etcdArgs = []string{"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", "--log-level=warn"}
	if err := cp.start(filepath.Join(bin, "etcd"), "etcd", cp.etcdArgs...); err != nil {
		return nil, err
	}

	keyFile := filepath.Join(dir, "sa.key")
	pubFile := filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKey(keyFile, pubFile); err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	// The admin is also in Slipway's break-glass group (deploy/base/keys-policy.yaml): tests seed and
	// inspect every key as it; the policy's tests use identities of their own (ClientConfig, tokens).
	tokenLines := cp.Token + ",slipway-admin,slipway-admin,\"system:masters,slipway:break-glass\"\n"
	for name, tok := range opt.NodeTokens {
		tokenLines += fmt.Sprintf("%s,system:node:%s,node-%s,\"system:nodes\"\n", tok, name, name)
	}
	if err := os.WriteFile(tokens, []byte(tokenLines), 0o600); err != nil {
		return nil, err
	}
	apiPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.Port = apiPort
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--token-auth-file=" + tokens,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pubFile,
		"--service-account-signing-key-file=" + keyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--v=0",
	}
	var clientCAFile string
	if cp.clientCA, clientCAFile, err = writeClientCA(filepath.Join(dir, "client-pki")); err != nil {
		return nil, err
	}
	args = append(args, "--client-ca-file="+clientCAFile)
	if opt.ForKubelets {
		pki, err := writePKI(filepath.Join(dir, "pki"), append([]string{"127.0.0.1"}, opt.ServingIPs...))
		if err != nil {
			return nil, err
		}
		cp.CAFile = pki.caCert
		args = append(args, "--tls-cert-file="+pki.cert, "--tls-private-key-file="+pki.key,
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction")
	} else {
		// No kubelets here: pods need no ServiceAccount to exist before they can be created.
		args = append(args, "--cert-dir="+filepath.Join(dir, "apiserver-certs"),
			"--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount")
	}
	args = append(args, opt.APIServerArgs...)
	cp.apiArgs = args
	if err := cp.start(filepath.Join(bin, "kube-apiserver"), "kube-apiserver", args...); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	logf("kube-apiserver ready at %s after %s", cp.URL, time.Since(start).Round(time.Millisecond))

	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, []byte(cp.kubeconfig()), 0o600); err != nil {
		return nil, err
	}
	if opt.ControllerManager {
		kcmPort, err := FreePort()
		if err != nil {
			return nil, err
		}
		controllers := opt.Controllers
		if len(controllers) == 0 {
			// The disruption controller fills PDB status; without it every PDB blocks every eviction.
			controllers = DefaultControllers
		}
		kcmArgs := []string{
			"--kubeconfig=" + cp.Kubeconfig,
			"--authentication-kubeconfig=" + cp.Kubeconfig,
			"--authorization-kubeconfig=" + cp.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
			"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--v=0",
		}
		if cp.CAFile != "" {
			kcmArgs = append(kcmArgs, "--root-ca-file="+cp.CAFile, "--service-account-private-key-file="+keyFile)
		}
		if err := cp.start(filepath.Join(bin, "kube-controller-manager"), "kube-controller-manager", kcmArgs...); err != nil {
			return nil, err
		}
		logf("kube-controller-manager started (%s)", strings.Join(controllers, ", "))
	}
	if opt.Scheduler {
		schedPort, err := FreePort()
		if err != nil {
			return nil, err
		}
		if err := cp.start(filepath.Join(bin, "kube-scheduler"), "kube-scheduler",
			"--kubeconfig="+cp.Kubeconfig,
			"--authentication-kubeconfig="+cp.Kubeconfig,
			"--authorization-kubeconfig="+cp.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
			"--leader-elect=false", "--v=0",
		); err != nil {
			return nil, err
		}
		logf("kube-scheduler started")
	}
	ok = true
	return cp, nil
}

func (cp *ControlPlane) start(bin, name string, args ...string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s missing (%v): run hack/build-controlplane.sh", name, err)
	}
	// Appended to: a restarted component (RestartAPIServer) keeps its earlier log.
	logFile, err := os.OpenFile(filepath.Join(cp.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// No strays: the control plane dies with the process that started it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	cp.procs = append(cp.procs, cmd)
	go func() { _ = cmd.Wait(); logFile.Close() }()
	return nil
}

func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := WaitCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("kube-apiserver not ready after %s (last: %s); see %s", timeout, last, filepath.Join(cp.Dir, "kube-apiserver.log"))
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as a crash) and starts it again on the same port with
// the same flags and the same etcd, then waits for /readyz. Clients keep their URL and reconnect; what
// they were watching they must resume or list again.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if cp.apiArgs == nil {
		return fmt.Errorf("no kube-apiserver to restart")
	}
	return cp.restart(ctx, "kube-apiserver", cp.apiArgs)
}

// RestartEtcd kills etcd (SIGKILL, as a crash) and starts it again with the same data and ports, then
// waits until kube-apiserver is ready again (its /readyz checks etcd). The API server stays up
// meanwhile: requests fail or wait, watches are cut and resume, as when etcd restarts in a cluster.
func (cp *ControlPlane) RestartEtcd(ctx context.Context) error {
	if cp.etcdArgs == nil {
		return fmt.Errorf("no etcd to restart")
	}
	return cp.restart(ctx, "etcd", cp.etcdArgs)
}

// restart SIGKILLs the process of binary name, waits until it is gone (its ports free), starts it again
// with args and waits for the API server to be ready.
func (cp *ControlPlane) restart(ctx context.Context, name string, args []string) error {
	cp.restarts.Lock() // one at a time: each changes procs
	defer cp.restarts.Unlock()
	var old *exec.Cmd
	for _, c := range cp.procs {
		if filepath.Base(c.Path) == name {
			old = c
		}
	}
	if old == nil {
		return fmt.Errorf("no %s to restart", name)
	}
	_ = old.Process.Kill()
	// Its port is free once the process is gone (start's goroutine reaps it).
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := old.Process.Signal(syscall.Signal(0)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) did not exit", name, old.Process.Pid)
		}
		if err := WaitCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	for i, c := range cp.procs {
		if c == old {
			cp.procs = append(cp.procs[:i], cp.procs[i+1:]...)
			break
		}
	}
	if err := cp.start(filepath.Join(cp.bin, name), name, args...); err != nil {
		return err
	}
	return cp.waitReady(ctx, 60*time.Second)
}

// FreezeAPIServer stops kube-apiserver (SIGSTOP) without closing its connections: requests in flight
// and new ones hang, as with a wedged or overloaded server. ThawAPIServer resumes it.
func (cp *ControlPlane) FreezeAPIServer() error { return cp.signalAPIServer(syscall.SIGSTOP) }

// ThawAPIServer resumes a frozen kube-apiserver (SIGCONT).
func (cp *ControlPlane) ThawAPIServer() error { return cp.signalAPIServer(syscall.SIGCONT) }

func (cp *ControlPlane) signalAPIServer(sig syscall.Signal) error {
	for _, c := range cp.procs {
		if filepath.Base(c.Path) == "kube-apiserver" {
			return c.Process.Signal(sig)
		}
	}
	return fmt.Errorf("no kube-apiserver running")
}

// RestConfig is an admin client config.
func (cp *ControlPlane) RestConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}
}

// Client is an admin clientset.
func (cp *ControlPlane) Client() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(cp.RestConfig())
}

func (cp *ControlPlane) kubeconfig() string { return KubeconfigFor(cp.URL, cp.Token) }

// KubeconfigFor is a kubeconfig that reaches server (https, certificate not checked) with a bearer
// token: the admin's, or a ServiceAccount's from the TokenRequest API.
func KubeconfigFor(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
`, server, token)
}

// Stop kills every process, newest first.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if p := cp.procs[i].Process; p != nil {
			_ = p.Kill()
		}
	}
	cp.procs = nil
}

func writeServiceAccountKey(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubFile, pub, 0o644)
}

// WriteKubeconfig writes an admin kubeconfig to path that reaches the API server at server (a
// https://host:port URL; through a Proxy, say) instead of its own address.
func (cp *ControlPlane) WriteKubeconfig(path, server string) error {
	return os.WriteFile(path, []byte(KubeconfigFor(server, cp.Token)), 0o600)
}

// HostPort is the API server's host:port.
func (cp *ControlPlane) HostPort() string { return strings.TrimPrefix(cp.URL, "https://") }
