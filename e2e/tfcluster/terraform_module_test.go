// Tests of terraform/, offline: formatting; the platform-neutral Ignition module really applied
// (it needs no provider) and its output checked with Ignition's parser; the libvirt example
// initialised from a mirror of the provider built from the Go proxy, validated, planned and applied
// against a real libvirtd with a stand-in disk (no Flatcar image can be downloaded here), then
// destroyed. What only a Flatcar image proves (kubeadm on the nodes) runs when FLATCAR_IMAGE is set.
package tfcluster_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/hashicorp/terraform-exec/tfexec"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slipway-dev/slipway/e2e/tfcluster"
	"github.com/slipway-dev/slipway/internal/clusterpki"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func needTerraform(t *testing.T) {
	t.Helper()
	testenv.NeedRealParts(t, "terraform")
	if _, err := tfcluster.TerraformBinary(); err != nil {
		t.Skip(err)
	}
}

func TestFormatted(t *testing.T) {
	needTerraform(t)
	bin, _ := tfcluster.TerraformBinary()
	out, err := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", filepath.Join(repoRoot(t), "terraform")).CombinedOutput()
	if err != nil {
		t.Fatalf("terraform fmt -check: %v\n%s", err, out)
	}
}

func workspace(t *testing.T, mirror string) *tfcluster.Workspace {
	t.Helper()
	w, err := tfcluster.NewWorkspace(repoRoot(t), t.TempDir(), mirror)
	if err != nil {
		t.Fatal(err)
	}
	w.Stderr = &testWriter{t}
	return w
}

