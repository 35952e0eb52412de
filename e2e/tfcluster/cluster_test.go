package tfcluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Up and Down of `make cluster BACKEND=terraform` through terraform-exec against a real libvirtd, with
// a blank disk standing in for Flatcar (no image can be downloaded here): apply creates the domains
// and writes the kubeconfig, the wait for nodes gives up with a clear error (nothing boots), a second
// Up is refused while the first is there, Down destroys everything and removes the state.
func TestUpDownLifecycle(t *testing.T) {
	testenv.NeedRealParts(t, "terraform and libvirtd")
	if _, err := TerraformBinary(); err != nil {
		t.Skip(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := Lock("libvirt") // one test cluster on libvirt's 10.17.3.0/24 at a time
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stop, err := Libvirtd(ctx, t.Logf)
	if err != nil {
		t.Skipf("no libvirtd: %v", err)
	}
	defer stop()
	disk, err := StandinDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := Options{Root: root, Dir: filepath.Join(t.TempDir(), "state"), FlatcarImage: disk, Workers: 1, DomainType: "qemu",
		Out: &out, ReadyLimit: 3 * time.Second, Kubectl: "/bin/false"}

	if _, err := Up(ctx, Options{Root: root, Dir: o.Dir, Out: &out}); err == nil || !strings.Contains(err.Error(), "FLATCAR_IMAGE") {
		t.Fatalf("Up without an image: %v", err)
	}
	kc, err := Up(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "0 of 2 nodes Ready") {
		t.Fatalf("Up with a blank disk: %v\n%s", err, out.String())
	}
	if b, rerr := os.ReadFile(kc); rerr != nil || !strings.Contains(string(b), "10.17.3.10:6443") {
		t.Fatalf("kubeconfig %s: %v", kc, rerr)
	}
	list, _ := Virsh(ctx, "list", "--name")
	if !strings.Contains(list, "slipway-controller") || !strings.Contains(list, "slipway-worker-0") {
		t.Fatalf("domains not running:\n%s", list)
	}
	if _, err := Up(ctx, o); err == nil || !strings.Contains(err.Error(), "already up") {
		t.Fatalf("second Up: %v", err)
	}
	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v\n%s", err, out.String())
	}
	if list, _ := Virsh(ctx, "list", "--all", "--name"); strings.Contains(list, "slipway-") {
		t.Fatalf("domains left:\n%s", list)
	}
	if nets, _ := Virsh(ctx, "net-list", "--all", "--name"); strings.Contains(nets, "slipway") {
		t.Fatalf("network left:\n%s", nets)
	}
	if _, err := os.Stat(o.Dir); err == nil {
		t.Fatal("state directory left")
	}
	if err := Down(ctx, o); err == nil || !strings.Contains(err.Error(), "nothing to destroy") {
		t.Fatalf("Down twice: %v", err)
	}
}
