package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Most users run Helm 3: the chart lints (--strict) and renders with Helm 3 (the version helm3/go.mod
// pins, the real `helm` command) exactly as with Helm 4, for the defaults and with everything on.
func TestHelm3(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds Helm 3 (go build in helm3/)")
	}
	helm3 := filepath.Join(t.TempDir(), "helm")
	if out, err := exec.Command("go", "build", "-C", "helm3", "-o", helm3, "helm.sh/helm/v3/cmd/helm").CombinedOutput(); err != nil {
		t.Fatalf("building Helm 3: %v\n%s", err, out)
	}
	out, err := exec.Command(helm3, "version", "--short").Output()
	if err != nil || !strings.HasPrefix(string(out), "v3.") {
		t.Fatalf("helm version: %q %v", out, err)
	}
	t.Logf("Helm %s", strings.TrimSpace(string(out)))

	valuesFile := filepath.Join(t.TempDir(), "everything.yaml")
	if err := os.WriteFile(valuesFile, []byte(everythingOn), 0o644); err != nil {
		t.Fatal(err)
	}
	everything := map[string]any{}
	if err := yaml.Unmarshal([]byte(everythingOn), &everything); err != nil {
		t.Fatal(err)
	}
	kv := strings.TrimPrefix(kubeVersion.Version, "v")
	for _, c := range []struct {
		name string
		args []string
		vals map[string]any
	}{
		{"defaults", nil, nil},
		{"everything on", []string{"--values", valuesFile}, everything},
	} {
		lint := append([]string{"lint", "--strict", "--namespace", namespace, "--kube-version", kv, chartDir}, c.args...)
		if out, err := exec.Command(helm3, lint...).CombinedOutput(); err != nil {
			t.Errorf("%s: helm 3 lint: %v\n%s", c.name, err, out)
		}
		tmpl := append([]string{"template", "slipway", chartDir, "--namespace", namespace, "--kube-version", kv}, c.args...)
		cmd := exec.Command(helm3, tmpl...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		manifest, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: helm 3 template: %v\n%s", c.name, err, stderr.String())
		}
		got := keptNamespace(t, parse(t, string(manifest)))
		if len(got) < 12 {
			t.Errorf("%s: Helm 3 rendered %d objects", c.name, len(got))
		}
		for _, d := range differences(helm(t, c.vals), got) {
			t.Errorf("%s: Helm 4 → Helm 3: %s", c.name, d)
		}
	}
	// Helm 3 refuses what Helm 4 refuses: a value the schema does not know.
	if out, err := exec.Command(helm3, "template", "slipway", chartDir, "--namespace", namespace, "--set", "operator.bogus=1").CombinedOutput(); err == nil {
		t.Errorf("helm 3 rendered with an unknown value:\n%s", out)
	}
}
