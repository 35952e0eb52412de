// Package harness brings up Slipway's local e2e cluster: a real control plane on the host (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) and QEMU VMs from the node image of
// hack/build-node-image.sh, each running systemd, dbus, the update_engine stand-in, containerd and a
// real kubelet joined through 10.0.2.2 (the host's loopback as slirp shows it). It installs the agent
// from deploy/ as a DaemonSet and runs the operator as a host process, and it tears everything down,
// killing every qemu it started even when the test fails or is interrupted.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// VM is one QEMU guest.
type VM struct {
	Name      string
	Dir       string
	SerialLog string
	QGA       string // qemu-guest-agent socket
	cmd       *exec.Cmd
	done      chan struct{}
}

// VMConfig says how to boot a guest.
type VMConfig struct {
	// Image is the base disk; with Kernel and Initrd the guest boots them with root=/dev/vda (the
	// Debian node image), without them it boots from the disk (a Flatcar image).
	Image, Kernel, Initrd string
	MemoryMB, CPUs        int
	// Files are passed with -fw_cfg name=opt/slipway/<key>.
	Files map[string]string
	// Ignition, if set, is passed as Flatcar's fw_cfg config (opt/org.flatcar-linux/config).
	Ignition string
}

// Accel is "kvm" where the CPU really offers hardware virtualization (vmx/svm in /proc/cpuinfo), else
// "tcg". The existence of /dev/kvm proves nothing: nested setups expose one that cannot run guests.
func Accel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil && (bytes.Contains(b, []byte(" vmx")) || bytes.Contains(b, []byte(" svm"))) {
		if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
			f.Close()
			return "kvm"
		}
	}
	return "tcg"
}

// StartVM creates a copy-on-write overlay of the image and boots it.
func StartVM(name, dir string, cfg VMConfig) (*VM, error) {
	if err := testenv.RefuseUnderShort("a QEMU VM"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	overlay := filepath.Join(dir, "disk.qcow2")
	format, err := imageFormat(cfg.Image)
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", format, "-b", cfg.Image, overlay).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	vm := &VM{Name: name, Dir: dir, SerialLog: filepath.Join(dir, "serial.log"), QGA: filepath.Join(dir, "qga.sock"), done: make(chan struct{})}
	accel := Accel()
	if accel == "tcg" {
		accel = "tcg,tb-size=256"
	}
	args := []string{
		"-name", name, "-nodefaults", "-no-user-config", "-display", "none",
		"-accel", accel, "-cpu", "max", "-smp", fmt.Sprint(cfg.CPUs), "-m", fmt.Sprint(cfg.MemoryMB),
		"-drive", "file=" + overlay + ",if=virtio,format=qcow2,cache=unsafe",
		"-nic", "user,model=virtio-net-pci",
		"-device", "virtio-rng-pci",
		"-serial", "file:" + vm.SerialLog,
		"-device", "virtio-serial",
		"-chardev", "socket,path=" + vm.QGA + ",server=on,wait=off,id=qga0",
		"-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
	}
	if cfg.Kernel != "" {
		args = append(args, "-kernel", cfg.Kernel, "-initrd", cfg.Initrd,
			"-append", "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.hostname="+name+" systemd.journald.forward_to_console=0")
	}
	if cfg.Ignition != "" {
		args = append(args, "-fw_cfg", "name="+FlatcarFwCfgKey+",file="+cfg.Ignition)
	}
	for key, file := range cfg.Files {
		args = append(args, "-fw_cfg", "name=opt/slipway/"+key+",file="+file)
	}
	cmd := exec.Command("qemu-system-x86_64", args...)
	logf, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// The guest dies with the harness, whatever kills the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting qemu for %s: %w", name, err)
	}
	vm.cmd = cmd
	go func() { _ = cmd.Wait(); logf.Close(); close(vm.done) }()
	return vm, nil
}

// Alive reports whether qemu still runs.
func (vm *VM) Alive() bool {
	select {
	case <-vm.done:
		return false
	default:
		return true
	}
}

// Stop kills qemu and waits for it.
func (vm *VM) Stop() {
	if vm.cmd != nil && vm.cmd.Process != nil {
		_ = vm.cmd.Process.Kill()
		<-vm.done
	}
}

// Exec runs a command in the guest through qemu-guest-agent and returns its output.
func (vm *VM) Exec(ctx context.Context, path string, args ...string) (string, error) {
	return guestExec(ctx, vm.QGA, nil, path, args)
}

// ExecInput is Exec with stdin.
func (vm *VM) ExecInput(ctx context.Context, stdin []byte, path string, args ...string) (string, error) {
	return guestExec(ctx, vm.QGA, stdin, path, args)
}

// WaitGuestAgent waits until the guest agent answers guest-ping, at most budget, and says how long
// that took. Every guest command of the suites goes through it: a guest whose agent never answers
// fails here, at boot, with its serial console, not later as a scenario's i/o timeout.
func (vm *VM) WaitGuestAgent(ctx context.Context, budget time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		last = guestPing(pctx, vm.QGA)
		pcancel()
		if last == nil {
			return time.Since(start), nil
		}
		if !vm.Alive() {
			return time.Since(start), fmt.Errorf("qemu for %s exited; see %s", vm.Name, vm.SerialLog)
		}
		if err := testenv.WaitCtx(ctx, 2*time.Second); err != nil {
			return time.Since(start), fmt.Errorf("%s: the guest agent did not answer guest-ping within %s (last: %v); is qemu-guest-agent.service running in the image? serial console %s, last lines:\n%s",
				vm.Name, budget, last, vm.SerialLog, vm.SerialTail(2000))
		}
	}
}

// BootCount reads the guest's boot counter (incremented by boot-counter.service at every boot).
func (vm *VM) BootCount(ctx context.Context) (int, error) {
	out, err := vm.Exec(ctx, "/bin/cat", "/var/lib/boot-count")
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(strings.TrimSpace(out), &n)
	return n, err
}

// SerialTail returns the last n bytes of the serial console, for error messages.
func (vm *VM) SerialTail(n int) string {
	b, _ := os.ReadFile(vm.SerialLog)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
