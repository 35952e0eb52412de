package updateconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Apply makes the update.conf under root set what want declares, through Edit: written to a temporary
// file in the same directory, synced and renamed over the old one, so update_engine never reads half a
// file and a crash leaves the old one or the new one. It refuses anything but a regular file (a symlink
// may point anywhere). changed reports whether it wrote.
func Apply(root string, want Settings) (changed bool, err error) {
	path := filepath.Join(root, Path)
	mode := fs.FileMode(0o644)
	var content []byte
	exists := false
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	case !fi.Mode().IsRegular():
		return false, fmt.Errorf("/%s is not a regular file (%s); Slipway edits only a regular file", Path, fi.Mode().Type())
	default:
		exists = true
		mode = fi.Mode().Perm()
		if content, err = os.ReadFile(path); err != nil {
			return false, err
		}
	}
	out, changed, err := Edit(content, exists, want)
	if err != nil || !changed {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".update.conf.slipway-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename's durability; not worth failing for
		d.Close()
	}
	return true, nil
}
