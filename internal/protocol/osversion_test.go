package protocol

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Versions are compared in one normal form: a node that rebooted for update_engine's
// "4593.2.5+dev-1" and came back labelled "4593.2.5-dev-1" (the agent's label form) is on it, not
// back on its old version; what it asks for is kept in that form.
func TestVersionsInOneNormalForm(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{Version: "4593.2.5-dev-1"},
		Annotations: map[string]string{RebootVersion: "4593.2.5+dev-1", RebootOK: True}}}
	if f := Observe(n, Hooks{}); f.OldVersion {
		t.Error("a good reboot into a + build read as back on the old version")
	}
	n.Labels[Version] = "4593.2.4"
	if f := Observe(n, Hooks{}); !f.OldVersion {
		t.Error("back on 4593.2.4 after rebooting for 4593.2.5+dev-1: not old-version")
	}
	n.Annotations[NewVersion] = "4593.2.5+dev-1"
	if v := AskedVersion(n); v != "4593.2.5-dev-1" {
		t.Errorf("asked %q", v)
	}
	n.Labels[Version] = "4593.2.5-dev-1"
	if v := AskedVersion(n); v != "" {
		t.Errorf("on the version it names: asked %q", v)
	}
}

func TestValidVersion(t *testing.T) {
	for _, ok := range []string{"4593.2.5", "4593.2.5+dev-1", "1.2.3_rc"} {
		if err := ValidVersion(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "4600/0", string(make([]byte, 129))} {
		if err := ValidVersion(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// OS versions order as Flatcar numbers them, whatever their suffix.
func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"4152.2.3", "4152.2.3", 0},
		{"4152.2.3", "4152.2.10", -1}, // numbers, not text
		{"4230.0.0", "4152.2.3", 1},
		{"", "3975.2.0", -1},
		{"3975.2.0", "", 1},
		{"4152.2", "4152.2.1", -1},
		{"4152.2.3", "4152.2.3+nightly-20261101", -1},
	} {
		if got := CompareVersions(c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareVersions(c.b, c.a); got != -c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d (antisymmetric)", c.b, c.a, got, -c.want)
		}
	}
}
