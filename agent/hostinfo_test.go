package agent

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSanitizeLabelValue(t *testing.T) {
	cases := map[string]string{
		"flatcar":                      "flatcar",
		"4459.2.1":                     "4459.2.1",
		"3033.2.4+dirty build":         "3033.2.4-dirty-build",
		"-leading.and.trailing_":       "leading.and.trailing",
		"":                             "",
		"///":                          "",
		"beta":                         "beta",
		"my group!":                    "my-group",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
		"ünïcode":                      "n-code",
	}
	for in, want := range cases {
		if got := SanitizeLabelValue(in); got != want {
			t.Errorf("SanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func write(t *testing.T, root, path, content string) {
	t.Helper()
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadHostInfo(t *testing.T) {
	root := t.TempDir()
	write(t, root, "etc/os-release", "# comment\nNAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION='4459.2.1'\nbroken line\n")
	write(t, root, "usr/share/flatcar/update.conf", "GROUP=stable\nSERVER=https://example.com/\n")
	write(t, root, "etc/flatcar/update.conf", "GROUP=\"my beta\"\nREBOOT_STRATEGY=off\n")
	info, problems := ReadHostInfo(root)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := HostInfo{ID: "flatcar", Version: "4459.2.1", Group: "my-beta", Server: "https://example.com/", HaveOS: true, HaveGroup: true, HaveConf: true}
	if info != want {
		t.Errorf("got %+v, want %+v", info, want)
	}
}

func TestReadHostInfoMissingAndUnreadable(t *testing.T) {
	root := t.TempDir()
	// os-release is a directory: unreadable as a file.
	if err := os.MkdirAll(filepath.Join(root, "etc/os-release"), 0o755); err != nil {
		t.Fatal(err)
	}
	info, problems := ReadHostInfo(root)
	if info.HaveOS || info.HaveGroup {
		t.Errorf("nothing was readable but got %+v", info)
	}
	if len(problems) != 2 {
		t.Errorf("want a problem for os-release and one for update.conf, got %v", problems)
	}
	// Only the built-in update.conf: its group counts.
	write(t, root, "usr/share/flatcar/update.conf", "GROUP=alpha\n")
	info, _ = ReadHostInfo(root)
	if !info.HaveGroup || info.Group != "alpha" {
		t.Errorf("got %+v, want group alpha", info)
	}
}

// A failed write of update.conf is reported in words that do not change between attempts (no
// temporary file's name), so the agent does not patch its Node at every sync while it fails.
func TestWriteErrorIsStable(t *testing.T) {
	a := writeError(&fs.PathError{Op: "write", Path: "/host/etc/flatcar/.update.conf.slipway-123", Err: syscall.ENOSPC})
	b := writeError(&fs.PathError{Op: "write", Path: "/host/etc/flatcar/.update.conf.slipway-456", Err: syscall.ENOSPC})
	if a != b || strings.Contains(a, "slipway-123") || !strings.Contains(a, "no space left") {
		t.Errorf("%q vs %q", a, b)
	}
	r := writeError(&os.LinkError{Op: "rename", Old: "/host/etc/flatcar/.update.conf.slipway-1", New: "/host/etc/flatcar/update.conf", Err: syscall.EBUSY})
	if strings.Contains(r, "slipway-1") || !strings.Contains(r, "rename") {
		t.Errorf("%q", r)
	}
}
