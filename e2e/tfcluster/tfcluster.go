// Package tfcluster runs terraform/ offline through terraform-exec, for tests and for `make cluster
// BACKEND=terraform`: the libvirt provider built from the Go module proxy into a filesystem mirror
// (no registry is reachable here), a CLI config that installs only from that mirror, a work
// directory holding a copy of terraform/ and the snippets it reads (so nothing is written into the
// repository), and libvirtd started when none answers.
package tfcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/slipway-dev/slipway/internal/clusterpki"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// LibvirtProvider is the provider version terraform/ pins (versions.tf) and the mirror holds.
const LibvirtProvider = "0.8.3"

// CacheDir is where the provider mirror (and a terraform built as a fallback) live.
func CacheDir() string { return testenv.CacheDir("terraform") }

// TerraformBinary finds terraform: on PATH, or the one hack/install-terraform-deps.sh built.
func TerraformBinary() (string, error) {
	if err := testenv.RefuseUnderShort("terraform"); err != nil {
		return "", err
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return p, nil
	}
	p := filepath.Join(CacheDir(), "bin", "terraform")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("terraform not found on PATH nor in %s: run hack/install-terraform-deps.sh (builds it from the Go proxy)", filepath.Dir(p))
}

// Mirror returns the filesystem mirror holding dmacvicar/libvirt, building the provider from the Go
// module proxy the first time (~30-60 s): `go install` cannot (the proxy refuses its version list),
// building in a copy of the downloaded module can.
func Mirror(ctx context.Context, logf func(string, ...interface{})) (string, error) {
	if err := testenv.RefuseUnderShort("go build of terraform-provider-libvirt"); err != nil {
		return "", err
	}
	unlock, err := Lock("mirror")
	if err != nil {
		return "", err
	}
	defer unlock()
	mirror := filepath.Join(CacheDir(), "mirror")
	bin := filepath.Join(mirror, "registry.terraform.io", "dmacvicar", "libvirt", LibvirtProvider, "linux_amd64", "terraform-provider-libvirt_v"+LibvirtProvider)
	if _, err := os.Stat(bin); err == nil {
		return mirror, nil
	}
	start := time.Now()
	logf("building terraform-provider-libvirt v%s from the Go module proxy (~1 min, once)", LibvirtProvider)
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/dmacvicar/terraform-provider-libvirt@v"+LibvirtProvider).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download terraform-provider-libvirt: %v %s", err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download terraform-provider-libvirt: %s %v", mod.Error, err)
	}
	src, err := os.MkdirTemp("", "tf-provider-libvirt-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := copyTree(mod.Dir, src, nil); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin+".tmp", ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building terraform-provider-libvirt: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", err
	}
	logf("terraform-provider-libvirt built in %s: %s", time.Since(start).Round(time.Second), bin)
	return mirror, nil
}

// Lock takes an exclusive lock named name in the cache directory, across processes (go test runs
// packages in parallel: two builds of the provider, or two clusters on the same libvirt network,
// must not overlap). unlock releases it.
func Lock(name string) (unlock func(), err error) {
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(CacheDir(), name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Workspace is a work directory laid out like the repository (terraform/, butane/snippets/) with
// a CLI config that installs providers only from the mirror.
type Workspace struct {
	Dir       string
	CLIConfig string
	// Stdout and Stderr receive terraform's output (progress of init, apply, destroy); nil drops it.
	Stdout, Stderr io.Writer
}

// NewWorkspace copies root's terraform/ and butane/snippets/*.ign into dir (without .terraform
// directories or state a user may have left) and writes the CLI config.
func NewWorkspace(root, dir, mirror string) (*Workspace, error) {
	skip := func(rel string, d fs.DirEntry) bool {
		n := d.Name()
		return n == ".terraform" || strings.HasSuffix(n, ".tfstate") || strings.HasSuffix(n, ".tfstate.backup") ||
			n == ".terraform.lock.hcl" || strings.HasSuffix(n, ".go")
	}
	if err := copyTree(filepath.Join(root, "terraform"), filepath.Join(dir, "terraform"), skip); err != nil {
		return nil, err
	}
	snips, err := filepath.Glob(filepath.Join(root, "butane", "snippets", "*.ign"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "butane", "snippets"), 0o755); err != nil {
		return nil, err
	}
	for _, s := range snips {
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "butane", "snippets", filepath.Base(s)), b, 0o644); err != nil {
			return nil, err
		}
	}
	w := &Workspace{Dir: dir, CLIConfig: cliConfig(dir)}
	cfg := "provider_installation {\n  direct {\n    exclude = [\"*/*/*\"]\n  }\n}\n"
	if mirror != "" {
		cfg = fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"registry.terraform.io/dmacvicar/libvirt\"]\n  }\n  direct {\n    exclude = [\"*/*/*\"]\n  }\n}\n", mirror)
	}
	if err := os.WriteFile(w.CLIConfig, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return w, nil
}

