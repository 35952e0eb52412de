package updateconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEdit(t *testing.T) {
	cases := []struct {
		name    string
		content string
		exists  bool
		want    Settings
		out     string
		changed bool
		err     error
	}{
		{name: "no file", want: Settings{Group: "beta"}, out: Marker + "\nGROUP=beta\n", changed: true},
		{name: "no file, both", want: Settings{Group: "beta", Server: "https://u.example/v1/update/"},
			out: Marker + "\nGROUP=beta\nSERVER=https://u.example/v1/update/\n", changed: true},
		{name: "nothing wanted", content: "GROUP=stable\n", exists: true, out: "GROUP=stable\n"},
		{name: "user's file already right", content: "GROUP=beta\nREBOOT_STRATEGY=off\n", exists: true,
			want: Settings{Group: "beta"}, out: "GROUP=beta\nREBOOT_STRATEGY=off\n"},
		{name: "user's file, quoted: not what update_engine reads as beta", content: "GROUP=\"beta\"\n", exists: true,
			want: Settings{Group: "beta"}, out: "GROUP=\"beta\"\n", err: ErrNotManaged},
		{name: "managed, quoted, indented or CRLF: rewritten plain", exists: true,
			content: Marker + "\nGROUP=\"beta\"\n SERVER=https://a/\r\n",
			want:    Settings{Group: "beta", Server: "https://a/"},
			out:     Marker + "\nGROUP=beta\nSERVER=https://a/\n", changed: true},
		{name: "a look-alike marker is no marker", content: "# managed-by: slipway-not\nGROUP=stable\n", exists: true,
			want: Settings{Group: "beta"}, out: "# managed-by: slipway-not\nGROUP=stable\n", err: ErrNotManaged},
		{name: "user's file refused", content: "GROUP=stable\nREBOOT_STRATEGY=off\n", exists: true,
			want: Settings{Group: "beta"}, out: "GROUP=stable\nREBOOT_STRATEGY=off\n", err: ErrNotManaged},
		{name: "managed: replaced in place, others kept", exists: true,
			content: "# mine\n" + Marker + "\nREBOOT_STRATEGY=off\nGROUP=stable\n  # keep me\nSERVER=https://old/\n",
			want:    Settings{Group: "beta"},
			out:     "# mine\n" + Marker + "\nREBOOT_STRATEGY=off\nGROUP=beta\n  # keep me\nSERVER=https://old/\n", changed: true},
		{name: "managed: later duplicates removed", exists: true,
			content: markerPrefix + "\nGROUP=stable\nX=1\nGROUP=alpha\n",
			want:    Settings{Group: "beta"},
			out:     markerPrefix + "\nGROUP=beta\nX=1\n", changed: true},
		{name: "managed: missing key appended, no final newline", exists: true,
			content: Marker + "\nREBOOT_STRATEGY=off",
			want:    Settings{Server: "https://nebraska.example/v1/update/"},
			out:     Marker + "\nREBOOT_STRATEGY=off\nSERVER=https://nebraska.example/v1/update/\n", changed: true},
		{name: "managed: only the differing key matters", exists: true,
			content: Marker + "\nGROUP=beta\nSERVER=https://a/\n",
			want:    Settings{Group: "beta", Server: "https://b/"},
			out:     Marker + "\nGROUP=beta\nSERVER=https://b/\n", changed: true},
		{name: "commented key is not a key", exists: true,
			content: Marker + "\n#GROUP=beta\n",
			want:    Settings{Group: "beta"},
			out:     Marker + "\n#GROUP=beta\nGROUP=beta\n", changed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, changed, err := Edit([]byte(c.content), c.exists, c.want)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if string(out) != c.out || changed != c.changed {
				t.Errorf("Edit = %q, %v; want %q, %v", out, changed, c.out, c.changed)
			}
			if err == nil {
				if got, _ := Read(out); (c.want.Group != "" && got.Group != c.want.Group) || (c.want.Server != "" && got.Server != c.want.Server) {
					t.Errorf("Read(Edit) = %+v, want %+v", got, c.want)
				}
				// Idempotent: editing the result again changes nothing.
				if again, ch, err := Edit(out, true, c.want); err != nil || ch || string(again) != string(out) {
					t.Errorf("second Edit = %q, %v, %v", again, ch, err)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := []Settings{
		{Group: "stable"}, {Group: "beta"}, {Group: "lts"}, {Group: "6a1f3e2b-0c7d-4c3a-9b9e-6f2b0d7c1a11"},
		{Server: "https://public.update.flatcar-linux.net/v1/update/"},
		{Group: "alpha", Server: "https://nebraska.internal:8443/v1/update/"},
	}
	for _, s := range good {
		if err := s.Validate(false); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	bad := map[string]Settings{
		"space":           {Group: "my group"},
		"newline":         {Group: "beta\nSERVER=https://evil/"},
		"quote":           {Group: `beta"`},
		"too long":        {Group: strings.Repeat("a", 64)},
		"http":            {Server: "http://nebraska.internal/v1/update/"},
		"no scheme":       {Server: "nebraska.internal/v1/update/"},
		"ftp":             {Server: "ftp://x/"},
		"no host":         {Server: "https:///v1/update/"},
		"newline server":  {Server: "https://a/\nGROUP=x"},
		"space server":    {Server: "https://a/ b"},
		"credentials":     {Server: "https://user:pw@a/"},
		"shell expansion": {Server: "https://$(reboot)/"},
		"overlong":        {Server: "https://a/" + strings.Repeat("x", MaxServerLen)},
	}
	for name, s := range bad {
		if err := s.Validate(false); err == nil {
			t.Errorf("%s: %+v accepted", name, s)
		}
	}
	if err := (Settings{Server: "http://nebraska.internal/v1/update/"}).Validate(true); err != nil {
		t.Errorf("http with allowHTTP: %v", err)
	}
}

func TestApply(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, Path)
	// No file, no directory: both made, the marker first.
	if changed, err := Apply(root, Settings{Group: "beta"}); err != nil || !changed {
		t.Fatalf("Apply = %v, %v", changed, err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != Marker+"\nGROUP=beta\n" {
		t.Errorf("file = %q", b)
	}
	if changed, err := Apply(root, Settings{Group: "beta"}); err != nil || changed {
		t.Errorf("second Apply = %v, %v", changed, err)
	}
	// The user's own file: refused, untouched, its mode kept.
	if err := os.WriteFile(path, []byte("GROUP=stable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(root, Settings{Group: "beta"}); !errors.Is(err, ErrNotManaged) {
		t.Errorf("user's file: err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "GROUP=stable\n" {
		t.Errorf("user's file changed: %q", b)
	}
	// With the marker added it is edited, its mode kept, no temporary file left behind.
	if err := os.WriteFile(path, []byte(markerPrefix+"\nGROUP=stable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := Apply(root, Settings{Group: "beta"}); err != nil || !changed {
		t.Fatalf("marked file: %v, %v", changed, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want update.conf alone", len(ents))
	}
	// A symlink is refused, whatever it points at.
	os.Remove(path)
	target := filepath.Join(root, "elsewhere")
	os.WriteFile(target, []byte(Marker+"\n"), 0o644)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(root, Settings{Group: "beta"}); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("symlink: err = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != Marker+"\n" {
		t.Errorf("symlink target changed: %q", b)
	}
}

// Slipway's new-node Butane snippet writes the Marker as update.conf's first line (butane/ spells it
// out, being a module of its own): the two must not drift apart.
func TestNewNodeSnippetCarriesTheMarker(t *testing.T) {
	b, err := os.ReadFile("../../butane/snippets/flatcar-new-node.bu")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n          "+Marker+"\n") {
		t.Errorf("flatcar-new-node.bu does not write %q", Marker)
	}
}
