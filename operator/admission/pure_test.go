package admission

import (
	"os/exec"
	"strings"
	"testing"
)

// Admission is pure: no Kubernetes client, informer, lister or REST machinery anywhere in what it
// imports (k8s.io/api types are data).
func TestImportsNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: cannot judge", len(deps))
	}
	for _, d := range deps {
		for _, bad := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/listers", "k8s.io/client-go/rest", "k8s.io/client-go/tools"} {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("operator/admission depends on %s", d)
			}
		}
	}
}
