package fleetlock

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestNodeIDKnownAnswer(t *testing.T) {
	// Computed by systemd 252 itself: `systemd-id128 machine-id --app-specific=de35106b6ec24688b63afddaa156679b`
	// on a machine whose /etc/machine-id is 3d1219c7c4c5404aaa1f6d2a48adfda4.
	for _, in := range []string{"3d1219c7c4c5404aaa1f6d2a48adfda4", "3D1219C7-C4C5-404A-AA1F-6D2A48ADFDA4\n"} {
		got, err := NodeID(in)
		if err != nil || got != "975228d46dc94622b9bbe16671e2b58d" {
			t.Errorf("NodeID(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "xyz", "3d1219c7c4c5404a", "3d1219c7c4c5404aaa1f6d2a48adfda400"} {
		if _, err := NodeID(bad); err == nil {
			t.Errorf("NodeID(%q) accepted", bad)
		}
	}
}

// Against this machine's real systemd, when it has one.
func TestNodeIDMatchesSystemd(t *testing.T) {
	bin, err := exec.LookPath("systemd-id128")
	if err != nil {
		t.Skip("systemd-id128 not installed")
	}
	mid, err := os.ReadFile("/etc/machine-id")
	if err != nil || len(strings.TrimSpace(string(mid))) != 32 {
		t.Skip("no /etc/machine-id")
	}
	out, err := exec.Command(bin, "machine-id", "--app-specific=de35106b6ec24688b63afddaa156679b").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := NodeID(string(mid))
	if err != nil || got != strings.TrimSpace(string(out)) {
		t.Fatalf("NodeID = %q, systemd says %q (%v)", got, out, err)
	}
}
