// Command cluster is `make cluster` / `make cluster-down`: the local e2e cluster (real control plane on
// the host, QEMU VMs with real kubelets, Slipway's agent as a DaemonSet, the operator on the host),
// left running for you to play with.
//
//	cluster up [-nodes 3]   boot it, print the kubeconfig and how to fire an update, keep it running
//	cluster up -backend=terraform
//	                        instead: a Flatcar cluster (kubeadm, FLATCAR_IMAGE) from terraform/examples/libvirt
//	                        through terraform-exec and libvirt, with Slipway installed from deploy/
//	cluster down            stop whichever is up (VMs, control plane, operator; or terraform destroy)
//	cluster exec NODE CMD   run a command in a node VM (through qemu-guest-agent)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/e2e/harness"
	"github.com/slipway-dev/slipway/e2e/tfcluster"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

func stateDir() string { return testenv.CacheDir("cluster") }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up [-nodes N] [-foreground] [-backend qemu|terraform] | cluster down | cluster exec NODE COMMAND [ARG...]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "up":
		os.Exit(up(os.Args[2:]))
	case "down":
		os.Exit(down())
	case "exec":
		os.Exit(execIn(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "cluster: unknown command %q (up or down)\n", os.Args[1])
		os.Exit(2)
	}
}

func up(args []string) int {
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "worker VMs")
	mem := fs.Int("memory", 768, "MiB per VM")
	foreground := fs.Bool("foreground", false, "stay in the foreground (Ctrl-C tears down)")
	backend := fs.String("backend", "qemu", "qemu: host control plane + QEMU VMs (default); terraform: Flatcar + kubeadm on libvirt from terraform/")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *backend {
	case "qemu":
	case "terraform":
		return upTerraform(*nodes)
	default:
		fmt.Fprintf(os.Stderr, "cluster up: -backend=%s: use qemu or terraform\n", *backend)
		return 2
	}
	dir := stateDir()
	pidFile := filepath.Join(dir, "cluster.pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && syscall.Kill(pid, 0) == nil {
			fmt.Fprintf(os.Stderr, "a cluster is already running (pid %d): run `make cluster-down` first\n", pid)
			return 1
		}
	}
	if !*foreground {
		// Re-run ourselves detached; the child keeps the VMs alive. Wait until it says ready.
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		logPath := filepath.Join(dir, "cluster.log")
		logf, err := os.Create(logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(os.Args[0], "up", "-foreground", fmt.Sprintf("-nodes=%d", *nodes), fmt.Sprintf("-memory=%d", *mem))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("bringing up %d VMs in the background (pid %d); progress: %s\n", *nodes, cmd.Process.Pid, logPath)
		offset := int64(0)
		for {
			b, _ := os.ReadFile(logPath)
			if int64(len(b)) > offset {
				os.Stdout.Write(b[offset:])
				offset = int64(len(b))
			}
			if strings.Contains(string(b), "CLUSTER READY") {
				return 0
			}
			if strings.Contains(string(b), "CLUSTER FAILED") || syscall.Kill(cmd.Process.Pid, 0) != nil {
				return 1
			}
			time.Sleep(time.Second)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644)
	defer os.Remove(pidFile)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := harness.Up(ctx, harness.Config{Nodes: *nodes, MemoryMB: *mem, Dir: dir, Log: func(f string, a ...interface{}) { fmt.Printf(f+"\n", a...) }})
	if err != nil {
		fmt.Println("CLUSTER FAILED:", err)
		return 1
	}
	defer c.Down()
	if err := c.StartOperator(); err != nil {
		fmt.Println("CLUSTER FAILED:", err)
		return 1
	}
	fmt.Printf(`CLUSTER READY
  kubeconfig:  %s
  nodes:       kubectl --kubeconfig %s get nodes
  fire update: kubectl --kubeconfig %s annotate node node-0 --overwrite flatcar-linux-update.v1.flatcar-linux.net/reboot-needed=true
  or inside a VM, exactly as locksmithctl send-need-reboot does:
               go run ./e2e/cmd/cluster exec node-0 /usr/local/bin/update-agent send-need-reboot
  logs:        %s (serial consoles in vms/*/serial.log, operator in update-operator.log)
  stop:        make cluster-down
`, c.Kubeconfig, c.Kubeconfig, c.Kubeconfig, dir)
	<-ctx.Done()
	fmt.Println("tearing down")
	return 0
}

func tfOptions() (tfcluster.Options, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return tfcluster.Options{}, err
	}
	return tfcluster.Options{Root: root, Dir: stateDir() + "-terraform", FlatcarImage: os.Getenv("FLATCAR_IMAGE"), Out: os.Stdout}, nil
}

// upTerraform is `make cluster BACKEND=terraform`: nodes are the workers besides one controller.
func upTerraform(nodes int) int {
	o, err := tfOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o.Workers = nodes - 1
	if o.Workers < 0 {
		o.Workers = 0
	}
	o.DomainType = "qemu"
	if harness.Accel() == "kvm" {
		o.DomainType = "kvm"
	}
	bin, err := testenv.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o.Kubectl = filepath.Join(bin, "kubectl")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	kc, err := tfcluster.Up(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster up -backend=terraform:", err)
		return 1
	}
	fmt.Printf(`CLUSTER READY (terraform, libvirt)
  kubeconfig:  %s
  nodes:       kubectl --kubeconfig %s get nodes -o wide
  fire update: kubectl --kubeconfig %s -n slipway-system exec <agent pod on the node> -- /update-agent send-need-reboot
  stop:        make cluster-down   (terraform destroy)
`, kc, kc, kc)
	return 0
}

func down() int {
	if o, err := tfOptions(); err == nil {
		if _, err := os.Stat(o.StateFile()); err == nil {
			if err := tfcluster.Down(context.Background(), o); err != nil {
				fmt.Fprintln(os.Stderr, "cluster down:", err)
				return 1
			}
			fmt.Println("terraform cluster destroyed")
			return 0
		}
	}
	pidFile := filepath.Join(stateDir(), "cluster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		fmt.Println("no cluster running")
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || syscall.Kill(pid, syscall.SIGTERM) != nil {
		fmt.Println("no cluster running")
		_ = os.Remove(pidFile)
		return 0
	}
	for i := 0; i < 30 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(time.Second)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	fmt.Println("cluster stopped")
	return 0
}

func execIn(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster exec NODE COMMAND [ARG...]  (e.g. cluster exec node-0 /usr/local/bin/update-agent send-need-reboot)")
		return 2
	}
	vm := &harness.VM{Name: args[0], QGA: filepath.Join(stateDir(), "vms", args[0], "qga.sock")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := vm.Exec(ctx, args[1], args[2:]...)
	fmt.Print(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster exec:", err)
		return 1
	}
	return 0
}