// initExample copies terraform/ into a temporary workspace, writes fresh PKI variables for the
// example in sub and runs terraform init there (offline: providers only from mirror, if any).
func initExample(t *testing.T, mirror, sub string) (*tfexec.Terraform, *clusterpki.Secrets) {
	t.Helper()
	w := workspace(t, mirror)
	secrets, err := w.WriteSecrets(sub)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := w.Terraform(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.Init(context.Background()); err != nil {
		t.Fatalf("terraform init (providers from %q only): %v", mirror, err)
	}
	return tf, secrets
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func parseIgnition(t *testing.T, raw string) types.Config {
	t.Helper()
	cfg, rpt, err := v34.Parse([]byte(raw))
	if err != nil || len(rpt.Entries) > 0 {
		t.Fatalf("Ignition rejects the module's output: %v\n%s\n%s", err, rpt, raw)
	}
	return cfg
}

func fileData(t *testing.T, cfg types.Config, path string) (string, bool) {
	t.Helper()
	for _, f := range cfg.Storage.Files {
		if f.Path == path && f.Contents.Source != nil {
			if !strings.HasPrefix(*f.Contents.Source, "data:") {
				return *f.Contents.Source, true
			}
			d, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return string(d.Data), true
		}
	}
	return "", false
}

// The per-node Ignition module, really applied, its output parsed by Ignition and checked: Slipway's
// snippet merged unchanged, kubeadm init on the controller with the given CA, kubeadm join with a
// discovery file (CA pinned, no unsafe skip) on workers, the Kubernetes sysext linked.
func TestIgnitionModuleApplied(t *testing.T) {
	needTerraform(t)
	ctx := context.Background()
	tf, secrets := initExample(t, "", "terraform/examples/ignition")
	if err := tf.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := tf.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var controllerIgn string
	var workers map[string]string
	if err := json.Unmarshal(out["controller_ignition"].Value, &controllerIgn); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out["worker_ignition"].Value, &workers); err != nil {
		t.Fatal(err)
	}
	if !out["controller_ignition"].Sensitive {
		t.Error("controller_ignition (holds the CA key) is not sensitive")
	}
	snippet, err := os.ReadFile(filepath.Join(repoRoot(t), "butane", "snippets", "flatcar-slipway.ign"))
	if err != nil {
		t.Fatal(err)
	}

	ctl := parseIgnition(t, controllerIgn)
	if len(ctl.Ignition.Config.Merge) != 1 {
		t.Fatalf("merge %+v", ctl.Ignition.Config.Merge)
	}
	merged, err := dataurl.DecodeString(*ctl.Ignition.Config.Merge[0].Source)
	if err != nil || string(merged.Data) != string(snippet) {
		t.Fatalf("the merged config is not butane/snippets/flatcar-slipway.ign (%v)", err)
	}
	slip := parseIgnition(t, string(merged.Data))
	masked := false
	for _, u := range slip.Systemd.Units {
		masked = masked || (u.Name == "locksmithd.service" && u.Mask != nil && *u.Mask)
	}
	if !masked {
		t.Error("merged snippet does not mask locksmithd")
	}
	if got, _ := fileData(t, ctl, "/etc/kubernetes/pki/ca.key"); got != secrets.CAKey {
		t.Error("controller's ca.key is not the given CA key")
	}
	if got, _ := fileData(t, ctl, "/etc/kubernetes/pki/ca.crt"); got != secrets.CACert {
		t.Error("controller's ca.crt is not the given CA")
	}
	init, _ := fileData(t, ctl, "/etc/kubernetes/kubeadm.yaml")
	for _, want := range []string{"kind: InitConfiguration", secrets.BootstrapToken, "controlPlaneEndpoint: \"10.17.3.10:6443\"", "kubernetesVersion: v1.35.4", "cgroupDriver: systemd"} {
		if !strings.Contains(init, want) {
			t.Errorf("controller kubeadm.yaml lacks %q:\n%s", want, init)
		}
	}
	if src, ok := fileData(t, ctl, "/opt/extensions/kubernetes/kubernetes-v1.35.4-x86-64.raw"); !ok || !strings.HasPrefix(src, "https://") {
		t.Errorf("sysext source %q", src)
	}
	if len(ctl.Storage.Links) != 1 || ctl.Storage.Links[0].Path != "/etc/extensions/kubernetes.raw" {
		t.Errorf("sysext link %+v", ctl.Storage.Links)
	}
	units := map[string]types.Unit{}
	for _, u := range ctl.Systemd.Units {
		units[u.Name] = u
	}
	if u := units["kubeadm.service"]; u.Enabled == nil || !*u.Enabled || u.Contents == nil || !strings.Contains(*u.Contents, "kubeadm init --config /etc/kubernetes/kubeadm.yaml") {
		t.Errorf("kubeadm.service on the controller: %+v", u)
	}

	kubeadmValidate(t, init, nil)

	if len(workers) != 2 {
		t.Fatalf("workers %v", workers)
	}
	for name, raw := range workers {
		wk := parseIgnition(t, raw)
		if _, ok := fileData(t, wk, "/etc/kubernetes/pki/ca.key"); ok {
			t.Errorf("%s got the CA key", name)
		}
		join, _ := fileData(t, wk, "/etc/kubernetes/kubeadm.yaml")
		if !strings.Contains(join, "kind: JoinConfiguration") || !strings.Contains(join, "name: "+name) || strings.Contains(join, "unsafeSkipCAVerification: true") {
			t.Errorf("%s kubeadm.yaml:\n%s", name, join)
		}
		disc, _ := fileData(t, wk, "/etc/kubernetes/discovery.conf")
		if !strings.Contains(disc, "server: https://10.17.3.10:6443") || !strings.Contains(disc, "certificate-authority-data:") {
			t.Errorf("%s discovery.conf:\n%s", name, disc)
		}
		if host, _ := fileData(t, wk, "/etc/hostname"); host != name+"\n" {
			t.Errorf("%s hostname %q", name, host)
		}
		// The discovery file resolves, as kubeadm reads it (the current context's cluster), to the
		// controller with the CA pinned.
		kc, err := clientcmd.Load([]byte(disc))
		if err != nil {
			t.Fatalf("%s discovery.conf: %v", name, err)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
		if err != nil || rc.Host != "https://10.17.3.10:6443" || string(rc.CAData) != secrets.CACert {
			t.Errorf("%s discovery.conf resolves to %v (CA pinned: %v): %v", name, rc, rc != nil && string(rc.CAData) == secrets.CACert, err)
		}
		kubeadmValidate(t, join, map[string]string{"/etc/kubernetes/discovery.conf": disc})
	}
}

// kubeadmValidate runs `kubeadm config validate` (kubeadm v1.35.4, built from the Go proxy by
// hack/build-controlplane.sh) on a rendered config; files it refers to are written to a temporary
// directory and the paths rewritten.
func kubeadmValidate(t *testing.T, config string, files map[string]string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(t), "hack", "build-controlplane.sh"), "kubeadm").Output()
	if err != nil {
		t.Fatalf("building kubeadm: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	kubeadm := filepath.Join(lines[len(lines)-1], "kubeadm")
	dir := t.TempDir()
	for path, data := range files {
		local := filepath.Join(dir, filepath.Base(path))
		if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		config = strings.ReplaceAll(config, path, local)
	}
	cfg := filepath.Join(dir, "kubeadm.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(kubeadm, "config", "validate", "--config", cfg).CombinedOutput(); err != nil {
		t.Errorf("kubeadm config validate rejects the module's config: %v\n%s\n%s", err, out, config)
	}
}

// Bad variables are refused by the module's validations before anything is created.
func TestIgnitionModuleRejectsBadInput(t *testing.T) {
	needTerraform(t)
	ctx := context.Background()
	tf, _ := initExample(t, "", "terraform/examples/ignition")
	for name, c := range map[string]struct{ v, want string }{
		"token":    {"bootstrap_token=not-a-token", "bootstrap_token must match"},
		"hostname": {`workers=["Worker_0"]`, "name must be a DNS label"},
		"ca":       {"ca_cert_pem=hello", "ca_cert_pem must be a PEM certificate"},
	} {
		_, err := tf.Plan(ctx, tfexec.Var(c.v))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: plan with %s: %v", name, c.v, err)
		}
	}
}

// The libvirt example: init from the mirror, validate, plan, and a real apply against libvirtd with
// a blank stand-in disk in place of Flatcar's image (the domains start but boot nothing: what it
// proves is the provider wiring — pool, volumes on a backing image, network with fixed addresses,
// the Ignition volume and fw_cfg key), then destroy.
func TestLibvirtExample(t *testing.T) {
	needTerraform(t)
	if os.Getenv("SLIPWAY_SKIP_LIBVIRT") != "" {
		t.Skip("SLIPWAY_SKIP_LIBVIRT set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mirror, err := tfcluster.Mirror(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	tf, _ := initExample(t, mirror, "terraform/examples/libvirt")
	v, err := tf.Validate(ctx)
	if err != nil || !v.Valid {
		t.Fatalf("validate: %v %+v", err, v)
	}

	unlock, err := tfcluster.Lock("libvirt") // one test cluster on libvirt's 10.17.3.0/24 at a time
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	stop, err := tfcluster.Libvirtd(ctx, t.Logf)
	if err != nil {
		t.Skipf("no libvirtd (validate passed; plan and apply need one): %v", err)
	}
	defer stop()
	disk, err := tfcluster.StandinDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	name := "slipwaytest" + time.Now().Format("150405")
	pool := "/var/lib/libvirt/images/" + name // the module's default: qemu (user libvirt-qemu) can read it
	defer os.RemoveAll(pool)
	vars := []string{"flatcar_image=" + disk, "domain_type=qemu", "worker_count=1", "cluster_name=" + name}
	planOpts := []tfexec.PlanOption{tfexec.Out("plan.out")}
	for _, v := range vars {
		planOpts = append(planOpts, tfexec.Var(v))
	}
	changed, err := tf.Plan(ctx, planOpts...)
	if err != nil || !changed {
		t.Fatalf("plan: changed=%v %v", changed, err)
	}
	plan, err := tf.ShowPlanFile(ctx, "plan.out")
	if err != nil {
		t.Fatal(err)
	}
	creates := map[string]int{}
	for _, rc := range plan.ResourceChanges {
		if rc.Change.Actions.Create() {
			creates[rc.Type]++
		}
	}
	if creates["libvirt_domain"] != 2 || creates["libvirt_ignition"] != 2 || creates["libvirt_volume"] != 3 || creates["libvirt_network"] != 1 {
		t.Fatalf("plan creates %v; want 2 domains, 2 Ignition volumes, 3 volumes, 1 network", creates)
	}

	var destroyOpts []tfexec.DestroyOption
	var applyOpts []tfexec.ApplyOption
	for _, v := range vars {
		destroyOpts = append(destroyOpts, tfexec.Var(v))
		applyOpts = append(applyOpts, tfexec.Var(v))
	}
	defer func() {
		if err := tf.Destroy(context.Background(), destroyOpts...); err != nil {
			t.Errorf("destroy: %v", err)
		}
		if out, _ := tfcluster.Virsh(context.Background(), "list", "--all", "--name"); strings.Contains(out, name) {
			t.Errorf("domains left after destroy:\n%s", out)
		}
	}()
	if err := tf.Apply(ctx, applyOpts...); err != nil {
		t.Fatalf("apply: %v", err)
	}
	list, _ := tfcluster.Virsh(ctx, "list", "--name")
	for _, d := range []string{name + "-controller", name + "-worker-0"} {
		if !strings.Contains(list, d) {
			t.Errorf("domain %s not running:\n%s", d, list)
		}
		xml, err := tfcluster.Virsh(ctx, "dumpxml", d)
		if err != nil {
			t.Fatalf("dumpxml %s: %v", d, err)
		}
		if !strings.Contains(xml, "name=opt/org.flatcar-linux/config,file="+pool+"/"+d+".ign") {
			t.Errorf("%s: no Flatcar fw_cfg Ignition in its XML:\n%s", d, xml)
		}
		if !strings.Contains(xml, "type='qemu'") {
			t.Errorf("%s is not a TCG (type qemu) domain", d)
		}
	}
	// The Ignition libvirt hands the controller is the module's, byte for byte.
	ign, err := os.ReadFile(filepath.Join(pool, name+"-controller.ign"))
	if err != nil {
		t.Fatalf("Ignition volume: %v", err)
	}
	cfg := parseIgnition(t, string(ign))
	if _, ok := fileData(t, cfg, "/etc/kubernetes/pki/ca.key"); !ok {
		t.Error("the controller's Ignition volume lacks the CA")
	}
	out, err := tf.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kubeconfig string
	_ = json.Unmarshal(out["kubeconfig"].Value, &kubeconfig)
	if !out["kubeconfig"].Sensitive {
		t.Error("the kubeconfig output is not sensitive")
	}
	kc, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("kubeconfig output does not load: %v", err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig output: %v", err)
	}
	if rc.Host != "https://10.17.3.10:6443" || len(rc.CertData) == 0 || len(rc.KeyData) == 0 || len(rc.CAData) == 0 {
		t.Errorf("kubeconfig: host %q, cert %d B, key %d B, CA %d B", rc.Host, len(rc.CertData), len(rc.KeyData), len(rc.CAData))
	}
}
