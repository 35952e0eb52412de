package tfcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Example is the root module `make cluster BACKEND=terraform` applies.
const Example = "terraform/examples/libvirt"

// Options of the Terraform backend of `make cluster`.
type Options struct {
	Root         string // the repository
	Dir          string // state: a copy of terraform/, tfstate, secrets, kubeconfig
	FlatcarImage string
	Workers      int
	DomainType   string // "kvm" or "qemu"
	Out          io.Writer
	ReadyLimit   time.Duration
	Kubectl      string // kubectl binary, for installing deploy/
}

func (o *Options) logf(format string, args ...interface{}) {
	fmt.Fprintf(o.Out, "[terraform] "+format+"\n", args...)
}

// StateFile is where Terraform keeps the cluster's state; a cluster is up while it exists.
func (o *Options) StateFile() string {
	return filepath.Join(o.Dir, Example, "terraform.tfstate")
}

// vars are the -var flags of apply and destroy (the rest comes from secrets.auto.tfvars.json).
func (o *Options) vars() []string {
	return []string{
		"flatcar_image=" + o.FlatcarImage,
		fmt.Sprintf("worker_count=%d", o.Workers),
		"domain_type=" + o.DomainType,
	}
}

// Up applies the libvirt example, writes the kubeconfig, waits for the nodes and installs Slipway.
// It returns the kubeconfig path. Everything it creates is destroyed by Down(Dir).
func Up(ctx context.Context, o Options) (string, error) {
	if o.FlatcarImage == "" {
		return "", errors.New("the terraform backend boots Flatcar's QEMU image: set FLATCAR_IMAGE=path (make flatcar-image downloads one where there is internet)")
	}
	if _, err := os.Stat(o.FlatcarImage); err != nil {
		return "", fmt.Errorf("FLATCAR_IMAGE: %w", err)
	}
	if _, err := os.Stat(o.StateFile()); err == nil {
		return "", fmt.Errorf("a terraform cluster is already up (state in %s): run `make cluster-down` first", o.Dir)
	}
	if o.ReadyLimit == 0 {
		o.ReadyLimit = 20 * time.Minute
	}
	start := time.Now()
	mirror, err := Mirror(ctx, o.logf)
	if err != nil {
		return "", err
	}
	if _, err := Libvirtd(ctx, o.logf); err != nil { // left running: the cluster needs it
		return "", err
	}
	_ = os.RemoveAll(o.Dir)
	w, err := NewWorkspace(o.Root, o.Dir, mirror)
	if err != nil {
		return "", err
	}
	w.Stdout, w.Stderr = o.Out, o.Out
	if _, err := w.WriteSecrets(Example); err != nil {
		return "", err
	}
	tf, err := w.Terraform(Example)
	if err != nil {
		return "", err
	}
	o.logf("terraform init (providers from the local mirror %s)", mirror)
	if err := tf.Init(ctx); err != nil {
		return "", err
	}
	o.logf("terraform plan: 1 controller + %d workers, domain type %s, image %s", o.Workers, o.DomainType, o.FlatcarImage)
	plan := filepath.Join(o.Dir, "cluster.tfplan")
	opts := []tfexec.PlanOption{tfexec.Out(plan)}
	for _, v := range o.vars() {
		opts = append(opts, tfexec.Var(v))
	}
	if _, err := tf.Plan(ctx, opts...); err != nil {
		return "", fmt.Errorf("terraform plan: %w", err)
	}
	o.logf("terraform apply (the saved plan)")
	if err := tf.Apply(ctx, tfexec.DirOrPlan(plan)); err != nil {
		return "", fmt.Errorf("terraform apply: %w (run `make cluster-down` to remove what was created)", err)
	}
	out, err := tf.Output(ctx)
	if err != nil {
		return "", err
	}
	var kubeconfig string
	if err := json.Unmarshal(out["kubeconfig"].Value, &kubeconfig); err != nil {
		return "", fmt.Errorf("kubeconfig output: %w", err)
	}
	kcPath := filepath.Join(o.Dir, "kubeconfig")
	if err := os.WriteFile(kcPath, []byte(kubeconfig), 0o600); err != nil {
		return "", err
	}
	o.logf("applied in %s; kubeconfig %s; waiting for kubeadm and the nodes (up to %s)", time.Since(start).Round(time.Second), kcPath, o.ReadyLimit)
	if err := waitNodes(ctx, kcPath, o.Workers+1, o.ReadyLimit, o.logf); err != nil {
		return kcPath, err
	}
	o.logf("installing Slipway: kubectl apply -k deploy/")
	apply := exec.CommandContext(ctx, o.Kubectl, "--kubeconfig", kcPath, "apply", "-k", filepath.Join(o.Root, "deploy"))
	apply.Stdout, apply.Stderr = o.Out, o.Out
	if err := apply.Run(); err != nil {
		return kcPath, fmt.Errorf("kubectl apply -k deploy/: %w", err)
	}
	o.logf("cluster ready in %s; Slipway starts paused (--start-paused): check `kubectl slipway status`, then `kubectl slipway resume`", time.Since(start).Round(time.Second))
	return kcPath, nil
}

func waitNodes(ctx context.Context, kubeconfig string, want int, limit time.Duration, logf func(string, ...interface{})) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	last := -1
	for {
		ready := 0
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range nodes.Items {
				if protocol.NodeReady(&nodes.Items[i]) {
					ready++
				}
			}
		}
		if ready != last {
			logf("%d of %d nodes Ready", ready, want)
			last = ready
		}
		if ready >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready after %s (last error: %v); look at the consoles with `virsh console <node>`", ready, want, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// Down destroys what Up created, from the state in dir, and removes dir.
func Down(ctx context.Context, o Options) error {
	if _, err := os.Stat(o.StateFile()); err != nil {
		return fmt.Errorf("no terraform cluster state in %s: nothing to destroy", o.Dir)
	}
	if _, err := Libvirtd(ctx, o.logf); err != nil {
		return err
	}
	w := &Workspace{Dir: o.Dir, CLIConfig: cliConfig(o.Dir), Stdout: o.Out, Stderr: o.Out}
	tf, err := w.Terraform(Example)
	if err != nil {
		return err
	}
	o.logf("terraform destroy")
	// The variables do not matter for destroying what the state records, but must be set.
	var opts []tfexec.DestroyOption
	for _, v := range o.vars() {
		opts = append(opts, tfexec.Var(v))
	}
	if err := tf.Destroy(ctx, opts...); err != nil {
		return fmt.Errorf("terraform destroy: %w (state kept in %s)", err, o.Dir)
	}
	return os.RemoveAll(o.Dir)
}