// cliConfig is the workspace's Terraform CLI configuration (TF_CLI_CONFIG_FILE).
func cliConfig(dir string) string { return filepath.Join(dir, "terraformrc") }

// Terraform is terraform-exec in the workspace's sub directory (e.g. "terraform/examples/libvirt"),
// offline: only the mirror, no checkpoint calls.
func (w *Workspace) Terraform(sub string) (*tfexec.Terraform, error) {
	bin, err := TerraformBinary()
	if err != nil {
		return nil, err
	}
	tf, err := tfexec.NewTerraform(filepath.Join(w.Dir, sub), bin)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && !strings.HasPrefix(k, "TF_") {
			env[k] = v
		}
	}
	env["TF_CLI_CONFIG_FILE"] = w.CLIConfig
	env["CHECKPOINT_DISABLE"] = "1"
	if err := tf.SetEnv(env); err != nil {
		return nil, err
	}
	if w.Stdout != nil {
		tf.SetStdout(w.Stdout)
	}
	if w.Stderr != nil {
		tf.SetStderr(w.Stderr)
	}
	return tf, nil
}

// WriteSecrets writes a fresh CA, admin certificate and bootstrap token as a tfvars file in the
// sub directory (terraform reads *.auto.tfvars.json by itself).
func (w *Workspace) WriteSecrets(sub string) (*clusterpki.Secrets, error) {
	s, err := clusterpki.New(time.Now(), 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return s, os.WriteFile(filepath.Join(w.Dir, sub, "secrets.auto.tfvars.json"), b, 0o600)
}

// Libvirtd makes sure a libvirtd answers on qemu:///system, starting virtlogd and libvirtd as
// daemons when none does (no systemd as PID 1 here). stop kills only what it started.
func Libvirtd(ctx context.Context, logf func(string, ...interface{})) (stop func(), err error) {
	if answers(ctx) {
		return func() {}, nil
	}
	for _, b := range []string{"libvirtd", "virtlogd", "virsh"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s missing: run hack/install-terraform-deps.sh (apt: libvirt-daemon-system libvirt-clients)", b)
		}
	}
	logf("starting virtlogd and libvirtd (none answers on qemu:///system)")
	for _, d := range []string{"virtlogd", "libvirtd"} {
		if out, err := exec.CommandContext(ctx, d, "-d").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s -d: %v %s", d, err, out)
		}
	}
	stop = func() {
		for _, pidFile := range []string{"/run/libvirtd.pid", "/run/virtlogd.pid"} {
			if b, err := os.ReadFile(pidFile); err == nil {
				_ = exec.Command("kill", strings.TrimSpace(string(b))).Run()
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !answers(ctx) {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("libvirtd started but qemu:///system does not answer after 30 s")
		}
		time.Sleep(300 * time.Millisecond)
	}
	return stop, nil
}

func answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "virsh", "-c", "qemu:///system", "version").Run() == nil
}

// StandinDisk makes a blank 64 MiB qcow2 in dir, booting nothing, for applying the libvirt module
// where no Flatcar image can be had (tests).
func StandinDisk(dir string) (string, error) {
	disk := filepath.Join(dir, "standin.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "64M").CombinedOutput(); err != nil {
		return "", fmt.Errorf("qemu-img: %v %s", err, out)
	}
	return disk, nil
}

// Virsh runs virsh against qemu:///system.
func Virsh(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-c", "qemu:///system"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// copyTree copies regular files and directories (module caches are read-only: copies are writable).
func copyTree(src, dst string, skip func(string, fs.DirEntry) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if skip != nil && rel != "." && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
