package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/testsupport/argohealth"
)

const argoCheck = "argocd/resource_customizations/update.slipway.dev/RebootPolicy"

// The Argo CD health check, run as Argo CD runs it (gopher-lua, obj) on the fixtures in Argo CD's own
// layout (health_test.yaml beside health.lua): every test's status and message.
func TestArgoCDHealthCheck(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(argoCheck, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(argoCheck, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []struct {
			HealthStatus struct{ Status, Message string } `json:"healthStatus"`
			InputPath    string                           `json:"inputPath"`
		} `json:"tests"`
	}
	if err := yaml.UnmarshalStrict(b, &suite); err != nil {
		t.Fatal(err)
	}
	if len(suite.Tests) < 6 {
		t.Fatalf("%d tests in health_test.yaml", len(suite.Tests))
	}
	for _, tc := range suite.Tests {
		in, err := os.ReadFile(filepath.Join(argoCheck, tc.InputPath))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(in, &obj); err != nil {
			t.Fatal(err)
		}
		status, msg, err := argohealth.Evaluate(script, obj)
		if err != nil {
			t.Fatalf("%s: %v", tc.InputPath, err)
		}
		if status != tc.HealthStatus.Status || msg != tc.HealthStatus.Message {
			t.Errorf("%s: %s %q, want %s %q", tc.InputPath, status, msg, tc.HealthStatus.Status, tc.HealthStatus.Message)
		}
	}
}
