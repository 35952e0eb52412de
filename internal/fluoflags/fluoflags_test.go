package fluoflags

import (
	"flag"
	"reflect"
	"testing"

	"k8s.io/klog/v2"
)

func TestAddKlog(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	own := fs.String("log_dir", "mine", "a flag the binary defines itself")
	AddKlog(fs)
	if missing := Undefined(fs, Klog); len(missing) > 0 {
		t.Fatalf("klog no longer has FLUO's %v", missing)
	}
	if err := fs.Set("log_dir", "/x"); err != nil || *own != "/x" {
		t.Errorf("AddKlog replaced the binary's own -log_dir")
	}
	// Bound to klog itself, not to a copy.
	old := fs.Lookup("vmodule").Value.String()
	defer func() { _ = fs.Set("vmodule", old) }()
	if err := fs.Set("vmodule", "fluoflags_test=3"); err != nil {
		t.Fatal(err)
	}
	if !klog.V(3).Enabled() {
		t.Error("-vmodule set through the flag set does not reach klog")
	}
}

func TestWarnings(t *testing.T) {
	ignored := []Ignored{{"grace-period", "the agent never drains"}, {"other", "why"}}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("grace-period", 600, "")
	fs.Int("other", 0, "")
	if got := Warnings(fs, ignored); got != nil {
		t.Errorf("nothing given, warnings %v", got)
	}
	if err := fs.Parse([]string{"-grace-period=30"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"flag -grace-period is FLUO's and has no effect in Slipway: the agent never drains"}
	if got := Warnings(fs, ignored); !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings = %q, want %q", got, want)
	}
}
