package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The product module's dependency graph holds none of the test machinery's libraries (they belong to
// the e2e/ and deploy/helmtest modules): README "Layout".
func TestProductModuleLean(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	machinery := []string{"sigs.k8s.io/e2e-framework", "github.com/hashicorp/terraform-exec", "sigs.k8s.io/kind",
		"github.com/google/go-containerregistry", "helm.sh/helm"}
	modules := func(dir string) map[string]bool {
		cmd := exec.Command("go", "list", "-m", "all")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -m all in %s: %v", dir, err)
		}
		m := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				m[f[0]] = true
			}
		}
		return m
	}
	// The check sees these modules where they are: the e2e module lists e2e-framework.
	if !modules(filepath.Join(root, "e2e"))["sigs.k8s.io/e2e-framework"] {
		t.Fatal("go list -m all in e2e/ does not list sigs.k8s.io/e2e-framework: the check below would prove nothing")
	}
	product := modules(root)
	for _, m := range machinery {
		if product[m] {
			t.Errorf("the product module's graph holds %s (test machinery belongs to e2e/ or deploy/helmtest)", m)
		}
	}
}

// The shipped binaries link no test support: internal/testsupport is for tests, the demo and e2e/
// only (README "Layout").
func TestBinariesLinkNoTestSupport(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./agent/cmd/update-agent", "./operator/cmd/update-operator", "./operator/cmd/kubectl-slipway")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	seen := false
	for _, d := range deps {
		seen = seen || d == "github.com/slipway-dev/slipway/operator/admission"
		if strings.Contains(d, "/internal/testsupport/") {
			t.Errorf("a shipped binary links %s", d)
		}
	}
	if !seen {
		t.Fatalf("go list -deps does not list operator/admission: the check proves nothing (%d packages)", len(deps))
	}
}
