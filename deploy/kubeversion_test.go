package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// On a cluster without ValidatingAdmissionPolicy v1 (Kubernetes before 1.30), the install command
// docs/install.md gives (a client-side dry run, then the apply) refuses before creating anything: the
// dry run cannot map the policies' kind and fails, so the apply never runs. A plain `kubectl apply -f`
// creates everything else and reports the policies missing: an operator and agents unconfined. The
// API server here is 1.35 with the v1 policy resources switched off, as 1.29 serves them (beta only);
// on a fresh 1.35 the same command installs.
func TestInstallRefusedWithoutPolicies(t *testing.T) {
	if testenv.Short() {
		t.Skip("-short: starts kube-apiserver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := testenv.StartControlPlane(ctx, t.TempDir(), testenv.Options{APIServerArgs: []string{
		"--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
		"--disable-admission-plugins=ServiceAccount,ValidatingAdmissionPolicy",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(file, []byte(kustomize(t, ".")), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	// The command of docs/install.md, as a shell runs it.
	install := func(kubeconfig string) (string, error) {
		k := kubectl + " --kubeconfig " + kubeconfig
		out, err := exec.CommandContext(ctx, "/bin/sh", "-c", k+" apply --dry-run=client -f "+file+" && "+k+" apply -f "+file).CombinedOutput()
		return string(out), err
	}
	// The precondition: this API server does not serve the kind, as 1.29 does not.
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.Kubeconfig, "api-resources", "--api-group=admissionregistration.k8s.io", "-o", "name").CombinedOutput(); err != nil || strings.Contains(string(out), "validatingadmissionpolicies") {
		t.Fatalf("the API server still serves the policies (%v):\n%s", err, out)
	}
	out, err := install(cp.Kubeconfig)
	if err == nil {
		t.Fatalf("the install passed on a cluster without ValidatingAdmissionPolicy v1:\n%s", out)
	}
	if !strings.Contains(out, "ValidatingAdmissionPolicy") {
		t.Errorf("the refusal does not name the missing kind:\n%s", out)
	}
	if _, err := cp.Client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s exists after the refused install", ns)
	}
	// What the dry run guards against: a plain apply creates the rest and reports the policies.
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "-f", file).CombinedOutput(); err == nil {
		t.Errorf("a plain apply passed without the policies:\n%s", out)
	}
	if _, err := cp.Client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("a plain apply created nothing (%v): then the dry run guards nothing here", err)
	}

	// On a fresh cluster that serves them, the same command installs.
	fresh, err := testenv.StartControlPlane(ctx, t.TempDir(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Stop()
	if out, err := install(fresh.Kubeconfig); err != nil {
		t.Errorf("the install fails on a fresh 1.35 cluster: %v\n%s", err, out)
	}
	if _, err := fresh.Client().AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "slipway-update-operator", metav1.GetOptions{}); err != nil {
		t.Errorf("installed without the operator's policy: %v", err)
	}
}
