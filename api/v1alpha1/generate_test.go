package v1alpha1_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// What `make generate` writes from these types is what the repository holds: the deepcopy functions
// and the CRD for kustomize and Helm. controller-gen runs into a temporary directory (built once at
// the pinned version; skipped under -short, which starts nothing).
func TestGenerated(t *testing.T) {
	testenv.NeedRealParts(t, "controller-gen (built from the Go module proxy)")
	out := t.TempDir()
	cmd := exec.Command("../../hack/generate.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate.sh: %v\n%s", err, b)
	}
	for _, f := range []string{
		"api/v1alpha1/zz_generated.deepcopy.go",
		"deploy/base/crd/update.slipway.dev_rebootpolicies.yaml",
		"deploy/helm/slipway/templates/crd-rebootpolicies.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatalf("%v: run `make generate`", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run `make generate` (it is generated from api/v1alpha1)", f)
		}
	}
}
